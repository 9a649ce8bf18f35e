"""Custom normals of an analytic sphere: out of the surface and toward the camera; 1.0 bundles converted once.

The sphere bundle (``synthetic_capture.write_sphere``) holds its exact pointmap and outward normals in the
OpenCV frame. In Blender every corner normal must point away from the sphere's centre and toward the camera
(at the origin); a bundle of version 1.0 (the model's OpenGL-frame normals under the label "opencv") must
import to the same normals, with one line in the import report.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

SPHERE_CENTER_CV = np.array([0.0, 0.0, 3.0])
SPHERE_RADIUS = 0.4


def corner_normals(mesh) -> tuple[np.ndarray, np.ndarray]:
    """(loops, 3) custom corner normals and the (loops, 3) positions of their vertices."""
    corner = np.empty(len(mesh.loops) * 3, dtype=np.float32)
    mesh.corner_normals.foreach_get("vector", corner)
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    loops = np.empty(len(mesh.loops), dtype=np.int32)
    mesh.loops.foreach_get("vertex_index", loops)
    return corner.reshape(-1, 3).astype(np.float64), co.reshape(-1, 3)[loops].astype(np.float64)


def import_sphere(addon, bpy, path, up_axis: str = "Z"):
    options = addon.parse.options.ImportOptions(import_armatures=False, up_axis=up_axis)
    result = addon.build.scene.import_files(bpy.context, [path], options)
    mesh = bpy.data.objects[f"{path.stem} mesh"].data
    assert mesh.has_custom_normals and len(mesh.polygons) > 1000
    return result, mesh


@pytest.mark.parametrize("up_axis", ["Z", "Y"])
def test_sphere_normals_point_out_of_the_surface_toward_the_camera(
    addon, bpy_empty, bundles, to_blender, up_axis
):
    result, mesh = import_sphere(addon, bpy_empty, bundles / "sphere.json", up_axis)
    assert not result.warnings
    normals, positions = corner_normals(mesh)
    center = to_blender(SPHERE_CENTER_CV, up_axis)
    radial = (positions - center) / SPHERE_RADIUS  # the exact outward normal, in Blender's frame
    outward = (normals * radial).sum(axis=1)
    view = -positions / np.linalg.norm(positions, axis=1, keepdims=True)  # toward the camera at the origin
    toward_camera = (normals * view).sum(axis=1)
    assert outward.min() > 0.999  # measured: 0.9999+ (half-float normals, float32 positions)
    assert toward_camera.min() > 0.0  # every visible point faces the camera (grazing at the rim: ≈ 0.04)
    np.testing.assert_allclose(toward_camera, (radial * view).sum(axis=1), atol=2e-3)
    # The top of the sphere (highest image rows) faces Blender's up axis: +Z (Z up) or +Y (camera frame).
    up = np.array([0.0, 0.0, 1.0]) if up_axis == "Z" else np.array([0.0, 1.0, 0.0])
    top = positions @ up > (center @ up) + 0.9 * SPHERE_RADIUS
    assert top.any() and (normals[top] @ up).min() > 0.85


def test_version_1_0_normals_are_converted_and_reported_once(addon, bpy_empty, bundles, tmp_path):
    bpy = bpy_empty
    _, mesh = import_sphere(addon, bpy, bundles / "sphere.json")
    expected, _ = corner_normals(mesh)
    bpy.ops.wm.read_homefile(use_empty=True)
    result, mesh = import_sphere(addon, bpy, bundles / "sphere_v10.json")
    normals, _ = corner_normals(mesh)
    np.testing.assert_allclose(normals, expected, atol=1e-6)
    notes = [w for w in result.warnings if "version 1.0" in w]
    assert len(notes) == 1 and "sphere_v10.json" in notes[0] and "y and z negated" in notes[0]
    assert addon.parse.bundle.LEGACY_NORMAL_CHANNELS == ("N.Y", "N.Z")


def test_a_1_0_sequence_is_reported_in_one_line(addon, bpy_empty, walk_copy, read_json):
    for path in sorted(walk_copy.glob("walk_*.json")):
        doc = read_json(path)
        doc["version"] = "1.0"
        path.write_text(json.dumps(doc), encoding="utf-8")
    options = addon.parse.options.ImportOptions(import_armatures=False)
    result = addon.build.scene.import_files(bpy_empty.context, [walk_copy / "walk.sequence.json"], options)
    notes = [w for w in result.warnings if "version 1.0" in w]
    assert notes == [addon.parse.bundle.legacy_normals_note("walk.sequence.json", 6)]


def test_operator_reports_the_conversion(addon, bpy_empty, bundles, tmp_path, capfd):
    """The operator passes the note on as a WARNING report; headless Blender prints reports to the console."""
    shutil.copy(bundles / "sphere_v10.json", tmp_path / "sphere_v10.json")
    shutil.copy(bundles / "sphere_v10.exr", tmp_path / "sphere_v10.exr")
    capfd.readouterr()
    result = bpy_empty.ops.import_scene.sapiens2_capture(filepath=str(tmp_path / "sphere_v10.json"))
    assert result == {"FINISHED"}
    printed = capfd.readouterr()
    text = printed.out + printed.err
    assert text.count("capture bundle version 1.0") == 1, text[-2000:]
    assert "Warning: sphere_v10.json: capture bundle version 1.0 stores" in text
