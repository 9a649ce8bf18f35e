"""A bundle with a matting layer: the alpha on the mesh (attribute + material opacity, soft edges) and on a front
camera plate (straight colour + alpha); bundles without it import as before.

``matte`` is the 48x64 figure whose alpha is its mask box-blurred over 5 pixels (above 0.5 just inside the
silhouette, below just outside); ``expected_matte.npz`` holds alpha and straight foreground as the project's own
reader returns them.
"""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def expected(bundles) -> dict[str, np.ndarray]:
    with np.load(bundles / "expected_matte.npz") as data:
        return {k: data[k] for k in data.files}


def _import(bpy, bundles, name: str = "matte", **options):
    result = bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / f"{name}.json"), **options)
    assert result == {"FINISHED"}


def _alpha_values(obj) -> np.ndarray:
    values = np.empty(len(obj.data.vertices), dtype=np.float32)
    obj.data.attributes["alpha"].data.foreach_get("value", values)
    return values


def test_mesh_carries_the_soft_alpha_and_its_material_uses_it(
    bpy_empty, bundles, expected, mesh_data, project_to_pixels
):
    bpy = bpy_empty
    _import(bpy, bundles, import_armatures=False)
    obj = bpy.data.objects["matte mesh"]
    attribute = obj.data.attributes["alpha"]
    assert (attribute.data_type, attribute.domain) == ("FLOAT", "POINT")
    values = _alpha_values(obj)
    # Each vertex holds the alpha of the pixel it was made from: project it through the imported camera.
    pixels = project_to_pixels(bpy.context.scene, bpy.data.objects["matte camera"], mesh_data(obj.data)["co"])
    cols, rows = np.floor(pixels).astype(int).T
    np.testing.assert_array_equal(values, expected["alpha"][rows, cols])
    soft = values < 1.0
    assert soft.sum() >= 50, soft.sum()  # the silhouette ramps instead of stepping from 1 to nothing
    assert values.max() == 1.0 and values.min() < 0.9
    material = obj.data.materials[0]
    links = {(link.from_node.bl_idname, link.from_socket.identifier, link.to_socket.identifier): link for link in
             material.node_tree.links}  # fmt: skip
    link = links[("ShaderNodeAttribute", "Fac", "Alpha")]
    assert link.from_node.attribute_name == "alpha"
    assert ("ShaderNodeAttribute", "Color", "Base Color") in links  # identifiers: 5.0 renamed Fac to Factor


def test_points_material_uses_the_alpha_too(bpy_empty, bundles):
    bpy = bpy_empty
    _import(bpy, bundles, import_mesh=False, import_points=True, import_armatures=False)
    obj = bpy.data.objects["matte points"]
    material = (
        obj.modifiers["Sapiens2 Points"].node_group.nodes["Set Material"].inputs["Material"].default_value
    )
    assert any(link.to_socket.name == "Alpha" for link in material.node_tree.links)


def test_front_plate_is_the_cut_out_person_with_the_matte_alpha(bpy_empty, bundles, expected):
    bpy = bpy_empty
    _import(bpy, bundles, import_armatures=False)
    cam = bpy.data.objects["matte camera"].data
    plates = list(cam.background_images)
    assert [p.display_depth for p in plates] == ["BACK", "FRONT"]
    photo, matte = plates[0].image, plates[1].image
    assert matte.name == "matte matte" and matte.alpha_mode == "STRAIGHT" and tuple(matte.size) == (48, 64)
    assert photo.name == "matte plate"
    pixels = np.empty(48 * 64 * 4, dtype=np.float32)
    matte.pixels.foreach_get(pixels)
    rgba = pixels.reshape(64, 48, 4)[::-1]  # Blender rows are bottom-to-top
    assert np.abs(rgba[..., 3] - expected["alpha"]).max() <= 0.5 / 255 + 1e-6  # 8-bit alpha
    visible = expected["alpha"] > 1.0 / 255
    colour_error = np.abs(rgba[..., :3] - expected["foreground"])[visible]
    assert colour_error.max() <= 1.0 / 255 + 1e-6, colour_error.max()
    assert not rgba[~visible, :3].any()


def test_bundle_without_a_matte_has_no_alpha_and_one_plate(bpy_empty, bundles):
    bpy = bpy_empty
    _import(bpy, bundles, "tiny", import_armatures=False)
    assert "alpha" not in bpy.data.objects["tiny mesh"].data.attributes
    assert [p.display_depth for p in bpy.data.objects["tiny camera"].data.background_images] == ["BACK"]
    material = bpy.data.objects["tiny mesh"].data.materials[0]
    assert not any(link.to_socket.name == "Alpha" for link in material.node_tree.links)
