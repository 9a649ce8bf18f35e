"""The humanoid rig in Blender: a fixed-length armature in its T-pose, keyed with the solved rotations.

``parse.rig_pipeline`` does the maths; this module only creates the armature (bones, rolls, connections,
collections, Rigify types), turns world frames into Blender's local pose channels (rotation on every bone,
location on the root and on face bones) and writes the keys through ``build.animation``.
"""

from __future__ import annotations

import bpy
import numpy as np

from ..parse.poses import matrix_to_quaternion
from ..parse.rig_names import CONNECTED, NamingPreset
from ..parse.rig_skeleton import FINGERS, RestPose
from .animation import action_fcurves, add_curve, add_visibility_curves
from .tracking import CreatedData

FACE_BONE_LENGTH = 0.01  # metres (x scale): face bones are markers, not deforming bones
# Blender deletes a bone shorter than about 1e-6 when it leaves edit mode (then every lookup by name fails); a part
# the keypoints never spread (a hand whose points coincide, a body a few micrometres tall) keeps its direction
# at this length (x scale). Nothing is posed from a bone's length: the solve's rest heads and frames decide.
MIN_BONE_LENGTH = 1e-4


def _collection_of(canonical: str) -> str:
    if canonical.startswith("face:"):
        return "Face"
    if any(canonical.startswith(f) for f in FINGERS):
        return "Fingers"
    return "Body"


def create_rig(
    context,
    name: str,
    rest: RestPose,
    preset: NamingPreset,
    collection,
    created: CreatedData,
    unit: float = 1.0,
) -> bpy.types.Object:
    """Armature object with the rest pose's bones under the preset's names (face bones keep keypoint names)."""
    armature = created.add("armatures", bpy.data.armatures.new(name))
    armature.display_type = "OCTAHEDRAL"
    obj = created.add("objects", bpy.data.objects.new(name, armature))
    collection.objects.link(obj)
    obj.show_in_front = True
    view_layer = context.view_layer
    previous = view_layer.objects.active
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        groups = {}
        bones = []
        tails = []
        for b, canonical in enumerate(rest.names):
            bone = armature.edit_bones.new(bone_name(preset, canonical))
            tail = rest.tails[b]
            if np.linalg.norm(tail - rest.heads[b]) < MIN_BONE_LENGTH * unit:
                tail = rest.heads[b] + MIN_BONE_LENGTH * unit * rest.frames[b][:, 1]
            tails.append(tail)
            bone.head = rest.heads[b].tolist()
            bone.tail = tail.tolist()
            bone.align_roll(rest.frames[b][:, 2].tolist())
            parent = rest.parent[b]
            if parent >= 0:
                bone.parent = bones[parent]
                # Connected only onto the parent's tail as built (a lengthened parent would pull the head).
                close = np.linalg.norm(rest.heads[b] - tails[parent]) < 1e-6 * max(unit, 1e-6)
                bone.use_connect = bool(canonical in CONNECTED and close)
            group = _collection_of(canonical)
            if group not in groups:
                groups[group] = armature.collections.new(group)
            groups[group].assign(bone)
            bones.append(bone)
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
        view_layer.objects.active = previous
    if preset.rigify_types:
        # Rigify refuses a metarig whose bone collections have no row in its rig UI.
        for row, group in enumerate(armature.collections, start=1):
            _set_rigify(group, "rigify_ui_row", row)
    for canonical in rest.names:
        pose_bone = obj.pose.bones[bone_name(preset, canonical)]
        pose_bone.rotation_mode = "QUATERNION"
        rigify_type = preset.rigify_types.get(canonical)
        if rigify_type:
            _set_rigify(pose_bone, "rigify_type", rigify_type)
    obj["sapiens2_rig"] = preset.key
    obj["sapiens2_rig_bones"] = [bone_name(preset, n) for n in rest.names]
    obj["sapiens2_rig_canonical"] = list(rest.names)
    return obj


def _set_rigify(owner, name: str, value) -> None:
    """Rigify's own property when Rigify is enabled; else the custom property of that name, which Rigify reads
    once enabled on Blender 4.x (5.0 keeps add-on properties apart: enable Rigify before importing there)."""
    if hasattr(owner, name):
        setattr(owner, name, value)
    else:
        owner[name] = value


def bone_name(preset: NamingPreset, canonical: str) -> str:
    return canonical[5:] if canonical.startswith("face:") else preset.name(canonical)


def rest_matrices(obj: bpy.types.Object, names: list[str]) -> np.ndarray:
    """(B, 4, 4) armature-space rest matrices as Blender stores them (roll included)."""
    return np.array([np.array(obj.data.bones[n].matrix_local) for n in names], dtype=np.float64)


def local_channels(
    rotations: np.ndarray,
    heads: np.ndarray,
    rest_frames: np.ndarray,
    blender_rest: np.ndarray,
    parent: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Blender pose channels (location (T, B, 3), quaternion (T, B, 4)) for world frames and heads.

    The solver's frames are re-expressed on Blender's own rest frames (identical up to float rounding of the
    roll), then ``basis = rest^-1 @ rest_parent @ pose_parent^-1 @ pose`` as Blender composes pose bones."""
    frames, bones = heads.shape[:2]
    pose = np.zeros((frames, bones, 4, 4))
    delta = rotations @ np.swapaxes(rest_frames, -1, -2)[None]
    pose[..., :3, :3] = delta @ blender_rest[None, :, :3, :3]
    pose[..., :3, 3] = heads
    pose[..., 3, 3] = 1.0
    rest_inv = np.linalg.inv(blender_rest)
    basis = np.empty_like(pose)
    roots = parent < 0
    basis[:, roots] = rest_inv[None, roots] @ pose[:, roots]
    kids = np.nonzero(~roots)[0]
    p = parent[kids]
    basis[:, kids] = rest_inv[None, kids] @ blender_rest[None, p] @ np.linalg.inv(pose[:, p]) @ pose[:, kids]
    quats = matrix_to_quaternion(basis[..., :3, :3])
    for t in range(1, frames):  # one hemisphere, so interpolation between keys takes the short way
        flip = np.sum(quats[t] * quats[t - 1], axis=-1) < 0
        quats[t, flip] *= -1
    return basis[..., :3, 3], quats


def keyframe_rig(
    obj: bpy.types.Object,
    names: list[str],
    frames: np.ndarray,
    locations: np.ndarray,
    quaternions: np.ndarray,
    keyed_location: np.ndarray,
    created: CreatedData,
    visible: np.ndarray | None = None,
) -> None:
    """Quaternion keys on every bone, location keys where ``keyed_location`` (B,) is set (root, face)."""
    fcurves = action_fcurves(obj, f"{obj.name} motion", created)
    frames = np.asarray(frames, dtype=np.float32)
    for b, name in enumerate(names):
        base = f'pose.bones["{bpy.utils.escape_identifier(name)}"]'
        if keyed_location[b]:
            for axis in range(3):
                add_curve(fcurves, f"{base}.location", axis, frames, locations[:, b, axis])
        for axis in range(4):
            add_curve(fcurves, f"{base}.rotation_quaternion", axis, frames, quaternions[:, b, axis])
    if visible is not None:
        add_visibility_curves(fcurves, frames, visible)


def face_empties(
    context,
    obj: bpy.types.Object,
    head_bone: str,
    names: list[str],
    points: np.ndarray,
    head_rotation: np.ndarray,
    head_position: np.ndarray,
    frames: np.ndarray,
    collection,
    created: CreatedData,
    unit: float,
) -> list[bpy.types.Object]:
    """One keyed empty per face point, parented to the head bone (so it follows the head, expressions ride on
    top): ``points`` (T, F, 3) armature space; the head's frames (T, 3, 3) and heads (T, 3) place them."""
    length = obj.data.bones[head_bone].length
    local = np.einsum("tji,tfj->tfi", head_rotation, points - head_position[:, None, :])
    local[..., 1] -= length  # a bone child hangs off the bone's tail
    made = []
    for f, name in enumerate(names):
        empty = created.add("objects", bpy.data.objects.new(f"{obj.name} {name}", None))
        empty.empty_display_type = "SPHERE"
        empty.empty_display_size = 0.004 * unit
        collection.objects.link(empty)
        empty.parent = obj
        empty.parent_type = "BONE"
        empty.parent_bone = head_bone
        empty.matrix_parent_inverse.identity()
        fcurves = action_fcurves(empty, f"{empty.name} motion", created)
        for axis in range(3):
            add_curve(fcurves, "location", axis, np.asarray(frames, dtype=np.float32), local[:, f, axis])
        made.append(empty)
    return made
