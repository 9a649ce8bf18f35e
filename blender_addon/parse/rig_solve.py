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

Nothing is filtered unless the user asks for clean-up: given keypoints consistent with a rig, the solve gives
that rig back exactly. The one thing that cannot be read per frame is a straight limb's twist (its bend plane is
undefined): frames bent less than ``WEAK_BEND`` take the upper bone's twist from the better-bent frames around
them (``rig_filters.fill_weak``), and a limb straight for the whole clip keeps its parent's twist.

Clean-up (``rig_filters.CleanUp``) is speed-adaptive and runs *in joint space* -- on each quantity as the parent
bone sees it (a bone's direction or rotation, a twist), and on the pelvis (the root's heading and tilt apart) --
where motion is slower than in the world (a hand's world frame adds up the hips, spine, shoulder and elbow). A
still joint loses its jitter; a fast one keeps its motion (the cut-off opens with the local speed). Bend-plane
twists are weighted by how bent the limb is (information ~ sin^2 of the bend), so nearly straight frames lean on
their neighbours. The head alone is cleaned up by curvature (``rig_smooth``): it turns smoothly but fast. A
thigh's twist, read from the bend plane and the foot with the variances the clip tells, is smoothed as a
maximum-likelihood spline against a calm copy of the hips (``limb``); an upper arm's, read from the bend plane alone,
by the same spline against the cleaned-up clavicle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rig_filters import MIN_CUTOFF, CleanUp, adaptive_smooth, fill_weak
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
from .rig_smooth import curvature_smooth, spline_smooth

# Clean-up: a frame bent less than this leans on its neighbours for the upper bone's twist (information ~ sin^2 of
# the bend). 24 deg, not 12: on the walking truth at 3 mm noise upper arms 15.5-16.9 -> 10.6-13.3 deg, legs
# 9.6-12.6 -> 4.9-6.5 deg (seeds 5-7); a walking elbow is bent 15-45 deg, so its plane is seen only so well.
BEND_REFERENCE = np.sin(np.radians(24.0))
WEAK_BEND = np.sin(np.radians(2.0))  # below this bend a frame's twist comes from its neighbours
# The neck is aimed from two points 10 cm apart: under 3 mm noise its direction jitters 2 deg a frame, which alone
# keeps the speed-adaptive cut-off open. A speed below 4x what the neck's own noise reads counts as still
# (rig_filters.noise_speed): on the walking truth at 3 mm the neck goes from 4.8 / 6.9 / 7.0 to 2.1 / 2.6 / 2.5
# deg (seeds 5-7). Noise-free the floor is nil. The price: at 3 mm a neck nod under ~2.5 rad/s is smoothed at
# the 1 Hz floor; other bones keep none (on limbs, legs, hips and clavicles it made the worst frame worse).
NECK_NOISE_FLOOR = 4.0
GUIDE_MIN_FRAMES = 10  # well-bent frames a clip needs before the foot's view of a leg's twist is weighed
CHI2_MEDIAN = 0.455  # median of chi^2 with one degree of freedom
# The foot's roll about its own length is seen only through two toes 6 cm apart (5-7 deg of noise a frame) while
# its flexion is fast: the roll is cleaned up apart, by curvature, its noise counted FOOT_ROLL_GAIN times
# (rig_smooth.curvature_smooth). Walking truth at 3 mm, seeds 5-10: feet 5.9-12.6 -> 3.9-7.3 deg; run 5.6-18.0 ->
# 4.9-12.4; slow 4.6-6.2 -> 3.4-4.2 (gain 1: 4.2-7.4 on the walk; 0.3: 4.3-7.7).
FOOT_ROLL_GAIN = 4.0


def _wrap(angle: np.ndarray) -> np.ndarray:
    """Angles (radians) wrapped into (-pi, pi]."""
    return np.angle(np.exp(1j * angle))


@dataclass
class Motion:
    """World (armature-space) bone frames (T, B, 3, 3) and heads (T, B, 3), in ``rest.names`` order."""

    rotations: np.ndarray
    heads: np.ndarray

    def deltas(self, rest_frames: np.ndarray) -> np.ndarray:
        """(T, B, 3, 3) rotations taking each bone from its rest frame to its pose (retargeting's currency)."""
        return self.rotations @ np.swapaxes(rest_frames, -1, -2)[None]


class _Solver:
    def __init__(self, tracks: np.ndarray, kp: KeypointIndex, m: Measurements, rest: RestPose,
                 cleanup: CleanUp | None, fps: float, trust: np.ndarray | None = None):  # fmt: skip
        self.tracks, self.kp, self.m, self.rest = tracks, kp, m, rest
        self.trust = trust
        self.cleanup, self.fps = cleanup, float(fps)
        frames = tracks.shape[0]
        self.rot = np.tile(rest.frames[None], (frames, 1, 1, 1))
        self.heads = np.tile(rest.heads[None], (frames, 1, 1))

    # --- helpers -------------------------------------------------------------------------------------------
    def p(self, name: str) -> np.ndarray:
        return self.kp(self.tracks, name)

    def w(self, *names: str) -> np.ndarray | None:
        """(T,) how far a rigid fit of these keypoints can be trusted: the ideal error over the expected one
        (``rig_gaps.refill_with_trust``), combined as variances add -- a foot fitted through a refilled toe leans
        on its neighbours. Only the head and foot fits use it: on the walking truth at 3 mm, 5 % dropped, it takes
        the feet from 7.9 / 7.2 / 6.9 / 6.5 / 17.3 to 6.6 / 6.8 / 6.4 / 5.9 / 12.6 deg (seeds 5, 6, 8, 9, 10), at
        15 % dropped from 10.3 / 10.5 to 6.9 / 8.3. On the hands it made a 15 %-dropped draw worse (forearm 14.1 ->
        18.2 deg), on limb directions and twists the worst frame (a dropped knee at a jump's landing, where the
        truth itself steps): a fast part leans better on its refilled sample than on its neighbours. None: trust
        everything (no clean-up, or tracks given without trust)."""
        if self.trust is None:
            return None
        t = np.stack([self.trust[:, self.kp.index[n]] for n in names], axis=-1)
        return len(names) / np.sum(1.0 / np.maximum(t, 1e-6), axis=-1)

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

    def smooth(
        self,
        x: np.ndarray,
        weights: np.ndarray | None = None,
        speed_scale: float = 1.0,
        noise_floor: float = 0.0,
    ) -> np.ndarray:
        """The clean-up on (T, ..., C) tracks, or the tracks as they are when the user asked for none."""
        if self.cleanup is None:
            return x
        return adaptive_smooth(x, self.fps, self.cleanup, weights, speed_scale, noise_floor)

    def steady(self, parent: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """Unit world vectors (T, ..., 3) cleaned up as ``parent`` (T, 3, 3) sees them, i.e. in joint space."""
        if self.cleanup is None:
            return vectors
        local = np.einsum("tji,t...j->t...i", parent, vectors)
        return np.einsum("tij,t...j->t...i", parent, normalize(self.smooth(local)))

    def steady_frame(
        self,
        parent: np.ndarray | None,
        frames: np.ndarray,
        weights: np.ndarray | None = None,
        curvature: bool = False,
    ) -> np.ndarray:
        """World rotations (T, 3, 3) cleaned up relative to ``parent`` (None: in the world), kept rotations;
        ``curvature``: by ``rig_smooth.curvature_smooth`` instead of the speed-adaptive filter."""
        if self.cleanup is None:
            return frames
        local = frames if parent is None else np.swapaxes(parent, -1, -2) @ frames
        flat = local.reshape(-1, 9) / np.sqrt(2.0)
        if curvature:
            strength = MIN_CUTOFF / self.cleanup.min_cutoff  # the user's Strength: x2 = windows twice as wide
            flat = curvature_smooth(flat, weights, gain=strength**5)
        else:
            flat = self.smooth(flat, weights)
        flat = flat.reshape(-1, 3, 3) * np.sqrt(2.0)
        u, _, vt = np.linalg.svd(flat)
        d = np.sign(np.linalg.det(u @ vt))
        u[..., :, 2] *= d[:, None]
        cleaned = u @ vt
        return cleaned if parent is None else parent @ cleaned

    def steady_heading(self, frames: np.ndarray) -> np.ndarray:
        """World rotations (T, 3, 3) of the root cleaned up as a heading about the clip's mean up (its y axis) and
        a tilt relative to that heading: a turn is fast in heading only, so the tilt keeps its low cut-off (one
        filter on the whole rotation opened for every axis through the walk's 180 deg turn). Walking truth at 3 mm:
        hips 2.8 / 3.8 / 3.5 / 2.8 / 2.9 / 3.2 -> 2.5 / 3.4 / 3.5 / 2.6 / 2.7 / 3.2 deg (seeds 5-10), the slow
        truth's 3.3 / 3.5 / 3.3 -> 2.8 / 3.2 / 3.1. The heading is cleaned up by curvature (``rig_smooth``), like
        the head: a walk's pelvis yaws smoothly but fast, so the speed-adaptive filter stayed open for it -- walking
        truth 2.5-3.5 -> 2.3-2.6 deg (seeds 5-10), running 2.8-3.4 -> 2.6-3.3 (5-8), slow 2.8-3.2 -> 2.7-3.0
        (11-13). The tilt by curvature too took the hips to 1.8-2.9 but the neck, aimed from them, from 1.8-2.5 to
        2.6-3.9 (walk; run 5.0-6.5). A clip whose up is not steady (a cartwheel) keeps one speed-adaptive filter."""
        if self.cleanup is None:
            return frames
        up = frames[..., :, 1].mean(axis=0)
        if np.linalg.norm(up) < 0.5:
            return self.steady_frame(None, frames)
        up = normalize(up)
        forward = reject(frames[..., :, 2], up)
        reference = normalize(reject(np.mean(forward, axis=0), up))
        if np.linalg.norm(reference) < 0.5:
            reference = normalize(reject(forward[0], up))
        heading = signed_angle(np.broadcast_to(reference, forward.shape), forward, up)
        turn = axis_angle(np.broadcast_to(up, forward.shape), heading)
        tilt = self.steady_frame(None, np.swapaxes(turn, -1, -2) @ frames)
        strength = MIN_CUTOFF / self.cleanup.min_cutoff
        unit = curvature_smooth(np.stack([np.cos(heading), np.sin(heading)], -1), gain=strength**5)
        return axis_angle(np.broadcast_to(up, forward.shape), np.arctan2(unit[:, 1], unit[:, 0])) @ tilt

    def parent_delta(self, bone: str) -> np.ndarray:
        return self.delta(self.rest.parent[self.i(bone)])

    def aim(self, bone: str, target: np.ndarray, noise_floor: float = 0.0) -> np.ndarray:
        """Swing the carried frame so the bone points at ``target`` (no twist); returns the new frame."""
        return self.aim_all([bone], [target], noise_floor)[0]

    def aim_all(
        self, bones: list[str], targets: list[np.ndarray], noise_floor: float = 0.0
    ) -> list[np.ndarray]:
        """``aim`` for bones that do not depend on each other (one finger segment of every finger), cleaned up
        in one call."""
        heads = [self.place(bone) for bone in bones]
        parents = np.stack([self.parent_delta(bone) for bone in bones], axis=1)  # (T, n, 3, 3)
        seen = np.stack([normalize(t - h) for t, h in zip(targets, heads)], axis=1)
        local = np.einsum("tnji,tnj->tni", parents, seen)
        if self.cleanup is not None:
            local = normalize(self.smooth(local, noise_floor=noise_floor))
        directions = np.einsum("tnij,tnj->tni", parents, local)
        frames = []
        for k, bone in enumerate(bones):
            carried = self.carried(bone)
            frames.append(shortest_arc(carried[..., :, 1], directions[:, k]) @ carried)
            self.set(bone, frames[-1])
        return frames

    def fit(self, bone: str, local: np.ndarray, observed: np.ndarray, part_rest: np.ndarray,
            weights: np.ndarray | None = None, curvature: bool = False,
            roll_axis: np.ndarray | None = None) -> None:  # fmt: skip
        """Rigid fit of a measured layout; ``part_rest`` is the layout frame in the rest pose. Clean-up works on
        the fitted rotation as the parent bone sees it (a wrist's flexion is slow; the hand's world frame is not);
        ``roll_axis``: the roll about it cleaned up apart (``steady_roll``)."""
        b = self.i(bone)
        parent = self.delta(self.rest.parent[b])
        offsets = observed - observed.mean(axis=1, keepdims=True)
        if roll_axis is not None and self.cleanup is not None:
            part = (
                self.steady_roll(parent, kabsch(local, offsets) @ part_rest.T, roll_axis, weights) @ part_rest
            )
        else:
            part = self.steady_frame(parent, kabsch(local, offsets), weights, curvature)
        self.set(bone, part @ part_rest.T @ self.rest.frames[b])

    def steady_roll(self, parent: np.ndarray, frames: np.ndarray, axis: np.ndarray,
                    weights: np.ndarray | None) -> np.ndarray:  # fmt: skip
        """World rotations (T, 3, 3), relative to their rest (identity at rest), cleaned up as ``parent`` sees them
        as a swing and a roll about ``axis`` (the bone's rest direction) apart: the swing by the speed-adaptive
        filter, the roll by curvature (``FOOT_ROLL_GAIN``)."""
        local = np.swapaxes(parent, -1, -2) @ frames
        a = np.broadcast_to(axis, local.shape[:-1])
        swing = shortest_arc(a, local @ axis)
        roll = np.swapaxes(swing, -1, -2) @ local  # a rotation about axis
        ref = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
        ref = np.broadcast_to(normalize(ref), a.shape)
        angle = signed_angle(ref, roll @ ref[0], a)
        swing = self.steady_frame(None, swing, weights)
        strength = MIN_CUTOFF / self.cleanup.min_cutoff
        unit = curvature_smooth(
            np.stack([np.cos(angle), np.sin(angle)], -1), weights, gain=FOOT_ROLL_GAIN * strength**5
        )
        return parent @ swing @ axis_angle(a, np.arctan2(unit[:, 1], unit[:, 0]))

    def steady_angle(self, angle: np.ndarray) -> np.ndarray:
        """An angle track cleaned up as its (cos, sin) vector: no unwrapping, a turn through 180 deg is fine."""
        if self.cleanup is None:
            return angle
        unit = self.smooth(np.stack([np.cos(angle), np.sin(angle)], axis=-1))
        return np.arctan2(unit[:, 1], unit[:, 0])

    # --- body parts ----------------------------------------------------------------------------------------
    def torso(self) -> None:
        if "root" in self.rest.names:
            self.heads[:, self.i("root")] = self.rest.heads[self.i("root")]
        hips = self.i("hips")
        neck = self.p("neck")
        # The root has no parent: its position and axes are cleaned up in the world (speed in torso lengths/s).
        torso = sum(self.m.lengths[b] for b in ("hips", "spine", "spine1", "spine2"))
        self.heads[:, hips] = self.smooth(self.kp.pelvis(self.tracks), speed_scale=1.0 / max(torso, 1e-9))
        observed = hips_frame(self.p("left_hip"), self.p("right_hip"), neck)
        self.set("hips", self.steady_heading(observed))
        self.place("spine")
        straight = self.aim("spine", neck)
        axis = straight[..., :, 1]
        shoulders = self.p("left_shoulder") - self.p("right_shoulder")
        twist = self.steady_angle(signed_angle(straight[..., :, 0], shoulders, axis))
        for k, bone in enumerate(("spine", "spine1", "spine2"), start=1):
            self.place(bone)
            self.set(bone, axis_angle(axis, twist * k / 3.0) @ straight)
        self.aim("neck", self.kp.head_centre(self.tracks), NECK_NOISE_FLOOR)
        self.place("head")
        layout = self.m.head_layout
        names = [n for n in self.kp.head_fit_names() if n in layout]
        local = np.stack([layout[n] for n in names])
        observed = np.stack([self.p(n) for n in names], axis=1)
        # The head turns smoothly but fast (a 25 deg look round at 0.4 Hz is 1.1 rad/s): the speed-adaptive filter
        # stays open for it and keeps the fit's 4-5 deg of noise. Its bias comes from curvature, not speed, so the
        # head takes the curvature-adaptive smoother: walking truth at 3 mm 3.1-4.4 -> 2.3-3.2 deg (seeds 5-10),
        # running 3.4-4.1 -> 2.7-3.5, slow 3.3-3.5 -> 2.3-2.9. On the feet (sharp ankle bumps) it lost on the
        # running truth, on limb directions it lost on joints (3.6 cm), on a straight knee's twist it spiked.
        self.fit("head", local, observed, HEAD_REST, self.w(*names), curvature=True)

    def limb(self, upper: str, lower: str, pole: str, target: str,
             guide: tuple[np.ndarray, np.ndarray | None] | None = None) -> np.ndarray:  # fmt: skip
        """Upper bone aimed at the observed elbow/knee, lower at the wrist/ankle from where the upper ends;
        both hinge about the normal of the bend plane. ``guide``: (T, 3, 3) the lower bone's frame as the end
        part (the foot) sees it, and its trust -- a second view of the twist (``guided_twist``). Returns the lower
        bone's hinge-only frame.

        With clean-up and a guide the clip can weigh (``guide_usable``), the twist is read against a *calm*
        parent (``calm``) and smoothed as a maximum-likelihood spline (``rig_smooth.spline_smooth``) with the
        variances ``guided_twist`` reads. Why: read against the cleaned-up hips, the twist carries their residual
        jitter -- the true twist seen that way accelerates 2-6x as much as seen from the true hips (at 3 mm: walk
        0.6 against 0.12 deg/frame^2, run 0.65 / 0.3, slow 0.44 / 0.07) -- which a smoother either keeps or puts
        into the world twist. A reference only has to be smooth, not accurate, to take it out; against it the
        twist is smooth, and a smoother that knows what each frame is worth can average it. On the 13 draws (walk
        5-10, run 5-8, slow 11-13, 3 mm, 5 % dropped) thighs 3.1-5.8 -> 2.5-4.9 deg, every draw better; the calm
        reference with the speed-adaptive filter, or the spline against the cleaned-up hips, each lost on some
        (docs/blender.md).

        Without a guide (an arm), with clean-up and at least ``GUIDE_MIN_FRAMES`` frames bent enough to show the
        plane, the twist is the same spline on the plane alone (variance ``plane_noise`` / strength), against the
        cleaned-up parent: the upper arm's worst frame was its twist on all 13 draws (direction 0.8-2.7 deg, the
        elbow angle 0-2.3), with the elbow bent 17-28 deg, and the speed-adaptive filter left 6-12 deg of it.
        Upper arms 9.0-12.4 -> 5.8-9.8 deg (walk), 6.0-10.2 -> 3.9-6.9 (run), 8.1-9.0 -> 4.3-6.3 (slow); the
        calm clavicle as reference lost more where it lost (walk 6 +0.8, run 6 +0.5 deg, against +0.3 / +0.3)."""
        start = self.place(upper)
        bend, goal = self.p(pole), self.p(target)
        length = self.m.lengths[upper.split(".")[0]]
        seen_up = normalize(bend - start)
        # The bend plane through the observed joints, not the cleaned-up ones: near a straight limb a 1 mm shift
        # of the elbow turns the plane by degrees, so a smoothed (slightly rounded) elbow would bias the twist.
        plane = np.cross(seen_up, normalize(goal - (start + length * seen_up)))
        bent = np.linalg.norm(plane, axis=-1)
        ok = bent > WEAK_BEND
        strength = np.where(ok, (bent / BEND_REFERENCE) ** 2, 0.0)
        guided = self.cleanup is not None and guide is not None and self.guide_usable(strength, guide[1])
        # An arm (no guide): the plane alone, spline-smoothed where the clip shows enough bent frames to weigh it.
        plain = self.cleanup is not None and guide is None and int(ok.sum()) >= GUIDE_MIN_FRAMES
        up_dir = self.steady(self.parent_delta(upper), seen_up)
        carried = self.carried(upper)
        if guided:
            carried = self.calm(self.parent_delta(upper)) @ self.rest.frames[self.i(upper)]
        swung = shortest_arc(carried[..., :, 1], up_dir) @ carried  # aimed, keeping the (reference's) twist
        # The plane's normal as the swung bone sees it: (cos, sin) of the upper bone's own twist. A frame too
        # straight to show its plane takes the twist from its neighbours; a limb never bent keeps no twist.
        unit = normalize(plane)
        seen = np.stack([np.sum(unit * swung[..., :, 0], -1), -np.sum(unit * swung[..., :, 2], -1)], -1)
        seen = fill_weak(seen, ok) if ok.any() else np.tile([1.0, 0.0], (len(seen), 1))
        low_dir = normalize(goal - (start + length * up_dir))
        reference = None
        if guided:
            seen, variance = self.guided_twist(swung, low_dir, seen, strength, *guide)
            # No Strength here: the spline smooths as much as the clip's own noise says. At Strength 2, read as a
            # 16x lower process noise (half the cut-off), the walk's thighs went from 3.0-4.6 to 4.4-6.4 deg at 3 mm
            # (seeds 5-10); ignoring it, to 2.7-4.5 (at 6 mm, walk, run and slow: 5.4-10.7 -> 3.8-10.6).
            seen = spline_twist(np.arctan2(seen[:, 1], seen[:, 0]), variance)
        elif plain:
            # The end part (the hand) keeps being cleaned up against the hinge of the speed-adaptive twist: its
            # filter's speed is read in that frame, and against the spline's hinge the walk's and run's hands and
            # forearms moved by up to 0.5 deg either way (noise-bound at 8-16 deg; run 6 +0.49, slow 12 +0.41).
            filtered = self.smooth(seen, weights=np.clip(strength, 0.0, 1.0))
            reference = swung @ rotation_y(np.arctan2(filtered[:, 1], filtered[:, 0]))
            angle = np.arctan2(seen[:, 1], seen[:, 0])
            variance = np.where(ok, self.plane_noise(angle, strength) / np.maximum(strength, 1e-12), np.inf)
            seen = spline_twist(angle, variance)
        elif self.cleanup is not None:
            seen = self.smooth(seen, weights=np.clip(strength, 0.0, 1.0))
        frame = swung @ rotation_y(np.arctan2(seen[:, 1], seen[:, 0]))
        self.set(upper, frame)
        self.place(lower)
        low_dir = self.steady(self.delta(self.i(upper)), low_dir)
        hinge = self.hinge(frame, low_dir)
        self.set(lower, hinge if reference is None else self.hinge(reference, low_dir))
        return hinge

    @staticmethod
    def guide_usable(strength: np.ndarray, trust: np.ndarray | None) -> bool:
        """Whether the clip has enough well-bent, fully trusted runs of three frames (``GUIDE_MIN_FRAMES``) to
        tell what the bend plane's and the foot's readings of a thigh's twist are worth (``guided_twist``)."""
        trusted = np.ones_like(strength) if trust is None else np.clip(trust, 0.0, 1.0)
        good = (strength >= 1.0) & (trusted >= 1.0)
        return int((good[1:-1] & good[:-2] & good[2:]).sum()) >= GUIDE_MIN_FRAMES

    def calm(self, parent: np.ndarray) -> np.ndarray:
        """(T, 3, 3) a parent's world rotations low-passed at the clean-up's still-joint cut-off, with no speed
        term: a reference for a twist that only needs to be smooth, not accurate (``limb``)."""
        steady = CleanUp(min_cutoff=self.cleanup.min_cutoff, beta=0.0, envelope=self.cleanup.envelope)
        flat = adaptive_smooth(parent.reshape(-1, 9), self.fps, steady).reshape(-1, 3, 3)
        u, _, vt = np.linalg.svd(flat)
        d = np.sign(np.linalg.det(u @ vt))
        u[..., :, 2] *= d[:, None]
        return u @ vt

    def guided_twist(self, swung: np.ndarray, low_dir: np.ndarray, seen: np.ndarray, strength: np.ndarray,
                     guide: np.ndarray, trust: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """The upper bone's twist (cos, sin) read twice and combined by how well each view sees it: the bend plane
        (``seen``, worth ``strength`` ~ sin^2 of the bend) and the end part's heading (``guide``: the lower bone's
        frame as the foot sees it, ``trust`` its fit). The foot turns with the leg's twist, up to the ankle's own
        axial play; what that play and the foot's noise are worth is read from the clip itself, on its well-bent
        frames (where the plane is seen), against the plane's own noise there. Returns the combined (cos, sin) and
        its (T,) variance (rad^2; inf where neither view sees it). A clip whose ankle turns a lot about the shin, or
        with no noise, so leans on the plane; a noisy straight-kneed stance leans on the foot. The caller checks
        ``guide_usable`` first."""
        angle = np.arctan2(seen[:, 1], seen[:, 0])
        foot = angle + twist_about_y(
            np.swapaxes(self.hinge(swung @ rotation_y(angle), low_dir), -1, -2) @ guide
        )
        trusted = np.ones_like(strength) if trust is None else np.clip(trust, 0.0, 1.0)
        good = (strength >= 1.0) & (trusted >= 1.0)
        triple = good[1:-1] & good[:-2] & good[2:]
        # The plane's noise at full strength: second differences of the twist on well-bent runs (a slow twist adds
        # next to nothing to them), scaled by each frame's strength; medians, over a chi^2(1) median of 0.455.
        r = _wrap(angle[1:-1] - 0.5 * (angle[:-2] + angle[2:]))
        plane_var = np.median((r**2 * strength[1:-1])[triple]) / (1.5 * CHI2_MEDIAN)
        offset = _wrap(foot - angle)[good]
        spread = np.median(offset**2) / CHI2_MEDIAN  # the ankle's play counts as the foot's error
        foot_var = max(spread - plane_var * np.median(1.0 / strength[good]), 0.25 * spread, 1e-12)
        w_plane, w_foot = strength / self.plane_noise(angle, strength), trusted / foot_var
        both = w_plane[:, None] * seen + w_foot[:, None] * np.stack([np.cos(foot), np.sin(foot)], -1)
        total = w_plane + w_foot
        return normalize(both), np.where(total > 0, 1.0 / np.maximum(total, 1e-300), np.inf)

    @staticmethod
    def plane_noise(angle: np.ndarray, strength: np.ndarray) -> float:
        """The bend plane's twist variance at full strength (rad^2; a frame's is this / its strength), read from the
        clip: the second differences of the twist ``angle`` (T,) on every seen run of three frames, each one's
        variance the sum of its three frames' (a slow twist adds next to nothing to them); median over a chi^2(1)
        median. Why every seen run, not only the well-bent ones: at 3 mm a weakly bent frame's plane is noisier
        than 1 / strength extrapolates from those (1.2-1.4x in rms at strength 0.02-0.4), and the spline would
        follow a run of them (run seed 18's thigh 3.9 -> 8.1 deg)."""
        r = _wrap(angle[1:-1] - 0.5 * (angle[:-2] + angle[2:]))
        seen3 = (strength[1:-1] > 0) & (strength[:-2] > 0) & (strength[2:] > 0)
        if not seen3.any():
            return 1e-12
        s = np.maximum(strength, 1e-12)
        k = 1.0 / s[1:-1] + 0.25 / s[:-2] + 0.25 / s[2:]
        return max(float(np.median((r**2 / k)[seen3]) / CHI2_MEDIAN), 1e-12)

    @staticmethod
    def hinge(upper: np.ndarray, low_dir: np.ndarray) -> np.ndarray:
        """The lower bone's frame: along ``low_dir``, hinged about the upper bone's X."""
        normal = normalize(reject(upper[..., :, 0], low_dir))
        return np.stack([normal, low_dir, np.cross(normal, low_dir)], axis=-1)

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

    def lower_hips(self, planted: dict[str, np.ndarray]) -> None:
        """A planted ankle out of the leg's reach (a straight leg, with the pelvis measured a little high) is
        reached by moving the whole body towards it -- bone lengths stay fixed, so the alternative is a sliding
        foot. The body moves by each planted leg's excess along that leg, a few passes for two legs."""
        reach = self.m.lengths["thigh"] + self.m.lengths["shin"] - 1e-4
        for _ in range(4):
            shift = np.zeros_like(self.heads[:, 0])
            for side, weight in planted.items():
                hip = self.heads[:, self.i(f"thigh.{side}")]
                shin = self.i(f"shin.{side}")
                ankle_now = self.heads[:, shin] + self.m.lengths["shin"] * self.rot[:, shin][..., :, 1]
                locked = self.p(body_names(side)["ankle"])
                goal = ankle_now + weight[:, None] * (locked - ankle_now)
                gap = goal - hip
                excess = np.maximum(np.linalg.norm(gap, axis=-1) - reach, 0.0)
                shift += excess[:, None] * normalize(gap)
            if not np.any(shift):
                return
            moved = [b for b, name in enumerate(self.rest.names) if name != "root"]
            self.heads[:, moved] += shift[:, None, :]

    def plant(self, side: str, weight: np.ndarray) -> None:
        """Foot lock in the rig: where ``weight`` (T,) > 0 the leg is re-solved by two-bone IK so the rig's ankle
        reaches the (locked) ankle keypoint, blended by the weight -- the thigh swung onto the new knee (keeping
        its twist), the shin re-hinged on it, the foot keeping its world rotation. Without this the ankle is
        where the thigh and shin directions put it, which slides by the keypoints' length noise."""
        on = weight > 0
        if not on.any():
            return
        thigh, shin = self.i(f"thigh.{side}"), self.i(f"shin.{side}")
        hip = self.heads[on, thigh]
        upper, lower = self.m.lengths["thigh"], self.m.lengths["shin"]
        knee_now = self.heads[on, shin]
        ankle_now = knee_now + lower * self.rot[on, shin][..., :, 1]
        locked = self.p(body_names(side)["ankle"])[on]
        goal = ankle_now + weight[on, None] * (locked - ankle_now)
        reach = goal - hip
        distance = np.clip(np.linalg.norm(reach, axis=-1), abs(upper - lower) + 1e-6, upper + lower - 1e-6)
        u = normalize(reach)
        bend = reject(knee_now - hip, u)  # bend towards where the knee already is (its plane)
        fallback = -self.rot[on, thigh][..., :, 2]
        bend = np.where((np.linalg.norm(bend, axis=-1) > 1e-9)[:, None], bend, reject(fallback, u))
        v = normalize(bend)
        cos_a = np.clip((upper**2 + distance**2 - lower**2) / (2.0 * upper * distance), -1.0, 1.0)
        knee = hip + upper * (cos_a[:, None] * u + np.sqrt(1.0 - cos_a**2)[:, None] * v)
        ankle = hip + distance[:, None] * u
        old = self.rot[on, thigh]
        self.rot[on, thigh] = shortest_arc(old[..., :, 1], normalize(knee - hip)) @ old
        low_dir = normalize(ankle - knee)
        normal = normalize(reject(self.rot[on, thigh][..., :, 0], low_dir))
        self.rot[on, shin] = np.stack([normal, low_dir, np.cross(normal, low_dir)], axis=-1)
        # The foot's world rotation: the fit of the locked points as they are (the clean-up smoothed it relative
        # to the shin the IK just moved), blended in by the weight.
        n = body_names(side)
        local = np.vstack([np.zeros((1, 3)), self.m.side_layout(self.m.foot_layout, side)])
        observed = np.stack([self.p(n[r]) for r in ("ankle", "heel", "big_toe", "small_toe")], axis=1)[on]
        foot = self.i(f"foot.{side}")
        target = kabsch(local, observed - observed.mean(axis=1, keepdims=True))
        target = target @ side_frame(SOLE_REST, side).T @ self.rest.frames[foot]
        w = weight[on, None, None]
        u, _, vt = np.linalg.svd((1.0 - w) * self.rot[on, foot] + w * target)
        d = np.sign(np.linalg.det(u @ vt))
        u[..., :, 2] *= d[:, None]
        self.rot[on, foot] = u @ vt
        for bone in (f"shin.{side}", f"foot.{side}", f"toe.{side}", f"heel.{side}"):
            if bone in self.rest.names:
                self.place(bone)
                if bone.startswith(("toe", "heel")):
                    self.set(bone, self.carried(bone))

    def leg(self, side: str) -> None:
        n = body_names(side)
        local = np.vstack([np.zeros((1, 3)), self.m.side_layout(self.m.foot_layout, side)])
        roles = [n[r] for r in ("ankle", "heel", "big_toe", "small_toe")]
        observed = np.stack([self.p(r) for r in roles], axis=1)
        sole = kabsch(local, observed - observed.mean(axis=1, keepdims=True)) @ side_frame(SOLE_REST, side).T
        guide = (sole @ self.rest.frames[self.i(f"shin.{side}")], self.w(*roles))
        self.limb(f"thigh.{side}", f"shin.{side}", n["knee"], n["ankle"], guide)
        self.place(f"foot.{side}")
        axis = self.rest.frames[self.i(f"foot.{side}")][:, 1]
        self.fit(f"foot.{side}", local, observed, side_frame(SOLE_REST, side), self.w(*roles), roll_axis=axis)
        for child in (f"toe.{side}", f"heel.{side}"):
            if child in self.rest.names:
                self.place(child)
                self.set(child, self.carried(child))


def spline_twist(angle: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """(T, 2) (cos, sin) of a twist track (T,) smoothed by ``rig_smooth.spline_smooth`` (unwrapped first, so a
    turn through 180 deg is continuous)."""
    twist = spline_smooth(np.unwrap(angle), variance)
    return np.stack([np.cos(twist), np.sin(twist)], -1)


def solve(
    tracks: np.ndarray,
    kp: KeypointIndex,
    m: Measurements,
    rest: RestPose,
    cleanup: CleanUp | None = None,
    fps: float = 30.0,
    planted: dict[str, np.ndarray] | None = None,
    trust: np.ndarray | None = None,
) -> Motion:
    """Bone frames and heads for every frame of (T, K, 3) tracks (Blender frame, gap-free). Without ``cleanup``
    the keypoints are followed as they are; with it, joint-space speed-adaptive smoothing at ``fps``.
    ``planted``: per side ("L"/"R") a (T,) foot-lock weight (``rig_filters.contact_weights``): the leg is then
    solved onto the locked ankle by two-bone IK, blended in and out."""
    solver = _Solver(np.asarray(tracks, dtype=np.float64), kp, m, rest, cleanup, fps, trust)
    solver.torso()
    for side in SIDES:
        solver.arm(side)
        solver.leg(side)
    if planted:
        planted = {side: np.asarray(w, dtype=np.float64) for side, w in planted.items() if np.any(w)}
        solver.lower_hips(planted)
        for side, weight in planted.items():
            solver.plant(side, weight)
    return Motion(rotations=solver.rot, heads=solver.heads)


def joint_positions(motion: Motion, rest: RestPose) -> dict[str, np.ndarray]:
    """(T, 3) positions of the rig's joints that correspond to keypoints (heads and tails of bones)."""
    out = {}
    tails = motion.heads + np.einsum("tbij,bj->tbi", motion.deltas(rest.frames), rest.tails - rest.heads)
    for b, name in enumerate(rest.names):
        out[f"{name}:head"] = motion.heads[:, b]
        out[f"{name}:tail"] = tails[:, b]
    return out
