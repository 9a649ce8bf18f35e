"""BVH and FBX export of an imported humanoid rig through Blender's own bundled exporters.

BVH (``io_anim_bvh``) carries the skeleton, its motion and the frame rate; the camera goes beside it as
``<name>.camera.json`` (intrinsics, resolution, world matrix per frame), since BVH has no camera. FBX
(``io_scene_fbx``) carries the rig and the camera together, every frame keyed. Both exporters ship enabled by
default with Blender (and in the ``bpy`` wheel); if one is missing the error says which add-on to enable.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import bpy
import numpy as np

__all__ = ["export_bvh", "export_fbx", "find_camera", "find_rig", "write_camera_json"]


class ExportError(RuntimeError):
    """Nothing (or the wrong thing) to export, or a Blender exporter is not available."""


def find_rig(context, obj=None) -> bpy.types.Object:
    """The Sapiens2 humanoid rig to export: ``obj``, the active object, or the only rig in the scene."""
    candidates = [obj, context.view_layer.objects.active]
    for candidate in candidates:
        if candidate is not None and candidate.type == "ARMATURE" and "sapiens2_rig" in candidate:
            return candidate
    rigs = [o for o in context.scene.objects if o.type == "ARMATURE" and "sapiens2_rig" in o]
    if len(rigs) == 1:
        return rigs[0]
    raise ExportError(
        "Select the humanoid rig to export (import a capture with 'Humanoid Rig' ticked)."
        if not rigs
        else f"{len(rigs)} humanoid rigs in the scene: make the one to export the active object."
    )


def find_camera(context, rig: bpy.types.Object) -> bpy.types.Object | None:
    """The camera imported with the rig (same import collection), else the scene camera."""
    for collection in rig.users_collection:
        cameras = [o for o in collection.objects if o.type == "CAMERA"]
        if cameras:
            return cameras[0]
    return context.scene.camera


def _frame_range(rig: bpy.types.Object, scene) -> tuple[int, int]:
    action = rig.animation_data.action if rig.animation_data else None
    if action is not None:
        start, end = action.frame_range
        return round(start), round(end)
    return scene.frame_start, scene.frame_end


def _require(operator_path: str, addon: str):
    module, name = operator_path.split(".")
    op = getattr(getattr(bpy.ops, module), name)
    try:
        op.get_rna_type()
    except (KeyError, AttributeError) as exc:
        raise ExportError(f"Blender's {addon} add-on is not enabled (Preferences > Add-ons).") from exc
    return op


def _with_parents(objects) -> set:
    found = set()
    for obj in objects:
        while obj is not None and obj not in found:
            found.add(obj)
            obj = obj.parent
    return found


@contextmanager
def only_evaluating(context, keep):
    """Everything but ``keep`` (and what it hangs from or is constrained to) disabled in the viewport while the
    exporter steps through the frames: a default import's 308-bone keypoint armature and meshes would otherwise
    be evaluated on every frame (seconds for 300 frames) for nothing the file carries. Restored afterwards."""
    needed = _with_parents([o for o in keep if o is not None])
    for obj in list(needed):
        bones = obj.pose.bones if obj.type == "ARMATURE" and obj.pose else []
        for owner in [obj, *bones]:
            for constraint in getattr(owner, "constraints", []):
                target = getattr(constraint, "target", None)
                if target is not None:
                    needed |= _with_parents([target])
    hidden = [o for o in context.scene.objects if o not in needed and not o.hide_viewport]
    for obj in hidden:
        obj.hide_viewport = True
    try:
        yield
    finally:
        for obj in hidden:
            obj.hide_viewport = False


def _moving_root(rig) -> bool:
    """True when the bone that carries the travel is the BVH root: a rig with a static ``root`` bone above the
    pelvis (the UE preset) needs position channels below the root, or the body stays at the origin."""
    roots = [b for b in rig.data.bones if b.parent is None]
    return len(roots) == 1 and "root" not in list(rig.get("sapiens2_rig_canonical", []))


def export_bvh(context, path: Path | str, rig=None, rotate_mode: str = "ZXY") -> dict:
    """Write ``path`` (.bvh) and ``<stem>.camera.json``; returns a summary (frames, fps, joints, files).

    Only the root has position channels when the root is what moves; a rig with a static ``root`` bone (UE) or
    keyed face bones gets position channels on every joint, so the pelvis keeps its travel."""
    rig = find_rig(context, rig)
    path = Path(path)
    scene = context.scene
    start, end = _frame_range(rig, scene)
    op = _require("export_anim.bvh", "BVH (io_anim_bvh)")
    face = rig.get("sapiens2_rig_face") == "BONES"
    root_only = not face and _moving_root(rig)
    override = context.temp_override(active_object=rig, object=rig, selected_objects=[rig])
    with only_evaluating(context, [rig]), override:
        result = op(
            filepath=str(path),
            frame_start=start,
            frame_end=end,
            rotate_mode=rotate_mode,
            root_transform_only=root_only,
            global_scale=1.0,
        )
    if result != {"FINISHED"}:
        raise ExportError(f"The BVH exporter did not finish ({result}).")
    camera = find_camera(context, rig)
    files = [str(path)]
    if camera is not None:
        files.append(str(write_camera_json(context, camera, path.with_suffix(".camera.json"), start, end)))
    return {"frames": end - start + 1, "fps": scene.render.fps / scene.render.fps_base, "files": files,
            "joints": len(rig.data.bones)}  # fmt: skip


def export_fbx(context, path: Path | str, rig=None, with_camera: bool = True) -> dict:
    """Write ``path`` (.fbx): the rig (no leaf bones added, every frame keyed) and the import's camera."""
    rig = find_rig(context, rig)
    scene = context.scene
    start, end = _frame_range(rig, scene)
    op = _require("export_scene.fbx", "FBX (io_scene_fbx)")
    camera = find_camera(context, rig) if with_camera else None
    objects = [rig] + ([camera] if camera is not None else [])
    saved = (scene.frame_start, scene.frame_end)
    selection = {o: o.select_get() for o in context.view_layer.objects}
    scene.frame_start, scene.frame_end = start, end
    try:
        for obj in context.view_layer.objects:
            obj.select_set(obj in objects)
        with (
            only_evaluating(context, objects),
            context.temp_override(active_object=rig, object=rig, selected_objects=objects),
        ):
            result = op(
                filepath=str(path),
                use_selection=True,
                object_types={"ARMATURE", "CAMERA"},
                add_leaf_bones=False,
                bake_anim=True,
                bake_anim_use_all_bones=True,
                bake_anim_use_nla_strips=False,
                bake_anim_use_all_actions=False,
                bake_anim_force_startend_keying=True,
                bake_anim_step=1.0,
                bake_anim_simplify_factor=0.0,
                primary_bone_axis="Y",
                secondary_bone_axis="X",
            )
    finally:
        scene.frame_start, scene.frame_end = saved
        for obj, selected in selection.items():
            obj.select_set(selected)
    if result != {"FINISHED"}:
        raise ExportError(f"The FBX exporter did not finish ({result}).")
    return {"frames": end - start + 1, "fps": scene.render.fps / scene.render.fps_base, "files": [str(path)],
            "joints": len(rig.data.bones), "camera": camera.name if camera else None}  # fmt: skip


def lens_to_pixels(cam: bpy.types.Camera, scene) -> tuple[float, float, float, float]:
    """(fx, fy, cx, cy) in corner-origin pixels: the import's camera model (parse/camera_model.py) inverted."""
    r = scene.render
    width, height = r.resolution_x, r.resolution_y
    side = max(width, height)
    sensor = cam.sensor_height if cam.sensor_fit == "VERTICAL" else cam.sensor_width
    fx = cam.lens / sensor * side
    fy = fx * r.pixel_aspect_x / r.pixel_aspect_y
    return fx, fy, width / 2.0 - cam.shift_x * side, height / 2.0 + cam.shift_y * side


def write_camera_json(context, camera, path: Path, start: int, end: int) -> Path:
    """The camera as plain numbers: OpenCV-style intrinsics per frame and its Blender world matrix."""
    scene = context.scene
    frames = []
    current = scene.frame_current
    try:
        for frame in range(start, end + 1):
            scene.frame_set(frame)
            fx, fy, cx, cy = lens_to_pixels(camera.data, scene)
            frames.append({"frame": frame, "fx": fx, "fy": fy, "cx": cx, "cy": cy,
                           "matrix_world": np.array(camera.matrix_world).round(9).tolist()})  # fmt: skip
    finally:
        scene.frame_set(current)
    doc = {
        "format": "sapiens2-mocap-camera",
        "version": "1.0",
        "fps": scene.render.fps / scene.render.fps_base,
        "width": scene.render.resolution_x,
        "height": scene.render.resolution_y,
        "convention": "pixels corner-origin; matrix_world is Blender's (camera looks down its local -Z)",
        "frames": frames,
    }
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path
