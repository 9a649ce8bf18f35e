"""Runs of the engine on tiny generated inputs, shared by the engine, scale-out and output-store tests: checkpoints
where the engine looks, a moving numbered sequence with its boxes file, a CLI predict of it, and the comparison of
two output folders (every EXR channel, JSON without per-run records, other files byte for byte)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.exr import read_exr
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

FRAMES = 12  # three chunks of four: enough for chunk borders inside the smoothing window
TASKS = "pose,pointmap,normal"
VOLATILE = {"run", "started", "committed", "id"}  # per-run records and timestamps


def write_checkpoints(home: Path, tasks: str) -> Path:
    """Tiny official-layout checkpoints of `tasks` where the engine looks for them (`--checkpoint-dir home`)."""
    for seed, task in enumerate(tasks.split(",")):
        write_synthetic_checkpoint(home / task / f"sapiens2_0.4b_{task}.safetensors", task=task, seed=seed)
    return home


def write_walk(folder: Path, frames: int, drift: float = 3.0) -> Path:
    """A numbered sequence `walk_0001.png …` on a slowly changing image (`drift` grey levels a frame: the scale
    moves), and `boxes.json` beside it with two people."""
    folder.mkdir(parents=True)
    base = np.random.default_rng(0).integers(0, 256, (32, 24, 3)).astype(np.float64)
    for n in range(1, frames + 1):
        noise = np.random.default_rng(n).normal(0, 12, base.shape)
        rgb = np.clip(base + noise + drift * n, 0, 255).astype(np.uint8)
        Image.fromarray(rgb).save(folder / f"walk_{n:04d}.png")
    boxes = [[1, 1, 12, 30], [11, 2, 23, 31]]
    (folder.parent / "boxes.json").write_text(json.dumps(boxes), encoding="utf-8")
    return folder


def predict(home: Path, walk: Path, out: Path, *extra: str, tasks: str = TASKS) -> int:
    args = ["predict", str(walk), "--tasks", tasks, "--out", str(out), "--checkpoint-dir", str(home)]
    args += ["--no-download", "--device", "cpu", "--boxes", str(walk.parent / "boxes.json"), "--no-flip-test"]
    mesh = ["--mesh", "ply"] if "pointmap" in tasks else []
    return main([*args, "--smooth", *mesh, "--fps", "24", *extra])


def predict_killed_after(commits: int, home: Path, walk: Path, out: Path | str, *extra: str):
    """``predict`` in a child process that the test pause kills (SIGKILL) right after its ``commits``-th frame
    commit: a killed run, for resume tests. Returns the finished process."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; from studio_runs import predict; "
        "out = sys.argv[4] if '://' in sys.argv[4] else Path(sys.argv[4]); "
        "sys.exit(predict(Path(sys.argv[2]), Path(sys.argv[3]), out, *sys.argv[5:]))"
    )
    env = {**os.environ, "SAPIENS2_TEST_PAUSE_AT": f"committed:{commits}:kill"}
    args = [
        sys.executable,
        "-c",
        code,
        str(Path(__file__).resolve().parent),
        str(home),
        str(walk),
        str(out),
        *extra,
    ]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def assert_same_outputs(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        pa, pb = a / name, b / name
        if pa.is_dir():  # a sequence's folder beside single images
            assert_same_outputs(pa, pb)
        elif name.endswith(".exr"):
            ca, _ = read_exr(pa)
            cb, _ = read_exr(pb)
            assert sorted(ca) == sorted(cb), name
            for ch in ca:
                np.testing.assert_array_equal(ca[ch], cb[ch], err_msg=f"{name} {ch}")
        elif name.endswith(".json"):
            da = json.loads(pa.read_text(encoding="utf-8"))
            db = json.loads(pb.read_text(encoding="utf-8"))
            assert _strip(da) == _strip(db), name
        else:  # previews and meshes: byte for byte
            assert pa.read_bytes() == pb.read_bytes(), name


def photo(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    body = ((yy - h / 2) ** 2 / (0.4 * h) ** 2 + (xx - w / 2) ** 2 / (0.2 * w) ** 2) < 1
    image = np.stack([60 + 100 * body, 80 + 50 * body, 120 - 40 * body], -1) + rng.integers(0, 30, (h, w, 3))
    return image.astype(np.uint8)


def output_bytes(folder: Path) -> dict[str, bytes]:
    """Every file's bytes; JSON documents without their run record (a run's id and times differ per run)."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".json":
            doc = json.loads(data)
            if isinstance(doc, dict):
                doc.pop("run", None)
            data = json.dumps(doc, sort_keys=True).encode()
        files[str(path.relative_to(folder))] = data
    return files
