"""Retargeting the imported rig onto a Mixamo-named character of other proportions and other bone rolls."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

FRAMES = range(1, 31)
TRUTH_FILE = Path(__file__).resolve().parents[1] / "rig_truth.py"


def _import(bpy, bundles, naming):
    assert bpy.ops.import_scene.sapiens2_capture(
        filepath=str(bundles / "rigtruth.sequence.json"), import_armatures=False, import_rig=True,
        rig_naming=naming,
    ) == {"FINISHED"}  # fmt: skip
    return bpy.data.objects["rigtruth rig 0"]


def _angle(a, b):
    rel = np.swapaxes(a, -1, -2) @ b
    return np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))


def test_mixamo_character_with_other_proportions_and_rolls_follows(addon, bpy_empty, bundles, read_json):
    bpy = bpy_empty
    rig = _import(bpy, bundles, "MIXAMO")
    spec = importlib.util.spec_from_file_location("rig_truth_retarget", TRUTH_FILE)
    rt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rt)
    names = read_json(bundles / "rigtruth_0001.json")["keypoint_names"]
    parse = {m: getattr(addon.parse, m) for m in ("rig_keypoints", "rig_skeleton", "rig_measure")} | {
        "names": names
    }
    m = rt.truth_measurements(parse)
    m.lengths = {k: 0.85 * v * (1.1 if k in ("thigh", "shin") else 1.0) for k, v in m.lengths.items()}
    rest = addon.parse.rig_skeleton.rest_pose(m)
    collection = bpy.data.collections.new("character")
    bpy.context.scene.collection.children.link(collection)
    preset = addon.parse.rig_names.preset("MIXAMO")
    character = addon.build.rig.create_rig(
        bpy.context, "character", rest, preset, collection, addon.build.tracking.CreatedData()
    )
    bpy.context.view_layer.objects.active = character
    bpy.ops.object.mode_set(mode="EDIT")
    for bone in character.data.edit_bones:  # rolls unlike ours, as an FBX character's would be
        bone.roll += 1.3
    bpy.ops.object.mode_set(mode="OBJECT")
    del character["sapiens2_rig"]
    mapping = addon.build.rig_retarget.retarget(bpy.context, rig, character, frames=FRAMES)
    assert len(mapping) == len(rest.names)
    worst = 0.0
    for frame in FRAMES:
        bpy.context.scene.frame_set(frame)
        for target, source in mapping.items():
            t_rest = np.array(character.data.bones[target].matrix_local.to_3x3())
            s_rest = np.array(rig.data.bones[source].matrix_local.to_3x3())
            t_delta = np.array(character.pose.bones[target].matrix.to_3x3()) @ t_rest.T
            s_delta = np.array(rig.pose.bones[source].matrix.to_3x3()) @ s_rest.T
            worst = max(worst, float(_angle(t_delta, s_delta)))
    print(f"Mixamo-named character: worst bone rotation difference {worst:.4f} deg")
    assert worst < 0.5  # float32 pose matrices
    # The pelvis travels in proportion to the character's size.
    bpy.context.scene.frame_set(1)
    a = np.array(character.pose.bones["mixamorig:Hips"].head)
    bpy.context.scene.frame_set(30)
    b = np.array(character.pose.bones["mixamorig:Hips"].head)
    bpy.context.scene.frame_set(1)
    c = np.array(rig.pose.bones["mixamorig:Hips"].head)
    bpy.context.scene.frame_set(30)
    d = np.array(rig.pose.bones["mixamorig:Hips"].head)
    ratio = np.linalg.norm(b - a) / np.linalg.norm(d - c)
    assert 0.8 < ratio < 1.0
