"""Runs every ``bpy_checks/check_*.py`` module in its own Python with the real bpy wheel.

Each module installs the built extension zip into an isolated Blender user folder, imports bundles written by
the project's writer, checks the result, and disables the add-on in teardown (bpy 4.x hangs at exit otherwise;
the timeout below turns such a hang into a failure). Runs once per Blender of the matrix (``conftest.py``); skipped
with the reason when bpy is not importable (failed instead in CI, where SAPIENS2_REQUIRE_HOSTS is set).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
CHECKS = HERE / "bpy_checks"
MODULES = sorted(p.name for p in CHECKS.glob("check_*.py"))
SUBPROCESS_TIMEOUT_S = 240


def _write_usd_stages(bundles: Path) -> None:
    """``check_usd.py`` reads stages that core/formats/usd.py wrote (usd-core lives in this process, not in bpy's)."""
    if (bundles / "usd" / "figure.usdc").is_file():
        return
    from sapiens2_studio.core.formats.usd import export_usd

    spec = importlib.util.spec_from_file_location(
        "sapiens2_usd_tests", HERE.parent / "core" / "formats" / "test_usd_export.py"
    )
    moving = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(moving)
    folder = bundles / "usd"
    (folder / "moving").mkdir(parents=True)
    sequence = moving.write_moving_sequence(folder / "moving")
    export_usd(sequence, folder / "moving.usdc")
    export_usd(sequence, folder / "moving.usdz")
    export_usd(bundles / "figure.json", folder / "figure.usdc")


# check_predict runs the real engine (tiny models on the CPU, 2-10 s a frame on a busy 2-core machine) on some 30
# frames per Blender, plus the CLI on 13 for the reference: 3-7 min here.
TIMEOUTS_S = {"check_predict.py": 900}
PREDICT_OPTIONS = [
    "--tasks",
    "pose,pointmap",
]  # the engine options a check_predict run uses (after --out DIR)


@pytest.fixture(scope="session")
def predict_data(tmp_path_factory) -> Path:
    """For check_predict: tiny official-layout checkpoints, a photo, a 12-frame numbered sequence, and what the
    CLI itself makes of them (run as a user would in a terminal), to compare the add-on's imports with. The
    engine the add-on drives is this Python's environment (it has the project installed; the bpy venv has not)."""
    from PIL import Image
    from sapiens2_studio.core.testing.synthetic import (
        write_constant_output_checkpoint,
        write_synthetic_checkpoint,
    )

    root = tmp_path_factory.mktemp("predict")
    home = root / "home"
    write_synthetic_checkpoint(home / "pose" / "sapiens2_0.4b_pose.safetensors", task="pose", seed=3)
    # A constant pointmap (a plane 2.5 m away, scale 1): every pixel valid, so the mesh and camera are real.
    write_constant_output_checkpoint(
        home / "pointmap" / "sapiens2_0.4b_pointmap.safetensors", "pointmap", (0.1, -0.2, 2.5), scale=1.0
    )
    rng = np.random.default_rng(32)
    Image.fromarray(rng.integers(0, 256, (64, 48, 3), dtype=np.uint8)).save(root / "photo.png")
    walk = root / "walk"
    walk.mkdir()
    base = rng.integers(0, 256, (64, 48, 3), dtype=np.uint8)
    for n in range(1, 13):  # a textured plate moving 3 px a frame, as a camera pan would
        Image.fromarray(np.roll(base, 3 * n, axis=1)).save(walk / f"walk_{n:04d}.png")
    options = [*PREDICT_OPTIONS, "--checkpoint-dir", str(home), "--no-download", "--device", "cpu",
               "--no-flip-test", "--no-previews", "--progress", "json"]  # fmt: skip
    frames = [str(p) for p in sorted(walk.glob("walk_*.png"))]
    for inputs in ([str(root / "photo.png")], frames):
        argv = [
            sys.executable,
            "-m",
            "sapiens2_studio.cli",
            "predict",
            *inputs,
            "--out",
            str(root / "ref"),
            *options,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    (root / "reference.json").write_text(
        json.dumps({"options": options, "engine": sys.prefix}), encoding="utf-8"
    )
    return root


@pytest.mark.blender
@pytest.mark.timeout(max(TIMEOUTS_S.values()) + 400)
@pytest.mark.parametrize("module", MODULES)
def test_in_blender(module: str, blender_env: dict[str, str], request) -> None:
    if module == "check_usd.py":
        _write_usd_stages(Path(blender_env["SAPIENS2_BLENDER_BUNDLES"]))
    timeout = TIMEOUTS_S.get(module, SUBPROCESS_TIMEOUT_S)
    if module == "check_predict.py":
        blender_env = {**blender_env, "SAPIENS2_PREDICT_DATA": str(request.getfixturevalue("predict_data"))}
    cmd = [
        blender_env["SAPIENS2_BLENDER_PYTHON"], "-m", "pytest", str(CHECKS / module),
        "-q", "-p", "no:cacheprovider", "-o", "python_files=check_*.py",
        "--confcutdir", str(CHECKS), "--timeout", str(min(timeout // 2, 450)),
    ]  # fmt: skip
    junit_dir = os.environ.get("SAPIENS2_BLENDER_JUNIT_DIR")
    if junit_dir:  # the matrix summary counts the checks run inside Blender, not just these modules
        venv = Path(blender_env["SAPIENS2_BLENDER_PYTHON"]).parents[1].name
        cmd.append(f"--junitxml={Path(junit_dir) / f'{venv}-{Path(module).stem}.xml'}")
    try:
        proc = subprocess.run(
            cmd,
            env=blender_env,
            cwd=HERE.parents[1],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-4000:]
        pytest.fail(f"{module} did not finish in {timeout} s (bpy exit hang?)\n{tail!r}")
    if proc.returncode != 0:
        pytest.fail(
            f"{module} failed in Blender (rc={proc.returncode}):\n{proc.stdout[-12000:]}\n{proc.stderr[-4000:]}"
        )
