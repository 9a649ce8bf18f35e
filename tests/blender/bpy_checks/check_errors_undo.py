"""Bad files fail with a clear message and leave nothing behind; undo; multi-file; metadata; EXR backends."""

from __future__ import annotations

import sys

import numpy as np
import pytest

DATA_KINDS = (
    "objects", "meshes", "armatures", "cameras", "images", "materials", "actions", "collections", "node_groups",
)  # fmt: skip


def data_counts(bpy) -> dict[str, object]:
    """Datablock counts plus the scene settings an import changes."""
    scene = bpy.context.scene
    counts: dict[str, object] = {kind: len(getattr(bpy.data, kind)) for kind in DATA_KINDS}
    counts.update(
        frames=(scene.frame_start, scene.frame_end),
        fps=(scene.render.fps, scene.render.fps_base),
        resolution=(scene.render.resolution_x, scene.render.resolution_y),
        camera=scene.camera,
    )
    return counts


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["noexr.json"], "'noexr.exr' is missing"),
        (["corrupt.json"], "is not valid JSON"),
        (["newer.json"], "bundle version 2.0, newer than this add-on supports"),
        (["notcapture.json"], "is not a Sapiens2 capture"),
        (["traversal.json"], "must be a bare file name"),
        (["badexr.json"], "Cannot read EXR"),
        (["badrow.json"], r"keypoints_3d\[3\] must be \[X, Y, Z\] or null"),
        (["brokenseq.sequence.json"], "'brokenseq_0002.exr' is missing"),
        (["tiny.json", "badexr.json"], "Cannot read EXR"),  # the good first file is rolled back too
        (["tiny.json", "newer.json"], "newer than this add-on supports"),  # checked before anything is built
    ],
)
def test_bad_files_report_an_error_and_import_nothing(bpy_empty, bundles, files, message):
    bpy = bpy_empty
    before = data_counts(bpy)
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.import_scene.sapiens2_capture(directory=str(bundles), files=[{"name": f} for f in files])
    assert data_counts(bpy) == before


def test_newer_minor_version_is_accepted(bpy_empty, bundles):
    assert bpy_empty.ops.import_scene.sapiens2_capture(filepath=str(bundles / "minor.json")) == {"FINISHED"}
    assert "minor mesh" in bpy_empty.data.objects


def test_undo_removes_the_whole_import(addon, bpy_empty, bundles):
    bpy = bpy_empty
    op = bpy.ops.import_scene.sapiens2_capture
    assert (
        "UNDO" in addon.ui.operators.IMPORT_SCENE_OT_sapiens2_capture.bl_options
    )  # what makes the UI push an undo step
    bpy.ops.ed.undo_push(message="before import")  # background mode starts with undo off
    # Called with undo=True the operator pushes its own undo step, as it does from the menu.
    assert op("EXEC_DEFAULT", True, filepath=str(bundles / "tiny.json")) == {"FINISHED"}
    assert {o.type for o in bpy.data.objects} == {"MESH", "ARMATURE", "CAMERA"}
    bpy.ops.ed.undo()
    assert len(bpy.data.objects) == 0 and len(bpy.data.meshes) == 0 and len(bpy.data.armatures) == 0


def test_multi_file_import_makes_one_collection_each(bpy_empty, bundles):
    bpy = bpy_empty
    files = [{"name": "tiny.json"}, {"name": "walk.sequence.json"}]
    assert bpy.ops.import_scene.sapiens2_capture(directory=str(bundles), files=files) == {"FINISHED"}
    assert {"Sapiens2 tiny", "Sapiens2 walk"} <= set(bpy.data.collections.keys())


def test_panel_finds_the_bundle_metadata(addon, bpy_empty, bundles, read_json):
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tiny.json")) == {"FINISHED"}
    collection = addon.ui.panel.capture_collection(bpy.data.objects["tiny person 0"])
    meta = collection["sapiens2"]
    source = read_json(bundles / "tiny.json")
    assert (meta["width"], meta["height"], meta["fx"], meta["people"]) == (8, 6, 10.0, 1)
    assert meta["pointmap_scale"] == pytest.approx(0.85)
    assert "sapiens2_0.4b_pointmap.safetensors" in meta["models"] and meta["version"] == source["version"]
    assert meta["layers"] == ", ".join(source["layers"])


def test_panel_lines_for_the_active_object(addon, bpy_empty, bundles):
    """What the N-panel draws, from the real imported metadata (headless Blender has no UI layout to draw)."""
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tiny.json")) == {"FINISHED"}
    arm = bpy.data.objects["tiny person 0"]
    bpy.data.collections["Sapiens2 tiny"].name = "renamed by the user"
    collection = addon.ui.panel.capture_collection(arm)
    summary, models, footer = addon.ui.panel.panel_lines(collection["sapiens2"], arm, arm.pose.bones["nose"])
    assert summary[:2] == ["tiny  (bundle v1.1)", "Image: 8 x 6 px"]
    assert "Camera (pointmap): fx 10.0  fy 10.0" in summary and "Pointmap scale: 0.850" in summary
    assert models == ["pointmap: 0.4b  sapiens2_0.4b_pointmap.safetensors"]
    assert footer[-2:] == ["Person (track) 0", "nose: confidence 0.10"]
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tracked.sequence.json")) == {
        "FINISHED"
    }
    arm = bpy.data.objects["tracked person 7"]
    summary, _, footer = addon.ui.panel.panel_lines(addon.ui.panel.capture_collection(arm)["sapiens2"], arm)
    assert "People: 2   Frames: 5" in summary and "Person (track) 7" in footer


def test_scripting_api_without_the_operator(addon, bpy_empty, bundles):
    options = addon.parse.options.ImportOptions(import_mesh=False, import_camera=False)
    result = addon.build.scene.import_files(bpy_empty.context, [bundles / "tiny.json"], options)
    assert [o.type for o in result.objects] == ["ARMATURE"]


def has_openimageio(addon) -> bool:
    """Whether this Blender ships OpenImageIO's Python module (the bpy 4.2 wheel does not; 4.5+ do)."""
    try:
        addon.parse.exr._import_openimageio()
    except ImportError:
        return False
    return True


def test_exr_backends_read_the_same_pixels(addon, bundles):
    """Blender's bundled OpenImageIO and the openexr wheel give identical channels; where this Blender has no
    OpenImageIO, reading through it says the reader is missing (not that the file is bad)."""
    exr = addon.parse.exr
    a = exr.read_exr_channels(bundles / "tiny.exr", "openexr")
    if not has_openimageio(addon):
        with pytest.raises(addon.parse.errors.BundleError, match="the openimageio reader is missing") as err:
            exr.read_exr_channels(bundles / "tiny.exr", "openimageio")
        assert "Re-export" not in str(err.value) and "bundles the openexr wheel" in str(err.value)
        return
    b = exr.read_exr_channels(bundles / "tiny.exr", "openimageio")
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_full_import_through_blenders_openimageio(
    addon, bpy_empty, bundles, expected_tiny, monkeypatch, mesh_data
):
    """The path a Blender without the openexr wheel takes: pixels must be the same, or, where this Blender has
    no OpenImageIO either, the import stops with a message that names the missing reader and the fix."""
    monkeypatch.setattr(addon.parse.exr, "available_backend", lambda: "openimageio")
    before = data_counts(bpy_empty)
    if not has_openimageio(addon):
        with pytest.raises(RuntimeError, match="reader is missing from this Blender") as err:
            bpy_empty.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tiny.json"))
        assert "Re-export" not in str(err.value) and "openexr wheel" in str(err.value)
        assert data_counts(bpy_empty) == before  # nothing left behind
        return
    assert bpy_empty.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tiny.json")) == {"FINISHED"}
    co = mesh_data(bpy_empty.data.objects["tiny mesh"].data)["co"]
    x, y, z = expected_tiny["points"][1:6].reshape(-1, 3).T
    np.testing.assert_allclose(co, np.stack([x, z, -y], axis=1), atol=1e-6)


def test_no_exr_reader_at_all_says_how_to_get_one(addon, monkeypatch):
    """A Blender with neither reader (e.g. 4.2 without the openexr build) gets the fix, not 'bad file'."""
    exr = addon.parse.exr

    def missing(*_args):
        raise ImportError("not in this Blender")

    monkeypatch.setitem(sys.modules, "OpenEXR", None)  # `import OpenEXR` now raises ImportError
    monkeypatch.setattr(exr, "_import_openimageio", missing)
    with pytest.raises(addon.parse.errors.BundleError, match="No EXR reader available") as err:
        exr.available_backend()
    assert "bundles the openexr wheel" in str(err.value)


def test_select_all_in_a_cli_output_folder(addon, bpy_empty, bundles, walk_copy):
    """*Select All* in a CLI output folder picks the sequence index, its frames and the CLI's side files: the
    sequence imports once, its frames are not imported again and the side files are skipped, with warnings."""
    import json

    side = {"format": "sapiens2-keypoints", "version": "1.0", "people": []}
    (walk_copy / "walk_0001.keypoints.json").write_text(json.dumps(side), encoding="utf-8")
    (walk_copy / "walk_0001.openpose.json").write_text(
        json.dumps({"version": 1.3, "people": []}), encoding="utf-8"
    )
    bpy = bpy_empty
    paths = sorted(walk_copy.glob("*.json"))
    result = addon.build.scene.import_files(bpy.context, paths, addon.parse.options.ImportOptions())
    assert [c.name for c in result.collections] == ["Sapiens2 walk"]
    assert sorted(o.name for o in bpy.data.objects) == ["walk camera", "walk person 0"]
    assert any("Skipped 2 file(s) that are not capture bundles" in w for w in result.warnings)
    assert any("Skipped 6 frame file(s)" in w for w in result.warnings)
    with pytest.raises(RuntimeError, match=r"not the \.keypoints\.json"):  # alone, it is still an error
        bpy.ops.import_scene.sapiens2_capture(filepath=str(walk_copy / "walk_0001.keypoints.json"))


def test_imported_objects_are_selected_and_an_armature_active(bpy_empty, bundles):
    """Like Blender's own importers: the import is the selection (to move or frame it at once), nothing else."""
    bpy = bpy_empty
    bpy.ops.wm.read_homefile(use_empty=False)  # Cube, Camera, Light; the Cube selected and active
    assert bpy.context.view_layer.objects.active.name == "Cube"
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tiny.json")) == {"FINISHED"}
    selected = sorted(o.name for o in bpy.context.view_layer.objects if o.select_get())
    assert selected == ["tiny camera", "tiny mesh", "tiny person 0"]
    assert bpy.context.view_layer.objects.active.name == "tiny person 0"
    assert bpy.context.object.mode == "OBJECT"


def test_an_object_in_edit_mode_is_not_left_behind(bpy_empty, bundles):
    """The import becomes the active object: the previous one must leave edit mode first, or it stays stuck in
    it (mode_set on the new active object cannot reach it)."""
    bpy = bpy_empty
    bpy.ops.wm.read_homefile(use_empty=False)
    cube = bpy.data.objects["Cube"]
    bpy.ops.object.mode_set(mode="EDIT")
    assert bpy.ops.import_scene.sapiens2_capture(
        filepath=str(bundles / "tiny.json"), import_armatures=False
    ) == {"FINISHED"}
    assert cube.mode == "OBJECT" and bpy.context.mode == "OBJECT"
    assert bpy.context.view_layer.objects.active.name in {"tiny camera", "tiny mesh"}
