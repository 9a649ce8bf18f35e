"""Pointmap -> Blender mesh (grid quads) or vertex cloud, with normals and per-pixel attributes.

All data goes through ``foreach_set`` with flat float32/int32 arrays: a 1024x768 pointmap builds in well under
a second, where per-vertex Python or ``from_pydata`` would take several.
"""

from __future__ import annotations

import bpy
import numpy as np

from ..parse.axes import convert_normals, convert_points
from ..parse.bundle import Capture
from ..parse.errors import BundleError
from ..parse.grid import GridMesh, build_grid, valid_pixels
from ..parse.options import ImportOptions
from .material import attribute_material, points_node_group
from .tracking import CreatedData

COLOR_ATTRIBUTE = "Color"
ALBEDO_ATTRIBUTE = "Albedo"
ALPHA_ATTRIBUTE = "alpha"  # the matte's soft alpha per vertex (bundles with a matting layer)


def capture_grid(capture: Capture, options: ImportOptions, faces: bool) -> GridMesh:
    layers = capture.layers
    if "P" not in layers:
        raise BundleError(
            f"{capture.json_path.name}: the EXR has no pointmap (P.X/P.Y/P.Z), so no mesh can be built. "
            "Untick 'Mesh' and 'Points', or export the bundle with the pointmap task."
        )
    x, y, z = layers.channels("P")
    valid = valid_pixels(
        x,
        y,
        z,
        mask=layers.channels("mask")[0] if "mask" in layers else None,
        seg=layers.channels("seg")[0] if "seg" in layers else None,
        drop_background=options.drop_background,
    )
    return build_grid(
        z, valid, stride=options.mesh_stride, depth_threshold=options.depth_threshold, faces=faces
    )


def _rgba(rgb: np.ndarray) -> np.ndarray:
    out = np.ones((rgb.shape[0], 4), dtype=np.float32)
    out[:, :3] = rgb
    return out


def _add_attributes(mesh: bpy.types.Mesh, capture: Capture, grid: GridMesh) -> list[str]:
    """Per-vertex colour, albedo, seg class and confidence; returns the colour attribute names made."""
    colors = []
    for layer, attr_name in (("rgb", COLOR_ATTRIBUTE), ("albedo", ALBEDO_ATTRIBUTE)):
        if layer in capture.layers:
            mesh.color_attributes.new(attr_name, "FLOAT_COLOR", "POINT")
            # Look the attribute up again: references go stale after another attributes.new() (bpy 4.5/5.0).
            values = _rgba(capture.layers.sample(layer, grid.rows, grid.cols))
            mesh.color_attributes[attr_name].data.foreach_set("color", values.ravel())
            colors.append(attr_name)
    if "seg" in capture.layers:
        seg = np.rint(capture.layers.sample("seg", grid.rows, grid.cols)).astype(np.int32)
        mesh.attributes.new("seg", "INT", "POINT")
        mesh.attributes["seg"].data.foreach_set("value", seg)
    confidence = next((n for n in ("confidence", "mask") if n in capture.layers), None)
    if confidence is not None:
        mesh.attributes.new("confidence", "FLOAT", "POINT")
        mesh.attributes["confidence"].data.foreach_set(
            "value", capture.layers.sample(confidence, grid.rows, grid.cols)
        )
    if "alpha" in capture.layers:
        mesh.attributes.new(ALPHA_ATTRIBUTE, "FLOAT", "POINT")
        mesh.attributes[ALPHA_ATTRIBUTE].data.foreach_set(
            "value", capture.layers.sample("alpha", grid.rows, grid.cols)
        )
    return colors


def build_mesh_data(
    name: str, capture: Capture, grid: GridMesh, options: ImportOptions, created: CreatedData
) -> bpy.types.Mesh:
    """Mesh datablock from a grid: positions in Blender's frame, quads, custom normals, attributes."""
    mesh = created.add("meshes", bpy.data.meshes.new(name))
    positions = convert_points(
        capture.layers.sample("P", grid.rows, grid.cols), options.up_axis, options.global_scale
    )
    mesh.vertices.add(grid.num_vertices)
    mesh.vertices.foreach_set("co", positions.ravel())
    num_faces = grid.quads.shape[0]
    if num_faces:
        mesh.loops.add(4 * num_faces)
        mesh.loops.foreach_set("vertex_index", grid.quads.ravel())
        mesh.polygons.add(num_faces)
        mesh.polygons.foreach_set("loop_start", np.arange(0, 4 * num_faces, 4, dtype=np.int32))
    mesh.update(calc_edges=True)
    if num_faces and options.use_normals and "N" in capture.layers:
        normals = convert_normals(capture.layers.sample("N", grid.rows, grid.cols), options.up_axis)
        length = np.linalg.norm(normals, axis=1, keepdims=True)
        normals = np.where(
            length > 1e-6, normals / np.maximum(length, 1e-12), 0.0
        )  # zero = Blender's own normal
        mesh.polygons.foreach_set("use_smooth", np.ones(num_faces, dtype=bool))
        mesh.normals_split_custom_set_from_vertices(normals.astype(np.float32))
    colors = _add_attributes(mesh, capture, grid)
    preferred = {"IMAGE": COLOR_ATTRIBUTE, "ALBEDO": ALBEDO_ATTRIBUTE}.get(options.color_source)
    active = preferred if preferred in colors else (colors[0] if colors else None)
    if active:
        index = mesh.color_attributes.find(active)
        mesh.color_attributes.active_color_index = index
        mesh.color_attributes.render_color_index = index
    return mesh


def _grid_object(
    name: str, capture: Capture, options: ImportOptions, collection, created: CreatedData, faces: bool
) -> tuple[bpy.types.Object, GridMesh, str | None]:
    """Object with the capture's grid mesh (quads or bare vertices); also the grid and the active colour name."""
    grid = capture_grid(capture, options, faces=faces)
    mesh = build_mesh_data(name, capture, grid, options, created)
    obj = created.add("objects", bpy.data.objects.new(name, mesh))
    collection.objects.link(obj)
    active = mesh.color_attributes.active_color_name if len(mesh.color_attributes) else None
    return obj, grid, active


def create_mesh_object(
    name: str,
    capture: Capture,
    options: ImportOptions,
    collection,
    created: CreatedData,
    materials: dict[str, bpy.types.Material] | None = None,
) -> bpy.types.Object:
    """The capture's surface as a grid mesh object with a material showing the chosen colours.

    ``materials`` (attribute name -> material) shares one material between calls: the meshes of a sequence
    then have one look to edit, not one material per frame."""
    obj, _, active = _grid_object(name, capture, options, collection, created, faces=True)
    if active and options.color_source != "NONE":
        materials = {} if materials is None else materials
        alpha = ALPHA_ATTRIBUTE if ALPHA_ATTRIBUTE in obj.data.attributes else None
        key = active if alpha is None else f"{active}+{alpha}"
        if key not in materials:
            materials[key] = attribute_material(f"{name} ({active})", active, created, alpha)
        obj.data.materials.append(materials[key])
    return obj


def create_points_object(
    name: str, capture: Capture, options: ImportOptions, collection, created: CreatedData
) -> bpy.types.Object:
    """Every kept pixel as a vertex, shown as points through a Geometry Nodes modifier."""
    obj, grid, active = _grid_object(name, capture, options, collection, created, faces=False)
    depth = (
        float(np.median(capture.layers.sample("P", grid.rows, grid.cols)[:, 2])) if grid.num_vertices else 1.0
    )
    # Half the spacing between neighbouring samples, so points just touch.
    radius = 0.5 * depth / capture.camera.fx * options.mesh_stride * options.global_scale
    alpha = ALPHA_ATTRIBUTE if ALPHA_ATTRIBUTE in obj.data.attributes else None
    material = attribute_material(f"{name} ({active})", active, created, alpha) if active else None
    modifier = obj.modifiers.new("Sapiens2 Points", "NODES")
    modifier.node_group = points_node_group(f"{name} points", radius, material, created)
    return obj
