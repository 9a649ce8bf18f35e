"""Pointmap -> Blender mesh (grid quads) or vertex cloud, with normals and per-pixel attributes.

All data goes through ``foreach_set`` with flat float32/int32 arrays: a 1024x768 pointmap builds in well under
a second, where per-vertex Python or ``from_pydata`` would take several. Custom normals use Blender 4.5+'s free
``custom_normal`` attribute where it exists (see ``set_vertex_normals``).
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
FREE_NORMALS_ATTRIBUTE = "custom_normal"  # Blender 4.5+: a float vector attribute read as custom normals
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


def _unit_or_zero(normals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors, and a mask of the rows that had no usable direction (zero-length or NaN)."""
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    usable = (length > 1e-6)[:, 0]
    return np.where(usable[:, None], normals / np.maximum(length, 1e-12), 0.0).astype(np.float32), ~usable


def _set_free_normals(mesh: bpy.types.Mesh, normals: np.ndarray, unusable: np.ndarray) -> bool:
    """Blender 4.5+ stores custom normals as a plain float vector attribute ``custom_normal`` ("free" normals):
    written with one foreach_set, exact, no fan spaces to compute. False (attribute removed again) where this
    Blender does not read that attribute as custom normals (4.2-4.4)."""
    if unusable.any():  # no direction: Blender's own normal, as the classic call does for a zero vector
        own = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        mesh.vertex_normals.foreach_get("vector", own)
        normals = np.where(unusable[:, None], own.reshape(-1, 3), normals)
    attribute = mesh.attributes.new(FREE_NORMALS_ATTRIBUTE, "FLOAT_VECTOR", "POINT")
    attribute.data.foreach_set("vector", np.ascontiguousarray(normals, dtype=np.float32).ravel())
    if mesh.has_custom_normals:
        return True
    mesh.attributes.remove(mesh.attributes[FREE_NORMALS_ATTRIBUTE])
    return False


def set_vertex_normals(mesh: bpy.types.Mesh, normals: np.ndarray) -> None:
    """Per-vertex custom normals from the normal layer (any length; a zero vector keeps Blender's own normal).

    Why two paths: ``normals_split_custom_set_from_vertices`` encodes every normal in its corner fan space,
    which on Blender 5.3 costs 0.4-1.0 s for a 1024x768 capture (2x the whole import on 4.5); the free
    ``custom_normal`` attribute of 4.5+ costs milliseconds and keeps the normals exactly as predicted."""
    unit, unusable = _unit_or_zero(normals)
    if _set_free_normals(mesh, unit, unusable):
        return
    mesh.polygons.foreach_set("use_smooth", np.ones(len(mesh.polygons), dtype=bool))
    mesh.normals_split_custom_set_from_vertices(unit)  # 4.2-4.4: zero = Blender's own normal


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
    _add_task_attributes(mesh, capture, grid)
    return colors


def _add_task_attributes(mesh: bpy.types.Mesh, capture: Capture, grid: GridMesh) -> None:
    """One point attribute per declared task channel (plug-in tasks), named as its EXR channel: INT for class ids
    (their names as the mesh's custom property ``<channel>.classes``), FLOAT otherwise."""
    for channel in capture.task_channels:
        values = capture.layers.sample_channel(channel.name, grid.rows, grid.cols)
        kind = "INT" if channel.integer else "FLOAT"
        mesh.attributes.new(channel.name, kind, "POINT")
        data = np.rint(values).astype(np.int32) if channel.integer else values
        mesh.attributes[channel.name].data.foreach_set("value", data)
        if channel.classes:
            mesh[f"{channel.name}.classes"] = {str(k): v for k, v in sorted(channel.classes.items())}


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
        set_vertex_normals(mesh, normals)
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
