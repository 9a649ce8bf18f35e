"""Predict from Blender: the add-on runs the user's installed engine (the outer test's environment, never imported
here) on tiny official-layout checkpoints and imports the capture exactly as importing the CLI's own output does.

Background mode has no window, so the modal operator cannot run here: `bpy.ops.sapiens2.predict()` takes its
synchronous path (what `blender -b --python-expr` and farm jobs use), and the cancel check drives the very
`PredictSession.tick()` the modal timer calls, with Blender work between ticks.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest

DATA = Path(os.environ.get("SAPIENS2_PREDICT_DATA", "/nonexistent"))
MODULE = "bl_ext.user_default.sapiens2_capture"
FRAMES = 12

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="run through tests/blender/test_blender_addon.py")


@pytest.fixture(scope="module")
def reference():
    return json.loads((DATA / "reference.json").read_text(encoding="utf-8"))


@pytest.fixture
def predict(addon, bpy_empty, reference, tmp_path):
    """The scene's predict settings and the preferences pointing at the user's engine (a folder: its venv)."""
    bpy = bpy_empty
    prefs = bpy.context.preferences.addons[MODULE].preferences
    prefs.engine_path = reference["engine"]
    prefs.checkpoint_dir = str(DATA / "home")
    prefs.device = "cpu"
    prefs.allow_download = False
    prefs.output_dir = str(tmp_path / "out")
    settings = bpy.context.scene.sapiens2_predict
    settings.source = "FILE"
    for task in ("pose", "seg", "normal", "albedo", "pointmap", "matting"):
        setattr(settings, f"use_{task}", task in ("pose", "pointmap"))
    settings.flip_test = False
    return addon.ui.predict_ops, settings, prefs, tmp_path / "out"


def snapshot(bpy) -> dict[str, object]:
    """What an import made, comparable across scenes: per object its type and data, per frame every bone's world
    matrix (the keyframed animation, however the Blender version stores actions), the camera and the scene."""
    scene = bpy.context.scene
    out: dict[str, object] = {
        "scene": (scene.frame_start, scene.frame_end, scene.render.resolution_x, scene.render.resolution_y),
    }
    for obj in sorted(bpy.data.objects, key=lambda o: o.name):
        entry: dict[str, object] = {"type": obj.type, "matrix": np.array(obj.matrix_world)}
        if obj.type == "MESH":
            co = np.empty(len(obj.data.vertices) * 3, np.float32)
            obj.data.vertices.foreach_get("co", co)
            entry.update(co=co, polygons=len(obj.data.polygons))
        elif obj.type == "CAMERA":
            cam = obj.data
            entry.update(camera=(cam.lens, cam.sensor_width, cam.sensor_fit, cam.shift_x, cam.shift_y))
        elif obj.type == "ARMATURE":
            entry["bones"] = sorted(b.name for b in obj.data.bones)
        out[obj.name] = entry
    poses = []
    for frame in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(frame)
        poses.append(
            {
                obj.name: np.array([np.array(obj.matrix_world @ pb.matrix) for pb in obj.pose.bones])
                for obj in bpy.data.objects
                if obj.type == "ARMATURE"
            }
        )
    out["poses"] = poses
    return out


def assert_same(a, b, where="") -> None:
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), f"{where}: {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6, err_msg=where)
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def import_reference(bpy, name: str, **options) -> dict[str, object]:
    """A fresh scene with the CLI's own output imported by the import operator, as a user would open it."""
    bpy.ops.wm.read_homefile(use_empty=True)
    result = bpy.ops.import_scene.sapiens2_capture(filepath=str(DATA / "ref" / name), **options)
    assert result == {"FINISHED"}
    return snapshot(bpy)


def options_of(argv: list[str], inputs: list[str]) -> list[str]:
    """The engine options of a command: after `predict`, without the inputs and `--out DIR`."""
    rest = argv[argv.index("predict") + 1 :]
    assert rest[: len(inputs)] == inputs and rest[len(inputs)] == "--out", rest
    return rest[len(inputs) + 2 :]


def kinds(events) -> list[str]:
    return [e["event"] for e in events if e["event"] != "warning"]


def test_the_add_on_never_imports_the_engine(predict):
    ops, *_ = predict
    assert "sapiens2_studio" not in sys.modules and "torch" not in sys.modules
    assert ops.__name__ == f"{MODULE}.ui.predict_ops"


def test_preferences_test_button_reports_the_engine(predict, reference):
    _ops, _settings, _prefs, _ = predict
    from importlib import import_module

    import bpy

    prefs_module = import_module(f"{MODULE}.engine.preferences")
    assert bpy.ops.sapiens2.engine_test() == {"FINISHED"}  # background mode: answers at once
    result = prefs_module.PROBE["result"]
    assert Path(result["python"]).parents[1].resolve() == Path(reference["engine"]).resolve()  # that venv's
    assert result["version"]
    assert result["device"] == "cpu" and result["checkpoint_dir"] == str(DATA / "home")
    assert sorted(c["task"] for c in result["checkpoints"]) == ["pointmap", "pose"]
    lines = prefs_module.probe_lines(result)
    assert lines[0].startswith("Sapiens2 Studio ") and "Checkpoints: 2" in lines[2]
    assert "sapiens2_studio" not in sys.modules and "torch" not in sys.modules


def test_an_image_is_predicted_and_imported_like_the_cli_output(predict, reference):
    ops, settings, _prefs, out = predict
    import bpy

    settings.filepath = str(DATA / "photo.png")
    settings.import_rig, settings.rig_naming = True, "RIGIFY"  # a one-frame rig, Rigify metarig names
    assert bpy.ops.sapiens2.predict() == {"FINISHED"}
    session, outcome = ops.LAST["session"], ops.LAST["outcome"]
    assert options_of(session.argv, [str(DATA / "photo.png")]) == reference["options"]
    events = outcome.progress.events
    assert kinds(events) == ["start", "model_loaded", "model_loaded", "frame", "finished"]
    assert events[-1]["frames"] == 1 and outcome.exit_code == 0
    assert {o.type for o in bpy.data.objects} >= {"MESH", "ARMATURE", "CAMERA"}
    rigs = [o for o in bpy.data.objects if o.type == "ARMATURE" and "spine.001" in o.data.bones]
    assert rigs and {"hand.L", "hand.R", "heel.02.L"} <= set(rigs[0].data.bones.keys())
    assert sorted(ops.LAST["imported"]) == sorted(o.name for o in bpy.data.objects)
    ours = snapshot(bpy)
    assert (out / "photo.json").is_file()
    assert_same(ours, import_reference(bpy, "photo.json", import_rig=True, rig_naming="RIGIFY"), "photo")
    assert "sapiens2_studio" not in sys.modules and "torch" not in sys.modules


def test_a_12_frame_sequence_is_imported_like_the_cli_output(predict, reference):
    ops, settings, _prefs, out = predict
    import bpy

    frames = sorted(str(p) for p in (DATA / "walk").glob("walk_*.png"))
    settings.filepath = frames[0]  # a numbered file stands for its sequence
    settings.import_rig = True  # the humanoid rig too (random tiny keypoints: degenerate hands, issue 28)
    settings.rig_naming = "MIXAMO"
    settings.mesh_per_frame = True  # an import option passed through: a mesh per frame
    assert bpy.ops.sapiens2.predict() == {"FINISHED"}
    session, outcome = ops.LAST["session"], ops.LAST["outcome"]
    assert options_of(session.argv, frames) == reference["options"]
    events = outcome.progress.events
    assert kinds(events) == ["start", "model_loaded", "model_loaded", *["frame"] * FRAMES, "finished"]
    frame_events = [e for e in events if e["event"] == "frame"]
    assert [e["done"] for e in frame_events] == list(range(1, FRAMES + 1))
    assert [e["name"] for e in frame_events] == [f"walk #{n}" for n in range(1, FRAMES + 1)]
    assert all(a["t"] <= b["t"] for a, b in itertools.pairwise(events))
    assert events[0]["total"] == FRAMES and events[-1]["frames"] == FRAMES and outcome.progress.done == FRAMES
    assert (out / "walk" / "walk.sequence.json").is_file()
    assert {o.type for o in bpy.data.objects} >= {"MESH", "ARMATURE", "CAMERA"}
    rigs = [o for o in bpy.data.objects if o.type == "ARMATURE" and "mixamorig:Hips" in o.data.bones]
    assert rigs and {"mixamorig:LeftHand", "mixamorig:RightHand"} <= set(rigs[0].data.bones.keys())
    assert bpy.context.scene.frame_end - bpy.context.scene.frame_start + 1 == FRAMES
    ours = snapshot(bpy)
    theirs = import_reference(
        bpy, "walk/walk.sequence.json", mesh_per_frame=True, import_rig=True, rig_naming="MIXAMO"
    )
    assert_same(ours, theirs, "walk")


class Reports:
    """Stands in for the operator in `finish` (which only calls `report`)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def report(self, kinds, text) -> None:
        self.items += [(kind, text) for kind in kinds]


STOP_RANGE = (1, 8)  # the stop check predicts frames 1-8 of the sequence (the panel's Frame Range)


def test_stop_after_a_few_frames_keeps_blender_responsive_and_resume_completes(predict):
    """What the modal operator does, tick by tick, with the user working in Blender between ticks; the panel's
    Stop button (Esc calls the same `cancel`) after 3 frames; then Resume."""
    ops, settings, _prefs, out = predict
    import bpy

    frames = sorted(str(p) for p in (DATA / "walk").glob("walk_*.png"))
    settings.filepath = frames[0]
    settings.use_frame_range = True
    settings.frame_first, settings.frame_last = STOP_RANGE
    count = STOP_RANGE[1] - STOP_RANGE[0] + 1
    session = ops.make_session(bpy.context)
    assert options_of(session.argv, frames[:count])  # the range is exactly those files
    session.start()
    ops.SESSION = session  # as the modal operator's invoke sets it (the panel shows it, Stop polls it)
    cubes, cancelled_at, stop_t = 0, None, None
    deadline = time.monotonic() + 240
    try:
        while not session.done:
            assert time.monotonic() < deadline, "the engine never finished"
            session.tick()
            bpy.ops.mesh.primitive_cube_add(size=0.1)
            cubes += 1
            if cancelled_at is None and session.run.progress.done >= 3:
                assert bpy.ops.sapiens2.predict_stop() == {"FINISHED"}
                cancelled_at, stop_t = session.run.progress.done, time.time()
                assert session.status_text().endswith("(stopping…)")
            time.sleep(0.02)
    finally:
        ops.SESSION = None
    gone_s = time.time() - stop_t
    session.run.wait(timeout=10)
    outcome = session.run.outcome()
    assert outcome.stopped and outcome.exit_code == 130 and not outcome.ok
    assert outcome.progress.error["kind"] == "interrupted" and "--skip-existing" in outcome.hint
    committed = sorted(p.name for p in (out / "walk").glob("walk_[0-9][0-9][0-9][0-9].json"))
    # Every frame on disk was reported, in order (the frame being written when the stop came included), and
    # then the stop itself (the error event, with the count).
    names = [e["name"] for e in outcome.progress.frames]
    assert names == [f"walk #{int(c[5:9])}" for c in committed], (names, committed)
    assert outcome.progress.error["frames"] == outcome.progress.done == len(committed)
    assert cancelled_at <= len(committed) <= cancelled_at + 1, (cancelled_at, committed)  # within one frame
    times = [e["t"] for e in outcome.progress.frames]
    frame_s = max(b - a for a, b in itertools.pairwise(times))
    assert gone_s < 2 * frame_s + 10, (gone_s, frame_s)  # and within about a frame's time
    assert (out / "walk" / "walk.partial.json").is_file() and not (
        out / "walk" / "walk.sequence.json"
    ).exists()
    assert max(session.tick_seconds) < 0.05, max(session.tick_seconds)  # a tick never waits for the engine
    assert len([o for o in bpy.data.objects if o.type == "MESH"]) == cubes  # Blender kept working
    reports = Reports()
    assert ops.finish(reports, session, outcome) == {"CANCELLED"}
    assert ("WARNING", f"Sapiens2: stopped after {len(committed)} frame(s); they are kept in {out} — press "
            "Predict with Resume on to finish") in reports.items  # fmt: skip
    assert not [r for r in reports.items if r[0] == "ERROR"]
    print(f"stop: {cancelled_at} frames seen, {len(committed)} committed, engine gone {gone_s:.2f} s after the "
          f"stop (frames {frame_s:.2f} s apart at most); {len(session.tick_seconds)} ticks, longest "
          f"{1000 * max(session.tick_seconds):.1f} ms")  # fmt: skip

    settings.skip_existing = True  # Resume
    assert bpy.ops.sapiens2.predict() == {"FINISHED"}
    finished = ops.LAST["outcome"].progress.finished
    assert (finished["kept"], finished["written"]) == (len(committed), count - len(committed))
    assert (out / "walk" / "walk.sequence.json").is_file() and not (
        out / "walk" / "walk.partial.json"
    ).exists()
    assert any(o.type == "ARMATURE" for o in bpy.data.objects)


def test_a_missing_checkpoint_is_an_error_report_with_the_cli_hint(predict, tmp_path):
    ops, settings, prefs, _out = predict
    import bpy

    empty = tmp_path / "no_checkpoints"
    empty.mkdir()
    prefs.checkpoint_dir = str(empty)
    settings.filepath = str(DATA / "photo.png")
    before = len(bpy.data.objects)
    with pytest.raises(RuntimeError) as exc:
        bpy.ops.sapiens2.predict()
    text = str(exc.value)
    error = ops.LAST["outcome"].progress.error
    assert error["kind"] == "checkpoint" and ops.LAST["outcome"].exit_code == 4
    assert error["message"] in text and error["hint"] in text and error["hint"]  # the CLI's words
    assert str(empty) in text and "sapiens2_0.4b_" in text  # which file to put where
    assert "Download Missing Checkpoints" in text  # and what to do about it in Blender
    assert len(bpy.data.objects) == before


def test_no_engine_is_an_error_report_that_says_how_to_install_it(predict, tmp_path, monkeypatch):
    _ops, settings, prefs, _ = predict
    import bpy

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    prefs.engine_path = str(tmp_path / "nowhere")
    settings.filepath = str(DATA / "photo.png")
    with pytest.raises(RuntimeError, match="no Sapiens2 engine found: install it once"):
        bpy.ops.sapiens2.predict()


FARM_JOB = """
import bpy
import addon_utils
addon_utils.enable({module!r}, default_set=True)  # what `blender --addons {module}` does
bpy.ops.wm.open_mainfile(filepath={blend!r})
result = bpy.ops.sapiens2.predict()  # the --python-expr of a farm job
bpy.ops.wm.save_mainfile()
print("FARM-RESULT", sorted(result), flush=True)
"""


def test_a_headless_farm_job_runs_the_operator_on_a_saved_blend(predict, reference, tmp_path):
    """`blender -b shot.blend --addons … --python-expr "bpy.ops.sapiens2.predict()"`, as the bpy module: a fresh
    Blender opens the .blend the artist saved (the predict settings travel with it), finds the engine through
    SAPIENS2_ENGINE and the checkpoints through SAPIENS2_HOME (no preferences on a farm node), writes beside the
    .blend, imports, saves, and exits 0; what it saved is what importing the CLI's own output gives."""
    import subprocess

    import bpy

    _ops, settings, _prefs, _out = predict
    settings.filepath = str(DATA / "photo.png")
    blend = tmp_path / "shot.blend"
    assert bpy.ops.wm.save_as_mainfile(filepath=str(blend)) == {"FINISHED"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAPIENS2_PREDICT")}
    env.update(SAPIENS2_ENGINE=reference["engine"], SAPIENS2_HOME=str(DATA / "home"))
    job = FARM_JOB.format(module=MODULE, blend=str(blend))
    proc = subprocess.run([sys.executable, "-c", job], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])  # a farm reads the exit status
    assert "FARM-RESULT ['FINISHED']" in proc.stdout, proc.stdout[-3000:]
    assert "Sapiens2: 1/1 frames — photo.png" in proc.stdout  # the progress in the job's log
    assert (tmp_path / "sapiens2" / "photo.json").is_file()  # '//sapiens2' beside the .blend
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    saved = snapshot(bpy)
    assert {v["type"] for k, v in saved.items() if isinstance(v, dict) and "type" in v} >= {
        "MESH",
        "ARMATURE",
        "CAMERA",
    }
    assert_same(saved, import_reference(bpy, "photo.json"), "farm")
