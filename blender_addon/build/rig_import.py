"""Import option *Humanoid Rig*: per person, keypoint tracks -> ``parse.rig_pipeline`` -> a keyed armature.

Called by ``build.scene`` for sequences (and single frames, as one-frame sequences). The rig sits beside the
keypoint armature, in the same collection, named ``<name> rig <id>``.
"""

from __future__ import annotations

import json

import numpy as np

from ..parse.axes import convert_normals, convert_points
from ..parse.bundle import Sequence
from ..parse.options import ImportOptions
from ..parse.rig_names import preset as naming_preset
from ..parse.rig_pipeline import RigSettings, SolvedRig, solve_person
from ..parse.skeleton import joints_3d
from .rig import bone_name, create_rig, face_empties, keyframe_rig, local_channels, rest_matrices
from .tracking import CreatedData

FACE_LENGTH = 0.01  # metres: face bones are short markers


def rig_settings(options: ImportOptions) -> RigSettings:
    naming = naming_preset(options.rig_naming)
    up = convert_normals(np.array([0.0, -1.0, 0.0]), options.up_axis)  # image up, in the Blender frame
    return RigSettings(
        smoothing=options.rig_smoothing,
        strength=options.rig_smoothing_strength,
        foot_lock=options.rig_foot_lock,
        up=tuple(float(v) for v in up),
        with_root=naming.with_root,
        with_heel=naming.with_heel,
        rest_bend=naming.rest_bend,
        unit=options.global_scale,
    )


def person_tracks(sequence: Sequence, person_id: int, options: ImportOptions):
    """(T, K, 3) Blender-frame joints, (T, K) confident samples and (T,) presence of one person."""
    frames = len(sequence.frames)
    num_k = len(sequence.frames[0].keypoint_names)
    tracks = np.zeros((frames, num_k, 3))
    valid = np.zeros((frames, num_k), dtype=bool)
    seen = np.zeros(frames, dtype=bool)
    for t, capture in enumerate(sequence.frames):
        person = next((p for p in capture.people if p.identity == person_id), None)
        if person is None:
            continue
        c = capture.camera
        joints, source = joints_3d(
            person.keypoints,
            person.keypoints_3d,
            None,
            (capture.width, capture.height),
            c.fx,
            c.fy,
            c.cx,
            c.cy,
            options.keypoint_depth,
        )
        tracks[t] = convert_points(joints, options.up_axis, options.global_scale)
        valid[t] = (source == 0) & (person.keypoints[:, 2] >= options.keypoint_threshold)
        seen[t] = True
    return tracks, valid, seen


def sequence_rigs(context, sequence: Sequence, frames: np.ndarray, options: ImportOptions, collection, created,
                  warnings: list[str]):  # fmt: skip
    """One keyed humanoid rig per person of the sequence; a person the rig cannot use is skipped with a warning."""
    ids = sorted({p.identity for c in sequence.frames for p in c.people})
    made = []
    names = sequence.frames[0].keypoint_names
    for person_id in ids:
        tracks, valid, seen = person_tracks(sequence, person_id, options)
        if not valid.any():
            warnings.append(f"{sequence.name} person {person_id}: no 3D keypoints (keypoints_3d), so no rig.")
            continue
        solved = solve_person(tracks, valid, names, sequence.fps, rig_settings(options), frames)
        objects = build_rig(context, f"{sequence.name} rig {person_id}", solved, frames, options, collection,
                            created, None if seen.all() else seen)  # fmt: skip
        objects[0]["sapiens2_person"] = int(person_id)
        made.extend(objects)
    return made


def build_rig(context, name: str, solved: SolvedRig, frames: np.ndarray, options: ImportOptions, collection,
              created: CreatedData, visible: np.ndarray | None = None):  # fmt: skip
    """Armature + keys for one solved person (and face bones or empties); returns the created objects."""
    preset = naming_preset(options.rig_naming)
    rest, motion = solved.rest, solved.motion
    names, parent = list(rest.names), rest.parent.copy()
    heads, tails, frames_rest = rest.heads, rest.tails, rest.frames
    rotations, positions = motion.rotations, motion.heads
    head = rest.index("head")
    face = [n for n in solved.measurements.head_layout if f"face:{n}" in rest.markers]
    kp_index = {n: i for i, n in enumerate(solved.keypoint_names)}
    face_points = solved.tracks[:, [kp_index[n] for n in face]] if face else np.zeros((len(frames), 0, 3))
    if options.rig_face == "BONES" and face:
        extra = [f"face:{n}" for n in face]
        marker = np.stack([rest.markers[n] for n in extra])
        up = frames_rest[head][:, 1] * FACE_LENGTH * options.global_scale
        names += extra
        parent = np.concatenate([parent, np.full(len(extra), head)])
        heads = np.vstack([heads, marker])
        tails = np.vstack([tails, marker + up])
        frames_rest = np.concatenate([frames_rest, np.repeat(frames_rest[head][None], len(extra), axis=0)])
        rotations = np.concatenate(
            [rotations, np.repeat(rotations[:, head : head + 1], len(extra), axis=1)], axis=1
        )
        positions = np.concatenate([positions, face_points], axis=1)
    full = type(rest)(
        names=names, parent=parent, heads=heads, tails=tails, frames=frames_rest, markers=rest.markers
    )
    obj = create_rig(context, name, full, preset, collection, created, options.global_scale)
    blender_names = [bone_name(preset, n) for n in names]
    blender_rest = rest_matrices(obj, blender_names)
    locations, quaternions = local_channels(rotations, positions, frames_rest, blender_rest, parent)
    keyed = (parent < 0) | np.array([n == "hips" or n.startswith("face:") for n in names])
    keyframe_rig(obj, blender_names, frames, locations, quaternions, keyed, created, visible)
    obj["sapiens2_rig_lengths"] = json.dumps(
        {k: round(float(v), 6) for k, v in solved.measurements.lengths.items()}
    )
    obj["sapiens2_rig_contacts"] = json.dumps(solved.contacts)
    obj["sapiens2_rig_face"] = options.rig_face if face else "NONE"
    made = [obj]
    if options.rig_face == "EMPTIES" and face:
        delta = rotations[:, head] @ frames_rest[head].T
        pose_rotation = delta @ blender_rest[head, :3, :3]
        made += face_empties(context, obj, blender_names[head], face, face_points, pose_rotation, positions[:, head],
                             frames, collection, created, options.global_scale)  # fmt: skip
    return made
