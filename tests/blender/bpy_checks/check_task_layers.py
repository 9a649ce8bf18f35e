"""Layers of a task the add-on does not know (a plug-in task, issue 27): every channel its JSON declares in
``task_layers`` becomes a mesh attribute of the channel's name, INT for class ids (names kept as a custom
property), FLOAT otherwise, holding the value of the pixel each vertex was made from; a declared channel the EXR
lacks is refused with a message and nothing imported.

``garment`` is the 48x64 figure with ``garment.id`` (0 background, 1 top, 2 bottom) and ``garment_conf.prob`` (a
ramp, half floats); ``expected_garment.npz`` holds both as the project's own reader returns them.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest


def _import(bpy, path, **options):
    return bpy.ops.import_scene.sapiens2_capture(filepath=str(path), import_armatures=False, **options)


def _values(obj, name: str, dtype) -> np.ndarray:
    out = np.empty(len(obj.data.vertices), dtype=dtype)
    obj.data.attributes[name].data.foreach_get("value", out)
    return out


@pytest.mark.parametrize("kind", ["mesh", "points"])
def test_declared_task_channels_become_named_attributes(
    bpy_empty, bundles, mesh_data, project_to_pixels, kind
):
    bpy = bpy_empty
    options = {"import_mesh": kind == "mesh", "import_points": kind == "points"}
    assert _import(bpy, bundles / "garment.json", **options) == {"FINISHED"}
    obj = bpy.data.objects[f"garment {kind}"]
    attributes = obj.data.attributes
    assert (attributes["garment.id"].data_type, attributes["garment.id"].domain) == ("INT", "POINT")
    assert (attributes["garment_conf.prob"].data_type, attributes["garment_conf.prob"].domain) == (
        "FLOAT",
        "POINT",
    )
    assert "seg" in attributes and "confidence" in attributes  # the known layers as before
    with np.load(bundles / "expected_garment.npz") as data:
        expected = {k: data[k] for k in data.files}
    pixels = project_to_pixels(
        bpy.context.scene, bpy.data.objects["garment camera"], mesh_data(obj.data)["co"]
    )
    cols, rows = np.floor(pixels).astype(int).T
    ids = _values(obj, "garment.id", np.int32)
    np.testing.assert_array_equal(ids, expected["id"][rows, cols])
    assert set(np.unique(ids)) == {1, 2}  # the figure's vertices (background dropped) wear both garments
    np.testing.assert_array_equal(_values(obj, "garment_conf.prob", np.float32), expected["prob"][rows, cols])
    assert obj.data["garment.id.classes"].to_dict() == {"0": "background", "1": "top", "2": "bottom"}


def test_declared_channel_missing_from_the_exr_is_refused(bpy_empty, bundles, tmp_path):
    bpy = bpy_empty
    shutil.copy(bundles / "garment.exr", tmp_path / "garment.exr")
    doc = json.loads((bundles / "garment.json").read_text(encoding="utf-8"))
    doc["task_layers"]["garment"]["channels"] = ["id", "edge"]
    (tmp_path / "garment.json").write_text(json.dumps(doc), encoding="utf-8")
    before = len(bpy.data.objects)
    with pytest.raises(RuntimeError, match=r"garment\.edge"):
        _import(bpy, tmp_path / "garment.json")
    assert len(bpy.data.objects) == before
