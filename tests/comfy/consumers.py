"""Third-party POSE_KEYPOINT consumers for the interop tests: where comfyui_controlnet_aux is, and how to run it.

comfyui_controlnet_aux comes from its source snapshot (shared/hosts/comfyui_controlnet_aux-*.tar.gz, unpacked into
the ignored `.hosts/` of the checkout) or from ``CONTROLNET_AUX_PATH``; its requirements (opencv, scikit-image,
matplotlib, einops, …) must be installed in ComfyUI's Python. Everything that runs its code runs in that Python,
in a subprocess (consumer_check.py) or in a ComfyUI server with the pack linked next to this one.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
AUX_LINK_NAME = "comfyui_controlnet_aux"
# What controlnet_aux's pose post-processing and its renderer import (its requirements.txt, in part).
AUX_MODULES = ("cv2", "einops", "matplotlib", "skimage", "scipy", "huggingface_hub")


def controlnet_aux_path() -> Path | str:
    """The controlnet_aux checkout, or the reason the tests that need it must skip."""
    candidates: list[Path] = []
    if os.environ.get("CONTROLNET_AUX_PATH"):
        candidates.append(Path(os.environ["CONTROLNET_AUX_PATH"]))
    hosts = REPO / ".hosts" / "hosts.json"
    if hosts.is_file():  # the CI host matrix lists the unpacked snapshot
        entry = json.loads(hosts.read_text(encoding="utf-8")).get("controlnet_aux") or {}
        if entry.get("path"):
            candidates.append(Path(entry["path"]))
    candidates += sorted((REPO / ".hosts").glob("comfyui_controlnet_aux-*"), reverse=True)
    for path in candidates:
        if (path / "node_wrappers" / "pose_keypoint_postprocess.py").is_file():
            return path
    return (
        "comfyui_controlnet_aux not found: unpack shared/hosts/comfyui_controlnet_aux-*.tar.gz into .hosts/ "
        "or set CONTROLNET_AUX_PATH"
    )


def missing_requirements(python: Path) -> list[str]:
    """controlnet_aux's modules that ComfyUI's Python cannot import."""
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    run = subprocess.run(
        [str(python), "-c", probe, *AUX_MODULES], capture_output=True, text=True, timeout=120
    )
    return run.stdout.split()


def run_consumers(
    checkout: Path, python: Path, aux: Path, cases: dict[str, list[dict]], work: Path
) -> tuple[dict, dict[str, np.ndarray]]:
    """Run consumer_check.py on `cases` (name → POSE_KEYPOINT): (its report, its images by name)."""
    work.mkdir(parents=True, exist_ok=True)
    cases_path = work / "cases.json"
    cases_path.write_text(json.dumps(cases), encoding="utf-8")
    run = subprocess.run(
        [str(python), str(HERE / "consumer_check.py"), str(checkout), str(aux), str(cases_path), str(work)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0:
        raise AssertionError(f"consumer_check.py failed:\n{run.stderr[-4000:]}")
    report = json.loads(run.stdout.strip().splitlines()[-1])
    with np.load(work / "images.npz") as data:
        images = {name: data[name] for name in data.files}
    return report, images


def drawn(image: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels a renderer drew on its black canvas."""
    return np.asarray(image).reshape(*np.shape(image)[:2], -1).any(axis=-1)


def agreement(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float]:
    """IoU of the drawn pixels, mean absolute colour difference (0-255) where both drew, exact-pixel share."""
    a, b = drawn(ours), drawn(theirs)
    union, both = a | b, a & b
    colour = np.abs(ours[both].astype(np.int64) - theirs[both].astype(np.int64)).mean() if both.any() else 0.0
    return {
        "iou": float(both.sum() / max(int(union.sum()), 1)),
        "colour_error": float(colour),
        "exact": float(np.all(ours == theirs, axis=-1)[union].mean()) if union.any() else 1.0,
        "ours_pixels": int(a.sum()),
        "their_pixels": int(b.sum()),
    }
