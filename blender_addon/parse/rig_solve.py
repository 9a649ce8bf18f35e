"""Keypoint tracks -> bone rotations of the fixed-length humanoid rig (numpy, vectorised over frames).

Bones keep their measured lengths; only rotations (and the pelvis position) change. What decides each
rotation, and the conventions for what keypoints cannot see:

- hips: the hip line (exact) and the direction to the neck; the root moves with the mid-hip point;
- spine: one straight chain aimed from the hips' tail at the neck; its twist, read from the shoulder line, is
  shared equally by the three spine bones;
- clavicles and neck: aimed at the shoulder and at mid-ears, no twist of their own (nothing observes it);
- head, hands, feet: a least-squares rigid fit of the measured layout (face points, knuckles, heel and toes)
  to the observed points;
- arms and legs: the upper bone aimed at the observed elbow/knee, the lower one at the wrist/ankle from where
  the upper ends (not two-bone IK: near a straight limb IK turns millimetres of noise in the reach into
  centimetres at the knee); elbow and knee are hinges about the bone's local X, the normal of the bend plane;
  a nearly straight limb takes its bend plane from its parent instead of from noise; a hand's twist about the
  forearm is moved into the forearm (pronation);
- fingers: each segment aimed at the next observed joint, no twist.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rig_frames import hips_frame
from .rig_keypoints import FINGER_WORD, KeypointIndex, body_names, finger_joint
from .rig_math import (
    axis_angle,
    kabsch,
    normalize,
    reject,
    rotation_y,
    shortest_arc,
    signed_angle,
    twist_about_y,
)
from .rig_skeleton import HAND_REST, HEAD_REST, SIDES, SOLE_REST, Measurements, RestPose, side_frame

STRAIGHT_SIN = (np.sin(np.radians(2.0)), np.sin(np.radians(10.0)))  # limb bend: below -> parent's plane
PLANE_SIGMA = 1.0  # frames: temporal averaging of a limb's bend plane


@dataclass
class Motion:
    """World (armature-space) bone frames (T, B, 3, 3) and heads (T, B, 3), in ``rest.names`` order."""

    rotations: np.ndarray
    heads: np.ndarray

    def deltas(self, rest_frames: np.ndarray) -> np.ndarray:
        """(T, B, 3, 3) rotations taking each bone from its rest frame to its pose (retargeting's currency)."""
        return self.rotations @ np.swapaxes(rest_frames, -1, -2)[None]


class _Solver:
    def __init__(self, tracks: np.ndarray, kp: KeypointIndex, m: Measurements, rest: RestPose):
        self.tracks, self.kp, self.m, self.rest = tracks, kp, m, rest
        frames = tracks.shape[0]
        self.rot = np.tile(rest.frames[None], (frames, 1, 1, 1))
        self.heads = np.tile(rest.heads[None], (frames, 1, 1))

    # --- helpers -------------------------------------------------------------------------------------------
    def p(self, name: str) -> np.ndarray:
        return self.kp(self.tracks, name)

    def i(self, bone: str) -> int:
        return self.rest.index(bone)

    def delta(self, b: int) -> np.ndarray:
        return self.rot[:, b] @ self.rest.frames[b].T

    def carried(self, bone: str) -> np.ndarray:
        """The bone's frame if it kept its rest orientation relative to its (already solved) parent."""
        b = self.i(bone)
        return self.delta(self.rest.parent[b]) @ self.rest.frames[b]

    def place(self, bone: str) -> np.ndarray:
        """Forward kinematics: the head where the solved parent carries it."""
        b = self.i(bone)
        p = self.rest.parent[b]
        offset = self.rest.heads[b] - self.rest.heads[p]
        self.heads[:, b] = self.heads[:, p] + np.einsum("tij,j->ti", self.delta(p), offset)
        return self.heads[:, b]

    def set(self, bone: str, rotation: np.ndarray) -> None:
        self.rot[:, self.i(bone)] = rotation

    def aim(self, bone: str, target: np.ndarray) -> np.ndarray:
        """Swing the carried frame so the bone points at ``target`` (no twist); returns the new frame."""
        head = self.place(bone)
        carried = self.carried(bone)
        frame = shortest_arc(carried[..., :, 1], target - head) @ carried
        self.set(bone, frame)
        return frame

    def fit(self, bone: str, local: np.ndarray, observed: np.ndarray, part_rest: np.ndarray) -> None:
        """Rigid fit of a measured layout; ``part_rest`` is the layout frame in the rest pose."""
        b = self.i(bone)
        # The points' offsets from their centre only turn with the part: averaging them over a few frames
        # (centred, like the bend planes) steadies the fit without moving any joint.
        offsets = _smooth_in_time(observed - observed.mean(axis=1, keepdims=True))
        self.set(bone, kabsch(local, offsets) @ part_rest.T @ self.rest.frames[b])

    # --- body parts ----------------------------------------------------------------------------------------
    def torso(self) -> None:
        if "root" in self.rest.names:
            self.heads[:, self.i("root")] = self.rest.heads[self.i("root")]
        hips = self.i("hips")
        neck = self.p("neck")
        self.heads[:, hips] = self.kp.pelvis(self.tracks)
        observed = hips_frame(self.p("left_hip"), self.p("right_hip"), neck)
        self.set("hips", observed @ self.rest.frames[hips].T @ self.rest.frames[hips])
        base = self.place("spine")
        straight = self.aim("spine", neck)
        axis = normalize(neck - base)
        twist = signed_angle(straight[..., :, 0], self.p("left_shoulder") - self.p("right_shoulder"), axis)
        for k, bone in enumerate(("spine", "spine1", "spine2"), start=1):
            self.place(bone)
            self.set(bone, axis_angle(axis, twist * k / 3.0) @ straight)
        self.aim("neck", self.kp.head_centre(self.tracks))
        self.place("head")
        layout = self.m.head_layout
        names = [n for n in self.kp.head_fit_names() if n in layout]
        local = np.stack([layout[n] for n in names])
        observed = np.stack([self.p(n) for n in names], axis=1)
        self.fit("head", local, observed, HEAD_REST)

    def limb(self, upper: str, lower: str, pole: str, target: str) -> np.ndarray:
        """Upper bone aimed at the observed elbow/knee, lower at the wrist/ankle from where the upper ends;
        both hinge about the normal of the bend plane. Returns the lower bone's hinge-only frame."""
        start = self.place(upper)
        bend, goal = self.p(pole), self.p(target)
        up_dir = normalize(bend - start)
        elbow = start + self.m.lengths[upper.split(".")[0]] * up_dir
        low_dir = normalize(goal - elbow)
        observed = np.cross(up_dir, low_dir)
        sine = np.linalg.norm(observed, axis=-1)
        weight = np.clip((sine - STRAIGHT_SIN[0]) / (STRAIGHT_SIN[1] - STRAIGHT_SIN[0]), 0.0, 1.0)[:, None]
        fallback = normalize(reject(self.carried(upper)[..., :, 0], up_dir))
        normal = weight * normalize(observed) + (1 - weight) * fallback
        # The bend plane is the only view of the upper bone's twist; near a straight limb millimetres of noise
        # swing it, so it is averaged over a few frames (centred: no lag), weighted by how bent the limb is.
        normal = normalize(reject(_smooth_in_time(normal * (sine[:, None] + 1e-3)), up_dir))
        self.set(upper, np.stack([normal, up_dir, np.cross(normal, up_dir)], axis=-1))
        self.place(lower)
        normal = normalize(reject(normal, low_dir))
        hinge = np.stack([normal, low_dir, np.cross(normal, low_dir)], axis=-1)
        self.set(lower, hinge)
        return hinge

    def arm(self, side: str) -> None:
        n = body_names(side)
        self.aim(f"clavicle.{side}", self.p(n["shoulder"]))
        hinge = self.limb(f"upper_arm.{side}", f"forearm.{side}", n["elbow"], n["wrist"])
        self.place(f"hand.{side}")
        names = [n["wrist"]] + [finger_joint(f, 1, side) for f in FINGER_WORD]
        local = self.m.side_layout(self.m.hand_layout, side)
        observed = np.stack([self.p(x) for x in names], axis=1)
        self.fit(f"hand.{side}", local, observed, side_frame(HAND_REST, side))
        # Pronation: the hand's twist about the forearm axis belongs to the forearm.
        hand = self.i(f"hand.{side}")
        carried = hinge @ self.rest.frames[self.i(f"forearm.{side}")].T @ self.rest.frames[hand]
        twist = twist_about_y(np.swapaxes(carried, -1, -2) @ self.rot[:, hand])
        self.set(f"forearm.{side}", hinge @ rotation_y(twist))
        for finger in FINGER_WORD:
            for segment in (1, 2, 3):
                self.aim(f"{finger}{segment}.{side}", self.p(finger_joint(finger, segment + 1, side)))

    def leg(self, side: str) -> None:
        n = body_names(side)
        self.limb(f"thigh.{side}", f"shin.{side}", n["knee"], n["ankle"])
        self.place(f"foot.{side}")
        local = np.vstack([np.zeros((1, 3)), self.m.side_layout(self.m.foot_layout, side)])
        observed = np.stack([self.p(n[r]) for r in ("ankle", "heel", "big_toe", "small_toe")], axis=1)
        self.fit(f"foot.{side}", local, observed, side_frame(SOLE_REST, side))
        for child in (f"toe.{side}", f"heel.{side}"):
            if child in self.rest.names:
                self.place(child)
                self.set(child, self.carried(child))


def _smooth_in_time(v: np.ndarray, sigma: float = PLANE_SIGMA) -> np.ndarray:
    """Centred Gaussian average over frames (axis 0). Near the ends the window shrinks symmetrically, so a
    steadily turning vector is not pulled back at the first and last frames."""
    frames = v.shape[0]
    radius = int(3 * sigma)
    if frames < 3 or radius < 1:
        return v
    t = np.arange(frames)
    reach = np.minimum(np.minimum(t, frames - 1 - t), radius)
    out = np.zeros_like(v)
    total = np.zeros((frames,) + (1,) * (v.ndim - 1))
    for k in range(-radius, radius + 1):
        use = np.abs(k) <= reach
        w = np.exp(-0.5 * (k / sigma) ** 2) * use
        out[use] += w[use].reshape(-1, *([1] * (v.ndim - 1))) * v[t[use] + k]
        total[use] += w[use].reshape(-1, *([1] * (v.ndim - 1)))
    return out / total


def solve(tracks: np.ndarray, kp: KeypointIndex, m: Measurements, rest: RestPose) -> Motion:
    """Bone frames and heads for every frame of (T, K, 3) tracks (Blender frame, cleaned, gap-free)."""
    solver = _Solver(np.asarray(tracks, dtype=np.float64), kp, m, rest)
    solver.torso()
    for side in SIDES:
        solver.arm(side)
        solver.leg(side)
    return Motion(rotations=solver.rot, heads=solver.heads)


def joint_positions(motion: Motion, rest: RestPose) -> dict[str, np.ndarray]:
    """(T, 3) positions of the rig's joints that correspond to keypoints (heads and tails of bones)."""
    out = {}
    tails = motion.heads + np.einsum("tbij,bj->tbi", motion.deltas(rest.frames), rest.tails - rest.heads)
    for b, name in enumerate(rest.names):
        out[f"{name}:head"] = motion.heads[:, b]
        out[f"{name}:tail"] = tails[:, b]
    return out
