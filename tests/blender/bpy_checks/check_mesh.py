"""Pointmap -> mesh: counts, positions in Blender's frame, custom normals, attributes, material, points."""

from __future__ import annotations

import sys

import numpy as np
import pytest

# Tiny bundle (8x6): row 0 is background (a wall at 5 m), below it columns 0-4 at 2 m and 5-7 at 3 m.
FOREGROUND = (slice(1, 6), slice(0, 8))


def import_tiny(bpy, bundles, **options):
    result = bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "tiny.json"), **options)
    assert result == {"FINISHED"}
    return bpy.data.objects.get("tiny mesh")


def test_installed_as_extension_without_torch_or_project(addon, bpy_empty):
    bpy = bpy_empty
    assert addon.__name__ == "bl_ext.user_default.sapiens2_capture"
    assert hasattr(bpy.ops.import_scene, "sapiens2_capture")
    assert "torch" not in sys.modules and "sapiens2_studio" not in sys.modules
    menu_funcs = [f.__name__ for f in bpy.types.TOPBAR_MT_file_import._dyn_ui_initialize()]
    assert "menu_import" in menu_funcs
    assert issubclass(bpy.types.SAPIENS2_FH_capture, bpy.types.FileHandler)
    assert "SAPIENS2_PT_capture" in dir(bpy.types)


@pytest.mark.parametrize(
    ("options", "vertices", "faces"),
    [
        ({}, 40, 24),  # 4 row pairs x 7 column pairs = 28 quads, minus 4 across the depth step
        ({"depth_threshold": 0.0}, 40, 28),  # discontinuity test off
        ({"drop_background": False}, 40, 24),  # background row kept, but its faces jump to the 5 m wall
        ({"drop_background": False, "depth_threshold": 0.0}, 48, 35),  # every quad of the 8x6 grid
        ({"mesh_stride": 2}, 6, 2),  # rows 2,4 x cols 0,2,4,6: 3 quads, the 4->6 one crosses the step
    ],
)
def test_tiny_counts(bpy_empty, bundles, options, vertices, faces):
    mesh = import_tiny(bpy_empty, bundles, **options).data
    assert (len(mesh.vertices), len(mesh.polygons)) == (vertices, faces)
    assert all(p.loop_total == 4 for p in mesh.polygons)
    assert not mesh.validate(verbose=False)  # nothing for Blender to fix


def test_a_mesh_without_faces_says_why(addon, bpy_empty, bundles):
    """Noisy depth (e.g. an untrained or mismatched pointmap) drops every quad: the import warns with the fix
    instead of leaving an empty object the user cannot explain."""
    bpy = bpy_empty
    options = addon.parse.options.ImportOptions(mesh_stride=4, import_armatures=False)  # 2x2 grid, row 0 bg
    result = addon.build.scene.import_files(bpy.context, [bundles / "tiny.json"], options)
    assert len(bpy.data.objects["tiny mesh"].data.polygons) == 0
    assert any("the mesh has no faces" in w and "Depth Discontinuity" in w for w in result.warnings)
    full = addon.build.scene.import_files(
        bpy.context, [bundles / "tiny.json"], addon.parse.options.ImportOptions()
    )
    assert not full.warnings


@pytest.mark.parametrize(("up_axis", "scale"), [("Z", 1.0), ("Y", 1.0), ("Z", 2.5)])
def test_vertex_positions_are_the_pointmap_in_blender_frame(
    bpy_empty, bundles, expected_tiny, to_blender, mesh_data, up_axis, scale
):
    obj = import_tiny(bpy_empty, bundles, up_axis=up_axis, global_scale=scale)
    assert np.allclose(np.array(obj.matrix_world), np.eye(4))
    co = mesh_data(obj.data)["co"]
    points = expected_tiny["points"][FOREGROUND].reshape(-1, 3)  # row-major, as the importer orders vertices
    np.testing.assert_allclose(co, to_blender(points, up_axis, scale), atol=1e-5)


@pytest.mark.parametrize("compression", ["zips", "none"])
def test_every_bundle_compression_imports_the_same_mesh(bpy_empty, bundles, mesh_data, compression):
    """Bundles written with `--exr-compression zips|none` (ZIPS / uncompressed EXR) read like the default ZIP."""
    bpy = bpy_empty
    reference = mesh_data(import_tiny(bpy, bundles).data)
    result = bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / f"tiny_{compression}.json"))
    assert result == {"FINISHED"}
    data = mesh_data(bpy.data.objects[f"tiny_{compression} mesh"].data)
    for key, values in reference.items():
        np.testing.assert_array_equal(data[key], values, err_msg=key)


def test_faces_skip_the_depth_step_and_face_the_camera(bpy_empty, bundles, mesh_data):
    mesh = import_tiny(bpy_empty, bundles).data
    data = mesh_data(mesh)
    depth = data["co"][:, 1]  # Z-up: (x, y, z)_cv -> (x, z, -y), so depth is Blender +Y
    quads = data["loops"].reshape(-1, 4)
    spread = depth[quads].max(axis=1) - depth[quads].min(axis=1)
    assert spread.max() < 1e-6  # every face lies on one side of the 2 m / 3 m step
    normals = np.empty(len(mesh.polygons) * 3, dtype=np.float32)
    mesh.polygons.foreach_get("normal", normals)
    assert (normals.reshape(-1, 3)[:, 1] < 0).all()  # camera looks along +Y, faces point back at it


def test_custom_normals_come_from_the_normal_layer(bpy_empty, bundles, expected_tiny, to_blender, mesh_data):
    mesh = import_tiny(bpy_empty, bundles).data
    assert mesh.has_custom_normals
    corner = np.empty(len(mesh.loops) * 3, dtype=np.float32)
    mesh.corner_normals.foreach_get("vector", corner)
    vertex_of_loop = mesh_data(mesh)["loops"]
    expected = to_blender(expected_tiny["normals"][FOREGROUND].reshape(-1, 3))
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(corner.reshape(-1, 3), expected[vertex_of_loop], atol=2e-3)


def test_custom_normals_take_the_fast_exact_path_where_blender_has_it(
    bpy_empty, bundles, expected_tiny, to_blender
):
    """Blender 4.5+ reads a float vector point attribute ``custom_normal`` as custom normals ("free" normals):
    the importer writes that (milliseconds, exact) instead of ``normals_split_custom_set_from_vertices`` (fan
    spaces: 0.4-1.0 s on a 1024x768 capture in 5.3). 4.2 keeps the classic call."""
    bpy = bpy_empty
    mesh = import_tiny(bpy, bundles).data
    attribute = mesh.attributes.get("custom_normal")
    expected = to_blender(expected_tiny["normals"][FOREGROUND].reshape(-1, 3))
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    if bpy.app.version >= (4, 5, 0):
        assert attribute is not None and (attribute.domain, attribute.data_type) == ("POINT", "FLOAT_VECTOR")
        stored = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        attribute.data.foreach_get("vector", stored)
        np.testing.assert_allclose(stored.reshape(-1, 3), expected, atol=1e-6)  # exactly what was predicted
    else:
        assert attribute is None or attribute.data_type != "FLOAT_VECTOR"
    assert mesh.has_custom_normals


def test_colour_albedo_seg_and_confidence_attributes(bpy_empty, bundles, expected_tiny):
    mesh = import_tiny(bpy_empty, bundles).data
    n = len(mesh.vertices)
    for name, key in (("Color", "color"), ("Albedo", "albedo")):
        attr = mesh.color_attributes[name]
        assert (attr.data_type, attr.domain) == ("FLOAT_COLOR", "POINT")
        rgba = np.empty(n * 4, dtype=np.float32)
        attr.data.foreach_get("color", rgba)
        rgba = rgba.reshape(-1, 4)
        np.testing.assert_allclose(rgba[:, :3], expected_tiny[key][FOREGROUND].reshape(-1, 3), atol=1e-6)
        assert np.all(rgba[:, 3] == 1.0)
    seg = np.empty(n, dtype=np.int32)
    mesh.attributes["seg"].data.foreach_get("value", seg)
    np.testing.assert_array_equal(seg, expected_tiny["seg"][FOREGROUND].ravel())
    conf = np.empty(n, dtype=np.float32)
    mesh.attributes["confidence"].data.foreach_get("value", conf)
    np.testing.assert_allclose(conf, expected_tiny["mask"][FOREGROUND].ravel(), atol=1e-6)
    assert mesh.color_attributes.active_color_name == "Color"


def test_import_uses_no_deprecated_api(bpy_empty, bundles):
    """Blender 5.0 deprecates APIs that 6.0 removes (e.g. ``Material.use_nodes``): the import must not touch
    them, so it keeps working on the next major version."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        import_tiny(bpy_empty, bundles, import_points=True)
        result = bpy_empty.ops.import_scene.sapiens2_capture(
            filepath=str(bundles / "walk.sequence.json"), mesh_per_frame=True
        )
        assert result == {"FINISHED"}


@pytest.mark.parametrize(("source", "attribute"), [("IMAGE", "Color"), ("ALBEDO", "Albedo")])
def test_material_shows_the_chosen_colour(bpy_empty, bundles, source, attribute):
    mesh = import_tiny(bpy_empty, bundles, color_source=source).data
    material = mesh.materials[0]
    attr_nodes = [n for n in material.node_tree.nodes if n.type == "ATTRIBUTE"]
    assert [n.attribute_name for n in attr_nodes] == [attribute]
    link = next(lk for lk in material.node_tree.links if lk.from_node == attr_nodes[0])
    assert link.to_socket.name == "Base Color"
    assert mesh.color_attributes.render_color_index == mesh.color_attributes.find(attribute)


def test_points_object_keeps_every_foreground_pixel(bpy_empty, bundles, expected_tiny, to_blender, mesh_data):
    bpy = bpy_empty
    import_tiny(bpy, bundles, import_points=True, import_mesh=False, import_armatures=False)
    assert bpy.data.objects.get("tiny mesh") is None
    points = bpy.data.objects["tiny points"]
    assert len(points.data.polygons) == 0
    np.testing.assert_allclose(
        mesh_data(points.data)["co"],
        to_blender(expected_tiny["points"][FOREGROUND].reshape(-1, 3)),
        atol=1e-5,
    )
    modifier = points.modifiers["Sapiens2 Points"]
    assert modifier.type == "NODES"
    kinds = {n.bl_idname for n in modifier.node_group.nodes}
    assert {"GeometryNodeMeshToPoints", "GeometryNodeSetMaterial"} <= kinds
    assert evaluated_point_count(bpy, points) == 40  # the modifier really turns them into 40 points


def evaluated_point_count(bpy, obj) -> int:
    """Points of the object's evaluated geometry: ``evaluated_geometry()`` (4.4+), else the point-cloud instance
    the depsgraph makes of it (4.2, where a Geometry Nodes point cloud is not the object's own data)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = obj.evaluated_get(depsgraph)
    if hasattr(evaluated, "evaluated_geometry"):
        geometry = evaluated.evaluated_geometry()  # keep the set alive while reading its point cloud
        return len(geometry.pointcloud.points) if geometry.pointcloud is not None else 0
    clouds = [
        len(inst.object.data.points)
        for inst in depsgraph.object_instances
        if inst.object.type == "POINTCLOUD" and inst.object.original == obj
    ]
    assert len(clouds) <= 1, clouds
    return clouds[0] if clouds else 0


def test_full_size_capture_vertices_sit_on_their_pixels(bpy_empty, bundles, project_to_pixels, read_json):
    """1024x768 bundle: every vertex projects back onto the pixel centre it came from."""
    bpy = bpy_empty
    assert bpy.ops.import_scene.sapiens2_capture(filepath=str(bundles / "figure.json")) == {"FINISHED"}
    mesh = bpy.data.objects["figure mesh"].data
    meta = read_json(bundles / "figure.json")
    assert (meta["image"]["width"], meta["image"]["height"]) == (768, 1024)
    assert 100_000 < len(mesh.vertices) < 768 * 1024 * 0.3 and len(mesh.polygons) > 100_000
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    sample = co.reshape(-1, 3)[:: len(mesh.vertices) // 200]
    pixels = project_to_pixels(bpy.context.scene, bpy.data.objects["figure camera"], sample)
    np.testing.assert_allclose(pixels - np.floor(pixels), 0.5, atol=2e-3)  # pixel centres
    assert mesh.has_custom_normals and {"Color", "Albedo"} <= set(mesh.color_attributes.keys())
