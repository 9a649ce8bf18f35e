"""The geometry self-checks as users meet them: in the CLI (`predict` notes and bundle JSON, `sapiens2 check`) and
in what ComfyUI's Save Capture Bundle runs (capture frames + node text).

The normal and pointmap predictors are replaced by an analytic scene of the image's size (a torso-like ellipsoid:
exact points and normals in the canonical frame), because tiny synthetic weights predict no surface; everything
after the predictors — the engine, the checks, the writers, the CLI — is the real code.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.pipeline.results import NormalResult, PointmapResult
from sapiens2_studio.core.studio import Host, TaskBatch, capture_frames
from sapiens2_studio.core.studio.compute.geometry_checks import WARN_NORMALS_FLIPPED
from sapiens2_studio.core.tasks import registry as tasks_registry
from sapiens2_studio.core.testing.scenes import ellipsoid_scene

pytest.importorskip("OpenEXR")
FLIPPED = WARN_NORMALS_FLIPPED.split(" (")[0]  # "normals look flipped against the pointmap"
W, H = 48, 64


def _scene(flip: bool):
    scene = ellipsoid_scene(W, H, semi_axes=(0.45, 0.6, 0.15))
    normals = scene.normals * (np.array([1.0, -1.0, -1.0], np.float32) if flip else 1.0)
    return scene, normals.astype(np.float32)


@pytest.fixture(params=[False, True], ids=["consistent", "flipped_yz"])
def scene_predictors(request, monkeypatch):
    """Normal and pointmap predictors that return the scene (normals flipped in y and z for 'flipped')."""
    scene, normals = _scene(request.param)
    mask = torch.from_numpy(scene.mask)

    def normal(self, module, images, ctx):
        return [NormalResult(torch.from_numpy(normals), mask) for _ in range(len(images))]

    def pointmap(self, module, images, ctx):
        points = torch.from_numpy(scene.points.astype(np.float32))
        return [PointmapResult(points, 1.0, scene.intrinsics, mask) for _ in range(len(images))]

    # the tasks' own predict, which run_tasks calls for every engine and front-end
    monkeypatch.setattr(type(tasks_registry.get("normal")), "predict", normal)
    monkeypatch.setattr(type(tasks_registry.get("pointmap")), "predict", pointmap)
    return request.param


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "person.png"
    Image.fromarray(np.full((H, W, 3), 120, np.uint8)).save(path)
    return path


def _args(tiny_checkpoints):
    return [f"--checkpoint={t}={tiny_checkpoints[t]}" for t in ("normal", "pointmap")]


def test_cli_predict_records_the_checks_and_warns(
    scene_predictors, tiny_checkpoints, photo, tmp_path, capsys
):
    out = tmp_path / "out"
    argv = ["predict", str(photo), "--tasks", "normal,pointmap", "--out", str(out), "--device", "cpu"]
    assert main([*argv, *_args(tiny_checkpoints), "--no-previews"]) == 0
    err = capsys.readouterr().err
    checks = json.loads((out / "person.json").read_text())["checks"]
    cosine = checks["normals_vs_pointmap"]["mean_cosine"]
    if scene_predictors:  # flipped
        assert cosine < -0.5 and checks["normals_facing_camera"]["share"] == 0.0
        assert f"note: person.png: {FLIPPED}" in err
    else:
        assert cosine > 0.999 and checks["normals_facing_camera"]["share"] == 1.0
        assert checks["warnings"] == [] and "note:" not in err


def test_cli_check_command_prints_the_report(scene_predictors, tiny_checkpoints, photo, capsys):
    argv = ["check", str(photo), "--tasks", "normal,pointmap", "--device", "cpu", *_args(tiny_checkpoints)]
    rc = main(argv)
    out = capsys.readouterr().out
    assert "person.png:" in out and "normals vs pointmap: mean cosine" in out
    if scene_predictors:
        assert rc == 3 and f"WARNING: {FLIPPED}" in out and "POOR" in out
    else:
        assert rc == 0 and "WARNING" not in out and out.rstrip().endswith("OK")


def test_save_capture_bundle_logic_checks_and_notes(scene_predictors):
    """What the Save Capture Bundle node runs: capture_frames with its host; the node shows host.notes."""
    scene, normals = _scene(scene_predictors)
    mask = torch.from_numpy(scene.mask)
    batches = {
        "normal": TaskBatch("normal", [NormalResult(torch.from_numpy(normals), mask)]),
        "pointmap": TaskBatch(
            "pointmap",
            [PointmapResult(torch.from_numpy(scene.points.astype(np.float32)), 1.0, scene.intrinsics, mask)],
        ),
    }
    host = Host(on_note=None)
    frame = capture_frames(torch.full((1, H, W, 3), 0.5), batches, host=host)[0]
    cosine = frame.checks.normals_vs_pointmap.mean_cosine
    if scene_predictors:
        assert cosine < -0.5 and any(n.startswith(FLIPPED) for n in host.notes)
    else:
        assert cosine > 0.999 and host.notes == []
