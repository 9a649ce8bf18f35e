"""One armature per person: a bone per keypoint (head at the joint), hierarchy from ``parse.skeleton``."""

from __future__ import annotations

import bpy
import numpy as np

from ..parse.skeleton import Hierarchy
from .tracking import CreatedData


def bone_scores(hierarchy: Hierarchy, scores: np.ndarray) -> np.ndarray:
    """(..., B) confidence per bone from (..., K) keypoint scores; the synthetic pelvis takes the weaker hip."""
    out = np.take(scores, np.maximum(hierarchy.joint, 0), axis=-1).astype(np.float64)
    synthetic = np.nonzero(hierarchy.joint < 0)[0]
    if synthetic.size:
        left = hierarchy.joint[hierarchy.names.index("left_hip")]
        right = hierarchy.joint[hierarchy.names.index("right_hip")]
        out[..., synthetic] = np.minimum(scores[..., left], scores[..., right])[..., None]
    return out


def create_armature(
    context,
    name: str,
    hierarchy: Hierarchy,
    heads: np.ndarray,
    tails: np.ndarray,
    scores: np.ndarray,
    threshold: float,
    collection,
    created: CreatedData,
) -> bpy.types.Object:
    """Armature object in rest pose ``heads``/``tails`` (B, 3, Blender frame); bones below ``threshold`` hidden."""
    armature = created.add("armatures", bpy.data.armatures.new(name))
    armature.display_type = "STICK"
    obj = created.add("objects", bpy.data.objects.new(name, armature))
    collection.objects.link(obj)
    obj.show_in_front = True
    view_layer = context.view_layer
    if context.object is not None and context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    previous_active = view_layer.objects.active
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    try:
        groups = {c: armature.collections.new(c) for c in dict.fromkeys(hierarchy.collection)}
        edit_bones = []
        for b, bone_name in enumerate(hierarchy.names):
            bone = armature.edit_bones.new(bone_name)
            bone.head = heads[b].tolist()
            bone.tail = tails[b].tolist()
            bone.use_connect = False
            if hierarchy.parent[b] >= 0:
                bone.parent = edit_bones[hierarchy.parent[b]]
            groups[hierarchy.collection[b]].assign(bone)
            edit_bones.append(bone)
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
        view_layer.objects.active = previous_active
    for b, bone_name in enumerate(hierarchy.names):
        pose_bone = obj.pose.bones[bone_name]
        pose_bone.rotation_mode = "QUATERNION"
        pose_bone["confidence"] = float(scores[b])
        armature.bones[bone_name].hide = bool(scores[b] < threshold)
    obj["confidence_threshold"] = float(threshold)
    return obj


def rest_matrices(obj: bpy.types.Object, hierarchy: Hierarchy) -> np.ndarray:
    """(B, 4, 4) armature-space rest matrices, exactly as Blender computed them (roll included)."""
    bones = obj.data.bones
    return np.array([np.array(bones[n].matrix_local) for n in hierarchy.names], dtype=np.float64)
