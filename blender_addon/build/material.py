"""Materials that show the capture's colour attributes (users otherwise see a grey mesh or invisible points)."""

from __future__ import annotations

import bpy

from .tracking import CreatedData


def attribute_material(
    name: str, attribute: str, created: CreatedData, alpha: str | None = None
) -> bpy.types.Material:
    """Principled BSDF whose base colour reads ``attribute`` (a colour attribute of the mesh) and, with ``alpha``
    (a float attribute: the matte), whose opacity follows it, so the silhouette renders with soft edges."""
    material = created.add("materials", bpy.data.materials.new(name))
    if material.node_tree is None:  # 4.x; 5.0 creates the node tree itself and deprecates use_nodes
        material.use_nodes = True
    nodes, links = material.node_tree.nodes, material.node_tree.links
    shader = next(n for n in nodes if n.type == "BSDF_PRINCIPLED")
    shader.inputs["Roughness"].default_value = 0.8
    attr = nodes.new("ShaderNodeAttribute")
    attr.attribute_type = "GEOMETRY"
    attr.attribute_name = attribute
    attr.location = (shader.location.x - 300, shader.location.y)
    links.new(attr.outputs["Color"], shader.inputs["Base Color"])
    if alpha is not None:
        opacity = nodes.new("ShaderNodeAttribute")
        opacity.attribute_type = "GEOMETRY"
        opacity.attribute_name = alpha
        opacity.location = (shader.location.x - 300, shader.location.y - 200)
        links.new(opacity.outputs["Fac"], shader.inputs["Alpha"])
    return material


def points_node_group(name: str, radius: float, material: bpy.types.Material | None, created: CreatedData):
    """Geometry Nodes: mesh vertices -> points of ``radius`` with ``material`` (pointclouds cannot be filled from Python in 4.5)."""
    group = created.add("node_groups", bpy.data.node_groups.new(name, "GeometryNodeTree"))
    group.interface.new_socket(name="Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket(name="Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    group_in = group.nodes.new("NodeGroupInput")
    group_out = group.nodes.new("NodeGroupOutput")
    to_points = group.nodes.new("GeometryNodeMeshToPoints")
    to_points.inputs["Radius"].default_value = radius
    set_material = group.nodes.new("GeometryNodeSetMaterial")
    set_material.inputs["Material"].default_value = material
    group.links.new(group_in.outputs[0], to_points.inputs["Mesh"])
    group.links.new(to_points.outputs["Points"], set_material.inputs["Geometry"])
    group.links.new(set_material.outputs["Geometry"], group_out.inputs[0])
    for i, node in enumerate((group_in, to_points, set_material, group_out)):
        node.location = (i * 250, 0)
    return group
