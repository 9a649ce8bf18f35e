"""Render the humanoid-rig pictures in docs/blender.md from a real headless run.

    SAPIENS2_BLENDER_PYTHON=.venv-blender/bin/python .venv/bin/python tests/blender/render_rig_images.py

This process writes the tests' ground-truth sequence (tests/blender/rig_truth.py) with the project's writer; a
Python with the bpy wheel imports it with *Humanoid Rig* (checkout add-on, loaded by path), generates a Rigify
control rig from a Rigify-named import, retargets onto it and onto a Mixamo-named stand-in character, and
renders with Cycles (CPU). Armatures do not render, so bones are drawn as tubes for the pictures.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "images"

CHILD = r"""
import os, sys, tempfile, importlib.util
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp())
import bpy, addon_utils
import numpy as np
from mathutils import Vector

repo, sequence, out_dir = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("export_mocap", os.path.join(repo, "scripts", "export_mocap.py"))
script = importlib.util.module_from_spec(spec); spec.loader.exec_module(script)
addon = script.load_addon()
FRAME = 45


def options(naming):
    return addon.parse.options.ImportOptions(import_mesh=False, import_background=False, import_armatures=False,
                                             import_rig=True, rig_naming=naming)


def setup_render(scene):
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = 16
    scene.cycles.use_denoising = True
    scene.render.resolution_x, scene.render.resolution_y, scene.render.resolution_percentage = 720, 480, 100
    scene.render.image_settings.file_format = "PNG"
    scene.view_settings.view_transform = "Standard"
    world = bpy.data.worlds.new("world")
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.55, 0.58, 0.62, 1.0)
    scene.world = world
    sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
    sun.data.energy = 2.5
    sun.rotation_euler = (0.9, 0.2, 0.6)
    scene.collection.objects.link(sun)


def tubes(name, arm, radius, colour, keep=lambda n: True):
    segments = [(arm.matrix_world @ arm.pose.bones[b.name].head, arm.matrix_world @ arm.pose.bones[b.name].tail)
                for b in arm.data.bones if keep(b.name)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([tuple(v) for s in segments for v in s], [(2 * i, 2 * i + 1) for i in range(len(segments))], [])
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    mat = bpy.data.materials.new(name)
    mat.use_nodes = True
    bsdf = mat.node_tree.nodes["Principled BSDF"]
    bsdf.inputs["Base Color"].default_value = colour
    bsdf.inputs["Emission Color"].default_value = colour
    bsdf.inputs["Emission Strength"].default_value = 0.5
    group = bpy.data.node_groups.new(name, "GeometryNodeTree")
    group.interface.new_socket(name="Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket(name="Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    gi, go = group.nodes.new("NodeGroupInput"), group.nodes.new("NodeGroupOutput")
    curve, circle = group.nodes.new("GeometryNodeMeshToCurve"), group.nodes.new("GeometryNodeCurvePrimitiveCircle")
    circle.inputs["Radius"].default_value = radius
    sweep, setmat = group.nodes.new("GeometryNodeCurveToMesh"), group.nodes.new("GeometryNodeSetMaterial")
    setmat.inputs["Material"].default_value = mat
    group.links.new(gi.outputs[0], curve.inputs["Mesh"])
    group.links.new(curve.outputs["Curve"], sweep.inputs["Curve"])
    group.links.new(circle.outputs["Curve"], sweep.inputs["Profile Curve"])
    group.links.new(sweep.outputs["Mesh"], setmat.inputs["Geometry"])
    group.links.new(setmat.outputs["Geometry"], go.inputs[0])
    obj.modifiers.new(name, "NODES").node_group = group
    return obj


def camera_on(objects, direction=(0.35, -1.0, 0.15)):
    pts = np.array([tuple(v.co) for o in objects for v in o.data.vertices])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    cam = bpy.data.objects.new("view", bpy.data.cameras.new("view"))
    cam.data.lens = 50
    d = Vector(direction).normalized()
    cam.location = Vector(((lo + hi) / 2).tolist()) + d * 1.2 * float(np.max(hi - lo)) / (36 / 50)
    cam.rotation_euler = (-d).to_track_quat("-Z", "Y").to_euler()
    bpy.context.scene.collection.objects.link(cam)
    bpy.context.scene.camera = cam


def render(name):
    bpy.context.scene.render.filepath = os.path.join(out_dir, name)
    bpy.ops.render.render(write_still=True)


ORANGE, BLUE = (0.95, 0.35, 0.05, 1.0), (0.1, 0.45, 0.95, 1.0)
addon_utils.enable("rigify", default_set=True)
try:
    # Rigify: import with Rigify names, generate the control rig, retarget, show capture rig and DEF bones.
    bpy.ops.wm.read_homefile(use_empty=True)
    result = addon.build.scene.import_files(bpy.context, [sequence], options("RIGIFY"))
    rig = next(o for o in result.objects if "sapiens2_rig" in o)
    control = addon.build.rig_retarget.generate_rigify(bpy.context, rig)
    control.location.x += 1.1
    addon.build.rig_retarget.retarget(bpy.context, rig, control, frames=range(1, FRAME + 1))
    bpy.context.scene.frame_set(FRAME)
    made = [tubes("capture rig", rig, 0.008, ORANGE), tubes("rigify", control, 0.008, BLUE, lambda n: n.startswith("DEF-"))]
    setup_render(bpy.context.scene)
    camera_on(made)
    render("blender_rig_retarget_rigify.png")

    # Mixamo: a stand-in character (Mixamo bone names, shorter, other rolls) next to the capture rig.
    bpy.ops.wm.read_homefile(use_empty=True)
    result = addon.build.scene.import_files(bpy.context, [sequence], options("MIXAMO"))
    rig = next(o for o in result.objects if "sapiens2_rig" in o)
    m = addon.parse.rig_measure.canonical(addon.parse.rig_skeleton.Measurements(
        lengths={k: 0.8 * v for k, v in __import__("json").loads(rig["sapiens2_rig_lengths"]).items()},
        hip_width=0.16, hand_layout=addon.parse.rig_measure.STANDARD_HAND * 0.8,
        foot_layout=addon.parse.rig_measure.STANDARD_FOOT * 0.8))
    collection = bpy.data.collections.new("character")
    bpy.context.scene.collection.children.link(collection)
    character = addon.build.rig.create_rig(bpy.context, "character", addon.parse.rig_skeleton.rest_pose(m),
                                           addon.parse.rig_names.preset("MIXAMO"), collection,
                                           addon.build.tracking.CreatedData())
    del character["sapiens2_rig"]
    character.location.x += 1.1
    addon.build.rig_retarget.retarget(bpy.context, rig, character, frames=range(1, FRAME + 1))
    bpy.context.scene.frame_set(FRAME)
    made = [tubes("capture rig", rig, 0.008, ORANGE), tubes("character", character, 0.011, BLUE)]
    setup_render(bpy.context.scene)
    camera_on(made)
    render("blender_rig_retarget_mixamo.png")
finally:
    addon_utils.disable("rigify", default_set=True)
print("done")
os._exit(0)  # the generated Rigify rig leaves UI classes registered; nothing else runs after this
"""


def main() -> int:
    spec = importlib.util.spec_from_file_location("conftest_blender", Path(__file__).with_name("conftest.py"))
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    truth, parse = conftest.load_rig_truth()
    OUT.mkdir(parents=True, exist_ok=True)
    python = os.environ.get("SAPIENS2_BLENDER_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="sapiens2_rig_docs_") as tmp:
        truth.write_truth_bundles(Path(tmp), parse)
        subprocess.run([python, "-c", CHILD, str(REPO), str(Path(tmp) / "rigtruth.sequence.json"), str(OUT)],
                       check=True, timeout=900)  # fmt: skip
    for png in sorted(OUT.glob("blender_rig_*.png")):
        print(png, f"{png.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
