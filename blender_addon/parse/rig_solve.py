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
  centimetres at the knee); elbow and knee are hinges about the bone's local X, the normal of the bend plane,
  which is the upper bone's only view of its twist; a hand's twist about the forearm is moved into the
  forearm (pronation);
- fingers: each segment aimed at the next observed joint, no twist.

Every observation is also filtered over time *in joint space* -- as the parent bone sees it -- with
``rig_filters.smooth_track`` (a Whittaker smoother: exact for any motion quadratic in time, centred, no lag).
Joint angles change far more slowly than world orientations (the world frame of a hand adds up the hips,
spine, shoulder and elbow), so this averages several frames of noise without rounding real motion. It matters
most for twists read from short side references: measured on the tests' ground truth at 1.5 mm noise, a hand's
knuckle spread (6 cm) gives its twist 1.5 deg of noise per frame, and a 17 deg elbow bend puts the elbow 4 cm
from the shoulder-wrist line, so 1.5 mm at the elbow turns the bend plane -- the upper arm's twist -- by 2 deg.
The bend plane's frames are weighted by how bent the limb is (information ~ sin^2 of the bend), so a nearly
straight frame borrows its twist from its better-bent neighbours, and a limb straight for long keeps its
parent's twist. The first and last frames have neighbours on one side only, so they keep about twice the
noise of the others (the limit of any estimator that does not round motion).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rig_filters import smooth_track
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

# Stiffness of the joint-space filters (``smooth_track``; half-width ~ stiffness^(1/6) frames). Measured on the
# tests' ground truth (tests/test_rig_solver.py): directions settle best at 100 (~2 frames), twists and
# layouts at 300 (~2.6 frames); 10x stiffer rounds the truth's fastest turns by more than it removes noise.
AIM_STIFFNESS = 100.0  # aimed bones' directions, and the hips' axes (world: the root has no parent)
TWIST_STIFFNESS = 300.0  # spine twist and the limbs' bend-plane twist
FIT_STIFFNESS = 300.0  # head, hand and foot layouts
BEND_REFERENCE = np.sin(np.radians(30.0))  # a frame bent this much counts once in the bend-plane average
STRAIGHT_SIN = np.sin(np.radians(1.0))  # below about this bend a limb keeps its parent's twist


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

    def steady(self, parent: np.ndarray, vectors: np.ndarray, stiffness: float = AIM_STIFFNESS) -> np.ndarray:
        """World vectors (T, ..., 3) filtered over time as ``parent`` (T, 3, 3) sees them, i.e. in joint space,
        where they move slowly enough to average several frames without rounding real motion."""
        local = np.einsum("tji,t...j->t...i", parent, vectors)
        return np.einsum("tij,t...j->t...i", parent, smooth_track(local, stiffness=stiffness))

    def parent_delta(self, bone: str) -> np.ndarray:
        return self.delta(self.rest.parent[self.i(bone)])

    def aim(self, bone: str, target: np.ndarray) -> np.ndarray:
        """Swing the carried frame so the bone points at ``target`` (no twist); returns the new frame."""
        return self.aim_all([bone], [target])[0]

    def aim_all(self, bones: list[str], targets: list[np.ndarray]) -> list[np.ndarray]:
        """``aim`` for bones that do not depend on each other (one finger segment of every finger), filtered
        in one call."""
        heads = [self.place(bone) for bone in bones]
        parents = np.stack([self.parent_delta(bone) for bone in bones], axis=1)  # (T, n, 3, 3)
        seen = np.stack([normalize(t - h) for t, h in zip(targets, heads)], axis=1)
        local = smooth_track(np.einsum("tnji,tnj->tni", parents, seen), stiffness=AIM_STIFFNESS)
        directions = np.einsum("tnij,tnj->tni", parents, local)
        frames = []
        for k, bone in enumerate(bones):
            carried = self.carried(bone)
            frames.append(shortest_arc(carried[..., :, 1], directions[:, k]) @ carried)
            self.set(bone, frames[-1])
        return frames

    def fit(self, bone: str, local: np.ndarray, observed: np.ndarray, part_rest: np.ndarray) -> None:
        """Rigid fit of a measured layout; ``part_rest`` is the layout frame in the rest pose. The points'
        offsets from their centre only turn with the part, so they are filtered as the parent bone sees them
        (a wrist's flexion and pronation are slow; the hand's world orientation is not)."""
        b = self.i(bone)
        parent = self.delta(self.rest.parent[b])
        offsets = self.steady(parent, observed - observed.mean(axis=1, keepdims=True), FIT_STIFFNESS)
        self.set(bone, kabsch(local, offsets) @ part_rest.T @ self.rest.frames[b])

    # --- body parts ----------------------------------------------------------------------------------------
    def torso(self) -> None:
        if "root" in self.rest.names:
            self.heads[:, self.i("root")] = self.rest.heads[self.i("root")]
        hips = self.i("hips")
        neck = self.p("neck")
        self.heads[:, hips] = self.kp.pelvis(self.tracks)
        observed = hips_frame(self.p("left_hip"), self.p("right_hip"), neck)
        # The root has no parent: its axes are filtered in the world, hip line kept exact after filtering.
        x, y = np.moveaxis(smooth_track(observed[..., :, :2], stiffness=AIM_STIFFNESS), -1, 0)
        x = normalize(x)
        y = normalize(reject(y, x))
        self.set("hips", np.stack([x, y, np.cross(x, y)], axis=-1))
        self.place("spine")
        straight = self.aim("spine", neck)
        axis = straight[..., :, 1]
        shoulders = self.p("left_shoulder") - self.p("right_shoulder")
        twist = _steady_angle(signed_angle(straight[..., :, 0], shoulders, axis))
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
        length = self.m.lengths[upper.split(".")[0]]
        seen_up = normalize(bend - start)
        # The bend plane through the observed joints, not the filtered ones: near a straight limb a 1 mm shift
        # of the elbow turns the plane by degrees, so a filtered (slightly rounded) elbow would bias the twist.
        plane = np.cross(seen_up, normalize(goal - (start + length * seen_up)))
        bent = np.linalg.norm(plane, axis=-1)
        up_dir = normalize(self.steady(self.parent_delta(upper), seen_up))
        carried = self.carried(upper)
        swung = shortest_arc(carried[..., :, 1], up_dir) @ carried  # aimed, keeping the parent's twist
        # The plane's normal as the swung bone sees it: (cos, sin) of the upper bone's own twist. Frames count
        # by their information (~ sin^2 of the bend); a weak pull towards no twist decides when none is bent.
        unit = normalize(plane)
        seen = np.stack([np.sum(unit * swung[..., :, 0], -1), -np.sum(unit * swung[..., :, 2], -1)], -1)
        weight = (bent / BEND_REFERENCE) ** 2
        prior = (STRAIGHT_SIN / BEND_REFERENCE) ** 2
        seen = (weight[:, None] * seen + prior * np.array([1.0, 0.0])) / (weight + prior)[:, None]
        track = smooth_track(seen, weight + prior, stiffness=TWIST_STIFFNESS)
        frame = swung @ rotation_y(np.arctan2(track[:, 1], track[:, 0]))
        self.set(upper, frame)
        self.place(lower)
        low_dir = normalize(goal - (start + length * up_dir))
        low_dir = normalize(self.steady(self.delta(self.i(upper)), low_dir))
        normal = normalize(reject(frame[..., :, 0], low_dir))
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
        for segment in (1, 2, 3):
            bones = [f"{finger}{segment}.{side}" for finger in FINGER_WORD]
            targets = [self.p(finger_joint(finger, segment + 1, side)) for finger in FINGER_WORD]
            self.aim_all(bones, targets)

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


def _steady_angle(angle: np.ndarray, stiffness: float = TWIST_STIFFNESS) -> np.ndarray:
    """An angle track filtered as its (cos, sin) vector: no unwrapping, and a turn through 180 deg is fine."""
    unit = smooth_track(np.stack([np.cos(angle), np.sin(angle)], axis=-1), stiffness=stiffness)
    return np.arctan2(unit[:, 1], unit[:, 0])


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
