"""Rigify: the rig imported with Rigify naming is a metarig; Blender's bundled Rigify generates a control rig
from it, and the capture is retargeted onto that rig's FK controls.

In its own module (its own Blender process): a generated rig registers UI classes of its own, and bpy 4.x does
not exit while classes stay registered after the scene that made them is gone.
"""

from __future__ import annotations

import numpy as np
import pytest

FRAMES = range(1, 31)


def _import(bpy, bundles, naming):
    assert bpy.ops.import_scene.sapiens2_capture(
        filepath=str(bundles / "rigtruth.sequence.json"), import_armatures=False, import_rig=True,
        rig_naming=naming,
    ) == {"FINISHED"}  # fmt: skip
    return bpy.data.objects["rigtruth rig 0"]


@pytest.fixture
def rigify(bpy_empty, fast_exit):
    """Blender's bundled Rigify, enabled for the test and disabled after (bpy 4.x hangs at exit otherwise)."""
    import addon_utils

    if not any(m.__name__ == "rigify" for m in addon_utils.modules()):
        pytest.skip("this bpy build does not ship Rigify")
    import bpy

    def registered():
        seen, stack = set(), [bpy.types.bpy_struct]
        while stack:
            for sub in stack.pop().__subclasses__():
                if sub not in seen:
                    seen.add(sub)
                    stack.append(sub)
        return {c for c in seen if getattr(c, "is_registered", False)}

    before = registered()
    addon_utils.enable("rigify", default_set=True)
    yield
    addon_utils.disable("rigify", default_set=True)
    # A generated rig also registers the UI classes of its rig_ui.py script: unregister whatever is left.
    for cls in registered() - before:
        bpy.utils.unregister_class(cls)


def _unit(matrix) -> np.ndarray:
    """The rotation of a pose matrix: Rigify's stretchy bones carry a scale of 1 +- 1e-4 along y, which an
    arccos of raw columns would read as a fraction of a degree."""
    m = np.array(matrix.to_3x3(), dtype=np.float64)
    return m / np.linalg.norm(m, axis=0)


def _rotation(a, b) -> float:
    rel = np.asarray(a).T @ np.asarray(b)
    return float(np.degrees(np.arccos(np.clip((np.trace(rel) - 1) / 2, -1, 1))))


def test_rigify_generates_a_control_rig_that_follows_the_capture(addon, bpy_empty, bundles, rigify):
    """Every bone of the generated rig's skeleton (the ORG bones its controls drive: spine, shoulders, limbs,
    every finger segment including the thumb's first, toes, heels) turns as the capture's bone does, and every
    deform bone sits on the capture's bone (head and direction) on every frame. (The deform bones' *twist* is
    Rigify's own: it spreads an upper arm's or thigh's twist over its segments for skinning.)"""
    bpy = bpy_empty
    rig = _import(bpy, bundles, "RIGIFY")
    control = addon.build.rig_retarget.generate_rigify(bpy.context, rig)
    assert control.name.startswith("RIG-") and "rig_id" in control.data
    mapping = addon.build.rig_retarget.retarget(bpy.context, rig, control, frames=FRAMES)
    assert mapping["upper_arm_fk.L"] == "upper_arm.L" and mapping["torso"] == "spine"
    assert mapping["thumb.01.L"] == "thumb.01.L" and mapping["spine_fk.002"] == "spine.002"
    sources = [b.name for b in rig.data.bones]
    orgs = [n for n in sources if f"ORG-{n}" in control.pose.bones]
    deforms = [n for n in sources if f"DEF-{n}" in control.pose.bones]
    assert len(orgs) >= 50 and "thumb.01.R" in orgs and "thumb.01.L" in deforms
    rest = {n: _unit(rig.data.bones[n].matrix_local) for n in sources}
    org_rest = {n: _unit(control.data.bones[f"ORG-{n}"].matrix_local) for n in orgs}
    turns, heads, directions = {}, {}, {}
    for frame in FRAMES:
        bpy.context.scene.frame_set(frame)
        for n in orgs:  # the change since the rest pose (rolls of a few ORG bones are Rigify's own)
            want = _unit(rig.pose.bones[n].matrix) @ rest[n].T
            got = _unit(control.pose.bones[f"ORG-{n}"].matrix) @ org_rest[n].T
            turns.setdefault(n, []).append(_rotation(want, got))
        for n in deforms:
            a, b = control.pose.bones[f"DEF-{n}"], rig.pose.bones[n]
            gap = np.array(control.matrix_world @ a.head) - np.array(rig.matrix_world @ b.head)
            heads.setdefault(n, []).append(np.linalg.norm(gap))
            cos = _unit(a.matrix)[:, 1] @ _unit(b.matrix)[:, 1]
            directions.setdefault(n, []).append(np.degrees(np.arccos(np.clip(cos, -1, 1))))

    def worst(errors):
        name = max(errors, key=lambda n: max(errors[n]))
        return max(errors[name]), name

    print(f"Rigify ({len(orgs)} ORG, {len(deforms)} DEF bones): ORG turns max {worst(turns)[0]:.4f} deg "
          f"({worst(turns)[1]}), thumb.01 {max(turns['thumb.01.L'] + turns['thumb.01.R']):.4f} deg; DEF heads max "
          f"{1000 * worst(heads)[0]:.4f} mm ({worst(heads)[1]}), shoulders "
          f"{1000 * max(heads['upper_arm.L'] + heads['upper_arm.R']):.4f} mm; DEF directions max "
          f"{worst(directions)[0]:.4f} deg ({worst(directions)[1]})")  # fmt: skip
    assert worst(turns)[0] < 0.05  # degrees (measured 0.004)
    assert worst(heads)[0] < 1e-4  # metres (measured 0.008 mm)
    assert worst(directions)[0] < 0.05  # degrees (measured 0.004)


def test_generate_rigify_operator_builds_from_the_rest_pose_and_follows(addon, bpy_empty, bundles, rigify):
    """Issue 28: the panel's *Generate Rigify Rig* (``object.sapiens2_rigify``), pressed on the imported metarig in
    the middle of its animation: the control rig is generated from the metarig's rest pose and keyed to follow the
    capture -- every DEF bone's head within 1 cm of the metarig bone it deforms for, on every frame -- and the
    metarig keeps its animation. Refused (poll) on a rig of another naming."""
    bpy = bpy_empty
    other = _import(bpy, bundles, "MIXAMO")
    bpy.context.view_layer.objects.active = other
    assert not bpy.ops.object.sapiens2_rigify.poll()
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = _import(bpy, bundles, "RIGIFY")
    bpy.context.view_layer.objects.active = rig
    bpy.context.scene.frame_set(17)  # a posed frame: generating from it would build the rig in this pose
    posed = {b.name: np.array(b.matrix) for b in rig.pose.bones}
    assert bpy.ops.object.sapiens2_rigify() == {"FINISHED"}
    control = bpy.context.view_layer.objects.active
    assert control is not rig and "rig_id" in control.data
    bpy.context.scene.frame_set(17)
    for name, matrix in posed.items():  # the metarig keeps its animation
        np.testing.assert_allclose(np.array(rig.pose.bones[name].matrix), matrix, atol=1e-6)
    deforms = [b.name for b in rig.data.bones if f"DEF-{b.name}" in control.pose.bones]
    assert len(deforms) >= 40
    for n in deforms:  # built at the rest pose: rest heads coincide
        gap = (
            control.matrix_world @ control.data.bones[f"DEF-{n}"].head_local
            - rig.matrix_world @ rig.data.bones[n].head_local
        )
        assert gap.length < 1e-3, n
    worst, where = 0.0, ""
    for frame in FRAMES:
        bpy.context.scene.frame_set(frame)
        for n in deforms:
            a, b = control.pose.bones[f"DEF-{n}"], rig.pose.bones[n]
            gap = float(
                np.linalg.norm(np.array(control.matrix_world @ a.head) - np.array(rig.matrix_world @ b.head))
            )
            if gap > worst:
                worst, where = gap, f"{n} at frame {frame}"
    print(f"operator: {len(deforms)} DEF bones, heads max {1000 * worst:.4f} mm ({where})")
    assert worst < 0.01
