"""Keyframes through the layered-action API (Blender 4.4+, the only one left in 5.0), legacy fcurves before."""

from __future__ import annotations

import bpy
import numpy as np

from .tracking import CreatedData


def action_fcurves(owner: bpy.types.ID, name: str, created: CreatedData):
    """A new action assigned to ``owner``; returns the fcurve collection to add curves to."""
    action = created.add("actions", bpy.data.actions.new(name))
    anim = owner.animation_data_create()
    if hasattr(action, "layers") and hasattr(action, "slots"):  # layered actions (4.4+)
        slot = action.slots.new(id_type=owner.id_type, name=owner.name)
        anim.action = action
        anim.action_slot = slot
        strip = action.layers.new("Layer").strips.new(type="KEYFRAME")
        return strip.channelbag(slot, ensure=True).fcurves
    anim.action = action
    return action.fcurves


def add_curve(
    fcurves, data_path: str, index: int, frames: np.ndarray, values: np.ndarray, constant: bool = False
):
    """One fcurve with a key per frame, filled by ``foreach_set`` (no per-key Python)."""
    curve = fcurves.new(data_path, index=index)
    curve.keyframe_points.add(len(frames))
    co = np.empty((len(frames), 2), dtype=np.float32)
    co[:, 0], co[:, 1] = frames, values
    curve.keyframe_points.foreach_set("co", co.ravel())
    if constant:
        for key in curve.keyframe_points:
            key.interpolation = "CONSTANT"
    else:
        interpolation = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
        curve.keyframe_points.foreach_set(
            "interpolation", np.full(len(frames), interpolation, dtype=np.int32)
        )
    curve.update()
    return curve


def add_visibility_curves(fcurves, frames: np.ndarray, visible: np.ndarray) -> None:
    """Constant ``hide_viewport``/``hide_render`` keys: shown on the frames where ``visible`` is True."""
    hidden = np.where(np.asarray(visible, dtype=bool), 0.0, 1.0)
    for path in ("hide_viewport", "hide_render"):
        add_curve(fcurves, path, 0, np.asarray(frames, dtype=np.float32), hidden, constant=True)


def keyframe_pose(
    obj: bpy.types.Object,
    bone_names: list[str],
    frames: np.ndarray,
    locations: np.ndarray,
    quaternions: np.ndarray,
    scores: np.ndarray,
    created: CreatedData,
    visible: np.ndarray | None = None,
) -> bpy.types.Action:
    """Location (T,B,3), quaternion (T,B,4) and confidence (T,B) keys for every pose bone; with ``visible``
    (T,) also visibility keys, in the same action (an ID plays one action)."""
    fcurves = action_fcurves(obj, f"{obj.name} motion", created)
    for b, name in enumerate(bone_names):
        base = f'pose.bones["{bpy.utils.escape_identifier(name)}"]'
        for axis in range(3):
            add_curve(fcurves, f"{base}.location", axis, frames, locations[:, b, axis])
        for axis in range(4):
            add_curve(fcurves, f"{base}.rotation_quaternion", axis, frames, quaternions[:, b, axis])
        add_curve(fcurves, f'{base}["confidence"]', 0, frames, scores[:, b])
    if visible is not None:
        add_visibility_curves(fcurves, frames, visible)
    return obj.animation_data.action


def keyframe_visibility(
    obj: bpy.types.Object, frames: np.ndarray, visible: np.ndarray, created: CreatedData
) -> None:
    """A visibility-only action: ``obj`` shows on the frames where ``visible`` is True (per-frame meshes)."""
    add_visibility_curves(action_fcurves(obj, f"{obj.name} visibility", created), frames, visible)
