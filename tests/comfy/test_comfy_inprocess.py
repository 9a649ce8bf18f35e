"""The pack inside ComfyUI's own Python process: model management, progress, interrupts, per-node fallback.

Runs ``inprocess_check.py`` with each host's Python (ComfyUI's torch, numpy and modules), once per host of the
matrix like the server tests.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.comfyui
HERE = Path(__file__).resolve().parent


def test_pack_inside_comfyui_process(comfy_host, tmp_path):
    checkout, python = comfy_host.checkout, comfy_host.python
    run = subprocess.run(
        [str(python), str(HERE / "inprocess_check.py"), str(checkout), str(HERE.parents[1]), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(out["nodes"]) == 15  # Run Task included
    # A node this host cannot describe is dropped alone; the rest of the pack stays.
    assert out["nodes_when_one_schema_fails"] == sorted(set(out["nodes"]) - {"Sapiens2Relight"})
    assert "Sapiens2 custom seg" in out["info"] and "dtype fp32 (auto: fp32 on the CPU)" in out["info"]
    assert out["patcher_loaded"] is True and out["patcher_loaded_after_unload"] is False
    assert out["output_devices"] == [out["intermediate_device"]]
    # Chunks of 2 over 3 images: progress 0/3, 2/3, 3/3 reported through ComfyUI's ProgressBar hook.
    assert out["progress"] == [[0, 3], [2, 3], [3, 3]]
    assert out["interrupted"] is True
    assert out["after_oom"] == {"other_loaded": False, "own_loaded": True}
    # A clip through Sapiens2 Pose in chunks of 2 (issue 29): the bar moves per chunk of frames, Cancel after the
    # first chunk stops before the next one starts, and a VIDEO of the same frames gives the same keypoints.
    clip = out["pose_clip"]
    assert clip["progress"] == [[0, 5], [2, 5], [4, 5], [5, 5]]
    assert clip["cancelled"] == {"interrupted": True, "progress": [[0, 5], [2, 5]]}
    assert clip["video_same"] is True
    mesh = out["mesh_on_new_host"]
    assert mesh["outputs"] == ["mesh_path", "model_3d"] and "error" not in mesh, mesh
    assert mesh["path"].startswith("mesh/") and mesh["path"].endswith(".glb") and mesh["model_3d"] is None
