"""Render the screenshots in docs/blender.md from a real headless import of a synthetic capture.

    python tests/blender/render_docs_images.py            # writes docs/images/blender_*.png

This process writes the bundle with the project's writer and builds the extension; a second Python with the bpy
wheel installs the zip, imports the bundle with the normal operator and renders with Cycles (CPU). Armatures do
not render, so for the pictures only the bones are copied into a tube mesh.
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

CHILD = r'''
import os, sys, tempfile
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp())
import bpy, addon_utils
import numpy as np
from mathutils import Vector

zip_path, bundle, sequence, out_dir = sys.argv[1:5]
bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)


def setup_render(scene, width, height, samples=24):
    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = samples
    scene.cycles.use_denoising = True
    scene.render.resolution_x, scene.render.resolution_y = width, height
    scene.render.resolution_percentage = 100
    scene.render.pixel_aspect_x = scene.render.pixel_aspect_y = 1.0
    scene.render.image_settings.file_format = "PNG"
    scene.render.image_settings.color_mode = "RGB"
    scene.render.image_settings.compression = 100
    scene.view_settings.view_transform = "Standard"
    world = bpy.data.worlds.new("docs world")
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.55, 0.58, 0.62, 1.0)
    world.node_tree.nodes["Background"].inputs["Strength"].default_value = 0.9
    scene.world = world
    sun = bpy.data.objects.new("sun", bpy.data.lights.new("sun", "SUN"))
    sun.data.energy = 2.5
    sun.rotation_euler = (0.9, 0.2, 0.6)
    scene.collection.objects.link(sun)


def pose_segments(arm):
    """World head/tail of every visible bone in the current (posed) frame."""
    return [
        (arm.matrix_world @ arm.pose.bones[b.name].head, arm.matrix_world @ arm.pose.bones[b.name].tail)
        for b in arm.data.bones
        if not b.hide
    ]


def segments_as_tubes(name, segments, radius, colour):
    """Mesh edges for the segments, thickened by a Geometry Nodes curve sweep (armatures do not render)."""
    mesh = bpy.data.meshes.new(name)
    co = [tuple(v) for seg in segments for v in seg]
    mesh.from_pydata(co, [(2 * i, 2 * i + 1) for i in range(len(segments))], [])
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    mat = bpy.data.materials.new("bones")
    mat.use_nodes = True
    shader = mat.node_tree.nodes["Principled BSDF"]
    shader.inputs["Base Color"].default_value = colour
    shader.inputs["Emission Color"].default_value = colour
    shader.inputs["Emission Strength"].default_value = 0.6
    group = bpy.data.node_groups.new("tubes", "GeometryNodeTree")
    group.interface.new_socket(name="Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket(name="Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    gi, go = group.nodes.new("NodeGroupInput"), group.nodes.new("NodeGroupOutput")
    to_curve = group.nodes.new("GeometryNodeMeshToCurve")
    circle = group.nodes.new("GeometryNodeCurvePrimitiveCircle")
    circle.inputs["Radius"].default_value = radius
    circle.inputs["Resolution"].default_value = 8
    sweep = group.nodes.new("GeometryNodeCurveToMesh")
    setmat = group.nodes.new("GeometryNodeSetMaterial")
    setmat.inputs["Material"].default_value = mat
    group.links.new(gi.outputs[0], to_curve.inputs["Mesh"])
    group.links.new(to_curve.outputs["Curve"], sweep.inputs["Curve"])
    group.links.new(circle.outputs["Curve"], sweep.inputs["Profile Curve"])
    group.links.new(sweep.outputs["Mesh"], setmat.inputs["Geometry"])
    group.links.new(setmat.outputs["Geometry"], go.inputs[0])
    obj.modifiers.new("tubes", "NODES").node_group = group
    return obj


def frame_points(name, points, direction, lens=50, margin=1.25):
    """A camera looking along -direction at the points' centre, far enough back to fit their height."""
    pts = np.array([tuple(p) for p in points])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    centre = Vector(((lo + hi) / 2).tolist())
    extent = float(np.max(hi - lo))
    cam = bpy.data.objects.new(name, bpy.data.cameras.new(name))
    cam.data.lens = lens
    cam.data.sensor_fit = "VERTICAL"
    distance = margin * extent / 2 / (cam.data.sensor_height / 2 / lens)
    direction = Vector(direction).normalized()
    cam.location = centre + direction * distance
    cam.rotation_euler = (-direction).to_track_quat("-Z", "Y").to_euler()
    bpy.context.scene.collection.objects.link(cam)
    return cam


def save_rgb(path, rgb_top_down):
    h, w = rgb_top_down.shape[:2]
    img = bpy.data.images.new("out", w, h, alpha=False)
    rgba = np.ones((h, w, 4), np.float32)
    rgba[..., :3] = rgb_top_down
    img.pixels.foreach_set(rgba[::-1].ravel())
    img.filepath_raw = path
    img.file_format = "PNG"
    img.save()


try:
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    assert bpy.ops.import_scene.sapiens2_capture(filepath=bundle) == {"FINISHED"}
    capture_cam = scene.camera
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    segments_as_tubes("bones", pose_segments(arm), 0.009, (0.95, 0.25, 0.05, 1.0))
    setup_render(scene, 640, 480)
    mesh = next(o for o in bpy.data.objects if o.type == "MESH" and o.name.endswith("mesh"))
    co = np.empty(len(mesh.data.vertices) * 3, np.float32)
    mesh.data.vertices.foreach_get("co", co)
    scene.camera = frame_points("overview", co.reshape(-1, 3)[::50], (1.0, -0.9, 0.35), margin=1.05)
    scene.render.filepath = os.path.join(out_dir, "blender_import_overview.png")
    bpy.ops.render.render(write_still=True)

    # Through the imported camera, next to the source image: the mesh and skeleton line up with the pixels.
    scene.camera = capture_cam
    setup_render(scene, 384, 512, samples=16)
    render_path = os.path.join(tempfile.mkdtemp(), "camera.png")
    scene.render.filepath = render_path
    bpy.ops.render.render(write_still=True)
    rendered = bpy.data.images.load(render_path)
    px = np.empty(384 * 512 * 4, np.float32)
    rendered.pixels.foreach_get(px)
    rendered_rgb = px.reshape(512, 384, 4)[::-1, :, :3]
    plate = capture_cam.data.background_images[0].image
    w, h = plate.size
    src = np.empty(w * h * 4, np.float32)
    plate.pixels.foreach_get(src)
    src = src.reshape(h, w, 4)[::-1, :, :3][::2, ::2]  # the plate is already 8-bit sRGB
    gap = np.ones((512, 8, 3), np.float32)
    save_rgb(os.path.join(out_dir, "blender_camera_view.png"), np.concatenate([src, gap, rendered_rgb], axis=1))

    # A sequence: the keyframed armature at three frames (arms raising), overlaid.
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    assert bpy.ops.import_scene.sapiens2_capture(filepath=sequence) == {"FINISHED"}
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    colours = [(0.1, 0.45, 0.95, 1.0), (0.2, 0.8, 0.3, 1.0), (0.95, 0.3, 0.1, 1.0)]
    frames = [scene.frame_start, scene.frame_start + 2, (scene.frame_start + scene.frame_end) // 2]
    tubes = []
    for frame, colour in zip(frames, colours):
        scene.frame_set(frame)
        tubes.append(segments_as_tubes(f"pose {frame}", pose_segments(arm), 0.006, colour))
    setup_render(scene, 640, 480, samples=16)
    pts = [v.co for o in tubes for v in o.data.vertices]
    scene.camera = frame_points("poses", pts, (0.45, -1.0, 0.2), margin=1.1)
    scene.render.filepath = os.path.join(out_dir, "blender_sequence_poses.png")
    bpy.ops.render.render(write_still=True)
finally:
    addon_utils.disable("bl_ext.user_default.sapiens2_capture")
print("done")
'''


def main() -> int:
    spec = importlib.util.spec_from_file_location(
        "synthetic_capture", Path(__file__).with_name("synthetic_capture.py")
    )
    sc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sc)
    OUT.mkdir(parents=True, exist_ok=True)
    python = os.environ.get("SAPIENS2_BLENDER_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="sapiens2_docs_") as tmp:
        folder = Path(tmp)
        bundle = sc.write_figure(folder, "figure", 768, 1024)
        sequence = sc.write_figure_sequence(folder, "walk", 384, 512, 9)
        built = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "build_blender_extension.py"), "--output-dir", str(folder / "dist")],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        zip_path = built.stdout.strip().splitlines()[-1]
        subprocess.run(
            [python, "-c", CHILD, zip_path, str(bundle), str(sequence), str(OUT)], check=True, timeout=900
        )
    for png in sorted(OUT.glob("blender_*.png")):
        print(png, f"{png.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
