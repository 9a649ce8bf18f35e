"""The humanoid rig: canonical bones, the body measurements that size them, and the rest pose (T-pose).

Canonical names are ours (``upper_arm.L``…); ``rig_names`` maps them to Mixamo, Rigify and UE names. The rest
pose is a T-pose in Blender's frame (Z up, the person facing -Y, feet on z = 0), built only from the
measurements, so a rig sized from one capture and a rig sized from known numbers share one definition.

Bone axes (rolls) follow one rule per chain, chosen so the hinge of every elbow, knee and finger is the bone's
local X (as Rigify's limb rigs expect): torso and head y up, z forward; arms y outward, z forward; legs y down,
x = +X; fingers x = flexion axis. Right-side frames are the mirror of the left (``rig_math.mirror_frame``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .rig_math import frame_from_yx, mirror_frame, normalize

SIDES = ("L", "R")
FINGERS = ("thumb", "index", "middle", "ring", "pinky")
TORSO = ("hips", "spine", "spine1", "spine2", "neck", "head")
ARM = ("clavicle", "upper_arm", "forearm", "hand")
LEG = ("thigh", "shin", "foot", "toe")
SPINE_SPLIT = (0.3, 0.3, 0.4)  # share of the hips-tail -> neck distance per spine bone
PELVIS_SHARE = 0.1  # hips bone length as a share of the pelvis -> neck distance
BALL_SHARE = 0.7  # the ball of the foot lies this far from the heel towards the toes
THUMB_REST = np.array([1.0, -1.0, 0.0]) / np.sqrt(2.0)  # left thumb in the T-pose: outward and forward


def finger_bone(finger: str, segment: int, side: str) -> str:
    return f"{finger}{segment}.{side}"


def _bone_table(with_root: bool, with_heel: bool) -> list[tuple[str, str | None]]:
    bones: list[tuple[str, str | None]] = [("root", None)] if with_root else []
    bones += [("hips", "root" if with_root else None)]
    bones += [
        ("spine", "hips"),
        ("spine1", "spine"),
        ("spine2", "spine1"),
        ("neck", "spine2"),
        ("head", "neck"),
    ]
    for s in SIDES:
        bones += [(f"clavicle.{s}", "spine2"), (f"upper_arm.{s}", f"clavicle.{s}")]
        bones += [(f"forearm.{s}", f"upper_arm.{s}"), (f"hand.{s}", f"forearm.{s}")]
        for finger in FINGERS:
            parent = f"hand.{s}"
            for segment in (1, 2, 3):
                bones.append((finger_bone(finger, segment, s), parent))
                parent = finger_bone(finger, segment, s)
    for s in SIDES:
        bones += [(f"thigh.{s}", "hips"), (f"shin.{s}", f"thigh.{s}")]
        bones += [(f"foot.{s}", f"shin.{s}"), (f"toe.{s}", f"foot.{s}")]
        if with_heel:
            bones.append((f"heel.{s}", f"foot.{s}"))
    return bones


@dataclass
class Measurements:
    """Body dimensions in metres (x the import scale), one set per person, left/right already symmetric.

    Layouts are point positions in a body part's own frame (see ``rig_frames``), for the left side; the right
    side is their mirror. ``head_layout`` maps keypoint names to head-frame positions (origin: mid-ears)."""

    lengths: dict[str, float]  # bone name without side ("upper_arm", "index2", "spine1", ...) -> length
    hip_width: float
    hand_layout: np.ndarray  # (6, 3): wrist, then the thumb/index/middle/ring/pinky bases (hand frame)
    foot_layout: np.ndarray  # (3, 3): heel, big toe, small toe (sole frame, origin at the ankle)
    head_layout: dict[str, np.ndarray] = field(default_factory=dict)

    def side_layout(self, layout: np.ndarray, side: str) -> np.ndarray:
        """A left-side layout as seen in the right side's own (mirrored) frame: x negated."""
        return layout * np.array([-1.0, 1.0, 1.0]) if side == "R" else layout.copy()


@dataclass
class RestPose:
    """Rest (T-pose) of the rig: per bone head, tail and frame (columns x, y, z) in armature space."""

    names: list[str]
    parent: np.ndarray  # (B,) int, -1 for roots, parents first
    heads: np.ndarray  # (B, 3)
    tails: np.ndarray  # (B, 3)
    frames: np.ndarray  # (B, 3, 3)
    markers: dict[str, np.ndarray]  # rest positions of solver reference points (knuckles, toes, face...)

    def index(self, name: str) -> int:
        return self.names.index(name)


def _left_frames() -> dict[str, np.ndarray]:
    """Rest frames of the centre and left-side bones (columns x, y, z)."""
    torso = np.stack([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]], axis=-1)  # x = +X, y = +Z, z = -Y
    arm = np.stack([[0, 0, -1.0], [1.0, 0, 0], [0, -1.0, 0]], axis=-1)  # x = -Z, y = +X, z = -Y
    leg = np.stack([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]], axis=-1)  # x = +X, y = -Z, z = +Y
    finger = np.stack([[0, 1.0, 0], [1.0, 0, 0], [0, 0, -1.0]], axis=-1)  # x = +Y (flexion), y = +X
    frames = {name: torso for name in TORSO}
    frames.update({f"{b}.L": arm for b in ARM})
    frames.update({f"{b}.L": leg for b in ("thigh", "shin")})
    for finger_name in FINGERS:
        frame = frame_from_yx(THUMB_REST, np.array([0, 0, -1.0])) if finger_name == "thumb" else finger
        frames.update({finger_bone(finger_name, s, "L"): frame for s in (1, 2, 3)})
    frames["root"] = torso
    return frames


SOLE_REST = np.stack([[1.0, 0, 0], [0, -1.0, 0], [0, 0, -1.0]], axis=-1)  # x = +X, y = forward, z = down
HAND_REST = np.stack([[0, 0, -1.0], [1.0, 0, 0], [0, -1.0, 0]], axis=-1)  # left hand: palm down, z forward
HEAD_REST = np.stack([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]], axis=-1)  # x left, y up, z forward (-Y)


def side_frame(frame: np.ndarray, side: str) -> np.ndarray:
    return mirror_frame(frame) if side == "R" else frame


def foot_points(m: Measurements) -> dict[str, np.ndarray]:
    """Sole-frame positions (left side) of the heel, toes (mid big/small toe) and ball of the foot."""
    heel, big, small = m.foot_layout
    toes = 0.5 * (big + small)
    return {
        "heel": heel,
        "big_toe": big,
        "small_toe": small,
        "toes": toes,
        "ball": heel + BALL_SHARE * (toes - heel),
    }


def ankle_height(m: Measurements) -> float:
    """Height of the ankle above the lowest foot point when the sole is flat (sole z points down)."""
    return float(max(0.0, m.foot_layout[:, 2].max()))


def _bent(straight: np.ndarray, hinge: np.ndarray, angle: float) -> np.ndarray:
    """``straight`` turned by ``angle`` (radians) about the unit ``hinge`` axis (Rodrigues, one vector)."""
    return (
        straight * np.cos(angle)
        + np.cross(hinge, straight) * np.sin(angle)
        + hinge * (hinge @ straight) * (1 - np.cos(angle))
    )


def rest_pose(
    m: Measurements, *, with_root: bool = False, with_heel: bool = False, bend: float = 0.0
) -> RestPose:
    """The T-pose for these measurements: feet flat on z = 0, pelvis above the origin, facing -Y.

    ``bend`` (degrees) flexes elbows and knees that much about their hinges (Rigify needs a bent limb in its
    metarig to know which way an IK chain bends); 0 gives straight limbs, as Mixamo and the UE mannequin use."""
    L = m.lengths
    table = _bone_table(with_root, with_heel)
    names = [n for n, _ in table]
    parent = np.array([names.index(p) if p is not None else -1 for _, p in table], dtype=np.int64)
    frames_l = _left_frames()
    heads: dict[str, np.ndarray] = {}
    tails: dict[str, np.ndarray] = {}
    frames: dict[str, np.ndarray] = {}
    markers: dict[str, np.ndarray] = {}
    up, out = np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])

    half = np.radians(bend) / 2.0
    leg_height = (L["thigh"] + L["shin"]) * np.cos(half) + ankle_height(m)
    pelvis = np.array([0.0, 0.0, leg_height])
    markers["pelvis"] = pelvis
    if with_root:
        heads["root"], tails["root"] = np.zeros(3), np.array([0.0, 0.0, 0.5 * L["thigh"]])
        frames["root"] = frames_l["root"]
    z = pelvis.copy()
    for bone in ("hips", "spine", "spine1", "spine2", "neck", "head"):
        heads[bone], tails[bone] = z.copy(), z + L[bone] * up
        frames[bone] = frames_l[bone]
        z = tails[bone]
    neck_base, head_base = heads["neck"], heads["head"]
    markers["neck"], markers["head"] = neck_base, head_base
    for name, offset in m.head_layout.items():
        markers[f"face:{name}"] = head_base + HEAD_REST @ offset

    for side, sign in (("L", 1.0), ("R", -1.0)):
        mirror = np.array([sign, 1.0, 1.0])

        def place(bone, head, direction, length, frame_l, side=side):
            name = f"{bone}.{side}" if "." not in bone else bone
            heads[name] = head
            tails[name] = head + length * direction
            frames[name] = side_frame(frame_l, side)
            return tails[name]

        # Arm along +-X from the neck base.
        x = sign * out
        shoulder = place("clavicle", neck_base, x, L["clavicle"], frames_l["clavicle.L"])
        arm_hinge = side_frame(frames_l["upper_arm.L"], side)[:, 0]
        elbow = place(
            "upper_arm", shoulder, _bent(x, arm_hinge, -half), L["upper_arm"], frames_l["upper_arm.L"]
        )
        wrist = place("forearm", elbow, _bent(x, arm_hinge, half), L["forearm"], frames_l["forearm.L"])
        hand_frame = side_frame(HAND_REST, side)
        layout = m.side_layout(m.hand_layout, side)
        bases = wrist + (layout - layout[0]) @ hand_frame.T
        place("hand", wrist, x, float(np.linalg.norm(bases[2] - wrist)), frames_l["hand.L"])
        for k, finger in enumerate(FINGERS):
            markers[f"{finger}_base.{side}"] = bases[k + 1]
            direction = (THUMB_REST if finger == "thumb" else out) * mirror
            joint = bases[k + 1]
            for segment in (1, 2, 3):
                name = finger_bone(finger, segment, side)
                frame_l = frames_l[finger_bone(finger, segment, "L")]
                joint = place(name, joint, direction, L[f"{finger}{segment}"], frame_l)

        # Leg straight down from the hip, foot flat.
        hip = pelvis + sign * 0.5 * m.hip_width * out
        leg_hinge = side_frame(frames_l["thigh.L"], side)[:, 0]
        knee = place("thigh", hip, _bent(-up, leg_hinge, -half), L["thigh"], frames_l["thigh.L"])
        ankle = place("shin", knee, _bent(-up, leg_hinge, half), L["shin"], frames_l["shin.L"])
        sole = side_frame(SOLE_REST, side)
        points = {k: ankle + sole @ (v * mirror) for k, v in foot_points(m).items()}
        markers.update({f"{k}.{side}": v for k, v in points.items()})
        heads[f"foot.{side}"], tails[f"foot.{side}"] = ankle, points["ball"]
        frames[f"foot.{side}"] = frame_from_yx(points["ball"] - ankle, out)
        heads[f"toe.{side}"], tails[f"toe.{side}"] = points["ball"], points["toes"]
        frames[f"toe.{side}"] = frame_from_yx(points["toes"] - points["ball"], out)
        if with_heel:
            across = 0.25 * m.hip_width * x
            heads[f"heel.{side}"], tails[f"heel.{side}"] = points["heel"] - across, points["heel"] + across
            frames[f"heel.{side}"] = side_frame(frame_from_yx(out, up), side)
        markers[f"hip.{side}"] = hip
    return RestPose(
        names=names,
        parent=parent,
        heads=np.stack([heads[n] for n in names]),
        tails=np.stack([tails[n] for n in names]),
        frames=np.stack([_orthonormal(frames[n], tails[n] - heads[n]) for n in names]),
        markers=markers,
    )


def _orthonormal(frame: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The frame re-squared onto the bone's actual direction (its x kept as close as possible)."""
    return frame_from_yx(normalize(direction), frame[:, 0])
