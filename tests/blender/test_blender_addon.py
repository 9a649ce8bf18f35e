"""Runs every ``bpy_checks/check_*.py`` module in its own Python with the real bpy wheel.

Each module installs the built extension zip into an isolated Blender user folder, imports bundles written by
the project's writer, checks the result, and disables the add-on in teardown (bpy 4.x hangs at exit otherwise;
the timeout below turns such a hang into a failure). Runs once per Blender of the matrix (``conftest.py``); skipped
with the reason when bpy is not importable (failed instead in CI, where SAPIENS2_REQUIRE_HOSTS is set).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

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

    spec = importlib.util.spec_from_file_location("sapiens2_usd_tests", HERE.parent / "test_usd_export.py")
    moving = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(moving)
    folder = bundles / "usd"
    (folder / "moving").mkdir(parents=True)
    sequence = moving.write_moving_sequence(folder / "moving")
    export_usd(sequence, folder / "moving.usdc")
    export_usd(sequence, folder / "moving.usdz")
    export_usd(bundles / "figure.json", folder / "figure.usdc")


@pytest.mark.blender
@pytest.mark.timeout(SUBPROCESS_TIMEOUT_S + 30)
@pytest.mark.parametrize("module", MODULES)
def test_in_blender(module: str, blender_env: dict[str, str]) -> None:
    if module == "check_usd.py":
        _write_usd_stages(Path(blender_env["SAPIENS2_BLENDER_BUNDLES"]))
    cmd = [
        blender_env["SAPIENS2_BLENDER_PYTHON"], "-m", "pytest", str(CHECKS / module),
        "-q", "-p", "no:cacheprovider", "-o", "python_files=check_*.py",
        "--confcutdir", str(CHECKS), "--timeout", "120",
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
            timeout=SUBPROCESS_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or b"")[-4000:]
        pytest.fail(f"{module} did not finish in {SUBPROCESS_TIMEOUT_S} s (bpy exit hang?)\n{tail!r}")
    if proc.returncode != 0:
        pytest.fail(
            f"{module} failed in Blender (rc={proc.returncode}):\n{proc.stdout[-12000:]}\n{proc.stderr[-4000:]}"
        )
