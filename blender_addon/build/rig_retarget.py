"""Bake an imported humanoid rig's motion onto another armature: a Mixamo/UE character or a Rigify control rig.

Frame by frame, each mapped target bone is given the world orientation ``parse.rig_retarget`` asks for, parents
before children (``pose_bone.matrix`` solves the local channels through whatever the target's hierarchy and
constraints do), and keyed; the root bone also follows the captured pelvis, scaled to the character's size.
A Rigify control rig is switched to FK first.
"""

from __future__ import annotations

import numpy as np
from mathutils import Matrix

from ..parse.rig_retarget import RIGIFY_FK_SWITCHES, auto_mapping, rest_alignment, target_rotation


def _depth(bone) -> int:
    depth = 0
    while bone.parent is not None:
        bone, depth = bone.parent, depth + 1
    return depth


def _set_before(obj, names: list[str]) -> dict[str, int]:
    """For each of ``names`` (bones of ``obj``) a pass number such that every bone comes after all the named
    bones it depends on: through its parent chain *and* through constraints. Hierarchy depth is not enough:
    Rigify's ``ORG-hand`` sits shallow in the hierarchy but copies ``hand_fk``, which sits deep, so a finger
    control under ``ORG-hand`` set "parents first" by depth lands where last frame's hand left it (that was
    the thumb's ~24 deg on Rigify: every first finger segment was off by the hand's motion since the previous
    frame; the later segments, set relative to the first, hid it)."""
    direct: dict[str, set[str]] = {}
    for pose_bone in obj.pose.bones:
        deps = {pose_bone.parent.name} if pose_bone.parent is not None else set()
        for constraint in pose_bone.constraints:
            targets = list(getattr(constraint, "targets", ()))  # Armature constraint
            targets.append(constraint)
            for target in targets:
                if getattr(target, "target", None) == obj and getattr(target, "subtarget", ""):
                    deps.add(target.subtarget)
            if getattr(constraint, "pole_target", None) == obj and getattr(constraint, "pole_subtarget", ""):
                deps.add(constraint.pole_subtarget)
        direct[pose_bone.name] = {d for d in deps if d in obj.pose.bones}
    wanted = set(names)
    upstream: dict[str, frozenset[str]] = {}

    def named_above(name: str, visiting: set[str]) -> frozenset[str]:
        """The named bones that ``name`` depends on, transitively (cycles cut where they close)."""
        if name in upstream:
            return upstream[name]
        visiting.add(name)
        found: set[str] = set()
        for dep in direct.get(name, ()):
            if dep in visiting:
                continue
            if dep in wanted:
                found.add(dep)
            found |= named_above(dep, visiting)
        visiting.discard(name)
        upstream[name] = frozenset(found)
        return upstream[name]

    passes: dict[str, int] = {}

    def pass_of(name: str) -> int:
        if name not in passes:
            passes[name] = 1 + max((pass_of(d) for d in named_above(name, set())), default=-1)
        return passes[name]

    for name in names:
        pass_of(name)
    return passes


def _world_rest(obj, bone) -> np.ndarray:
    return np.array(obj.matrix_world @ bone.matrix_local, dtype=np.float64)


def generate_rigify(context, rig):
    """Generate Rigify's control rig from a rig imported with Rigify naming (Rigify must be enabled).

    Rigify places some helper bones from the metarig's current pose, so the rig's action is set aside and its
    pose cleared while it generates, then put back. Returns the generated armature."""
    import bpy

    anim = rig.animation_data
    action = anim.action if anim else None
    slot = getattr(anim, "action_slot", None) if anim else None
    saved = {b.name: b.matrix_basis.copy() for b in rig.pose.bones}
    before = set(bpy.data.objects)
    if anim is not None:
        anim.action = None
    for bone in rig.pose.bones:
        bone.matrix_basis.identity()
    view_layer = context.view_layer
    for obj in view_layer.objects:
        obj.select_set(obj == rig)
    view_layer.objects.active = rig
    view_layer.update()
    try:
        if bpy.ops.pose.rigify_generate() != {"FINISHED"}:
            raise RuntimeError("Rigify did not generate a rig")
    finally:
        if anim is not None:
            anim.action = action
            if slot is not None:
                anim.action_slot = slot
        for name, matrix in saved.items():
            rig.pose.bones[name].matrix_basis = matrix
    generated = [o for o in bpy.data.objects if o not in before and o.type == "ARMATURE"]
    control = generated[0] if generated else bpy.data.objects.get(rig.data.get("rigify_target_rig", ""))
    if control is None:
        control = next(o for o in bpy.data.objects if o.type == "ARMATURE" and "rig_id" in o.data)
    if control.animation_data is not None:  # the copy may carry the metarig's action: not for its ORG bones
        control.animation_data.action = None
    return control


def _height(obj) -> float:
    """Rest height of an armature (its highest bone end above its lowest), in world units."""
    z = [(obj.matrix_world @ p).z for b in obj.data.bones for p in (b.head_local, b.tail_local)]
    return max(z) - min(z)


def retarget(
    context, source, target, mapping: dict[str, str] | None = None, frames=None, scale: float | None = None
) -> dict[str, str]:
    """Key ``target`` to follow ``source`` (an imported rig) over ``frames`` (default: the source's keys).

    ``mapping`` is target bone -> source bone (default: matched by name through the naming presets). Both
    armatures should stand in a T-pose at rest, facing -Y; other rest poses are aligned bone by bone. The root's
    travel is scaled by ``scale`` (default: the ratio of the two armatures' rest heights)."""
    if mapping is None:
        canonical = list(source["sapiens2_rig_canonical"])
        mapping = auto_mapping(
            canonical, list(source["sapiens2_rig_bones"]), [b.name for b in target.data.bones]
        )
    if not mapping:
        raise ValueError(f"No bone of {target.name!r} matches the rig's bone names; pass a mapping.")
    scene = context.scene
    context.view_layer.update()  # matrix_world of an armature just moved by a script
    if frames is None:
        start, end = source.animation_data.action.frame_range
        frames = range(round(start), round(end) + 1)
    if "rig_id" in target.data:
        # A Rigify rig generated from the animated metarig inherits its action, now driving ORG bones: unassign
        # it (keep the animation data: Rigify's drivers live there).
        if target.animation_data is not None:
            target.animation_data.action = None
        for pose_bone in target.pose.bones:
            pose_bone.matrix_basis.identity()
    for switch in RIGIFY_FK_SWITCHES:
        bone = target.pose.bones.get(switch)
        if bone is not None and "IK_FK" in bone:
            bone["IK_FK"] = 1.0
    passes = _set_before(target, list(mapping))
    order = sorted(mapping, key=lambda n: passes[n])
    levels = sorted(set(passes.values()))
    root = min(order, key=lambda n: _depth(target.data.bones[n]))
    src_rest = {s: _world_rest(source, source.data.bones[s]) for s in mapping.values()}
    tgt_rest = {t: _world_rest(target, target.data.bones[t]) for t in order}
    # A Rigify control rig was generated from this very rig (same rest); its controls copy the change as it is.
    rigify = "rig_id" in target.data
    align = {
        t: np.eye(3) if rigify else rest_alignment(tgt_rest[t][:3, :3], src_rest[mapping[t]][:3, :3])
        for t in order
    }
    if (
        scale is None
    ):  # a generated Rigify rig has the capture's size (its widget bones would skew the height)
        scale = 1.0 if rigify else _height(target) / max(_height(source), 1e-9)
    # Rigify's root control (``torso``) does not sit on the pelvis but between it and the chest, and its
    # children bend the spine in their own way: after the rotations, the whole rig is moved so its pelvis
    # (the ORG copy of the capture's root bone) lands on the capture's pelvis. A pure shift: no rotation
    # changes, and the straight-down leg and spine chains then sit where the capture's are.
    pelvis = f"ORG-{mapping[root]}" if rigify and f"ORG-{mapping[root]}" in target.pose.bones else None
    pelvis_rest = _world_rest(target, target.data.bones[pelvis])[:3, 3] if pelvis else None
    to_target = np.array(target.matrix_world.inverted(), dtype=np.float64)
    for bone_name in order:
        target.pose.bones[bone_name].rotation_mode = "QUATERNION"
        if bone_name != root:
            target.pose.bones[bone_name].location = (0.0, 0.0, 0.0)
    for frame in frames:
        scene.frame_set(frame)
        for level in levels:
            for t in (n for n in order if passes[n] == level):
                s = mapping[t]
                src = np.array(source.matrix_world @ source.pose.bones[s].matrix, dtype=np.float64)
                pose_bone = target.pose.bones[t]
                world = np.eye(4)
                world[:3, :3] = target_rotation(
                    src[:3, :3], src_rest[s][:3, :3], tgt_rest[t][:3, :3], align[t]
                )
                local = to_target @ world
                if t == root:
                    travel = scale * (src[:3, 3] - src_rest[s][:3, 3])
                    local[:3, 3] = to_target[:3, :3] @ (tgt_rest[t][:3, 3] + travel) + to_target[:3, 3]
                else:  # rotation only: the head stays where the parent chain puts it
                    local[:3, 3] = np.array(pose_bone.head)
                pose_bone.matrix = Matrix(local.tolist())
            context.view_layer.update()
        if pelvis is not None:
            src = np.array(source.matrix_world @ source.pose.bones[mapping[root]].matrix, dtype=np.float64)
            want = pelvis_rest + scale * (src[:3, 3] - src_rest[mapping[root]][:3, 3])
            got = np.array(target.matrix_world @ target.pose.bones[pelvis].head, dtype=np.float64)
            moved = np.array(target.pose.bones[root].matrix, dtype=np.float64)
            moved[:3, 3] += to_target[:3, :3] @ (want - got)
            target.pose.bones[root].matrix = Matrix(moved.tolist())
            context.view_layer.update()
        for t in order:
            pose_bone = target.pose.bones[t]
            pose_bone.keyframe_insert("rotation_quaternion", frame=frame)
            if t == root:
                pose_bone.keyframe_insert("location", frame=frame)
    return mapping
