"""A realistic ground truth for the humanoid rig: a 1.68 m person who walks, stops, turns round, jumps and walks
back twisting both forearms fast -- motion with the spectrum of real mocap, not slow sines.

300 frames at 29.97 fps (10 s):

- 0-2.8 s: walking at 0.95 gait cycles/s (114 steps/min, 1.3 m/s). Joint angles follow gait-like waveforms built
  from narrow periodic bumps (knee: 5 deg at heel strike, a 17 deg loading bump, 62 deg in swing; ankle, hip and
  arm swing to match), so the limbs carry harmonics up to about 5 Hz;
- 2.8-3.3 s: stopping; 3.3-4.5 s: a 180 deg turn on the spot (hips yaw, minimum-jerk);
- 4.6-5.2 s: a squat (knees to 95 deg, pelvis 27 cm lower), 5.2-5.6 s: a jump (ballistic flight, 20 cm), landing;
- 6.0-10 s: walking back; from 6.3 s both forearms twist +-90 deg at 2 Hz (1,130 deg/s at the peak).

Only what keypoints observe moves (the solver's conventions, ``tests/blender/rig_truth.py``): elbows and knees stay
bent at least 5 deg (a hinge needs a bend to show its plane), no twist on clavicles, neck, fingers or toes.
Everything here is independent of ``rig_truth.truth_motion``: its own body (other bone lengths, hand, foot and face
layouts), its own motion; the forward kinematics and the keypoint layout (which keypoint sits where on a bone) are
``rig_truth``'s, which is what the keypoints *mean*.

Loaded by path (not a package), like ``rig_truth.py``; ``parse`` is the caller's dict of the add-on's modules. What
all truths share (forward kinematics, keypoint layout, noise, rotations, ramps) is ``rig_truths_common.py``'s.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

FPS = 29.97
FRAMES = 300
TURN = (3.3, 4.5)  # seconds
JUMP = (5.2, 5.6)  # take-off, landing
TWIST = (6.3, 10.0)  # forearm twist +-90 deg at 2 Hz
GAIT_HZ = 0.95
SPEED = 1.3  # m/s while walking


_spec = importlib.util.spec_from_file_location(
    "sapiens2_rig_truths_common", Path(__file__).with_name("rig_truths_common.py")
)
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)


def walker_measurements(parse):
    """A 1.68 m person: shorter limbs, a wider pelvis and another hand, foot and face than ``rig_truth``'s."""
    lengths = {
        "hips": 0.05,
        "spine": 0.135,
        "spine1": 0.135,
        "spine2": 0.18,
        "neck": 0.10,
        "head": 0.13,
        "clavicle": 0.165,
        "upper_arm": 0.285,
        "forearm": 0.245,
        "thigh": 0.425,
        "shin": 0.405,
    }
    fingers = {"thumb": (0.042, 0.031, 0.026), "index": (0.042, 0.025, 0.02), "middle": (0.047, 0.029, 0.022)}
    fingers.update({"ring": (0.043, 0.027, 0.021), "pinky": (0.033, 0.02, 0.018)})
    hand = [
        [0, 0, 0],
        [0.01, 0.026, 0.024],
        [0.0, 0.086, 0.022],
        [0.0, 0.09, 0.0],
        [0.0, 0.086, -0.019],
        [0.0, 0.077, -0.035],
    ]
    foot = [[0.0, -0.06, 0.078], [-0.03, 0.17, 0.078], [0.031, 0.152, 0.078]]
    head = {
        "left_ear": np.array([0.071, 0.0, 0.0]),
        "right_ear": np.array([-0.071, 0.0, 0.0]),
        "left_eye": np.array([0.03, 0.028, 0.085]),
        "right_eye": np.array([-0.03, 0.028, 0.085]),
        "nose": np.array([0.0, -0.055, 0.108]),
    }
    return C.measurements(
        parse, lengths, fingers, 0.21, hand, foot, head, face=(23, 0.055, 0.065, -0.02, 0.09)
    )


def walker_motion(names: list[str], frames: int = FRAMES, fps: float = FPS):
    """Local bone rotations (T, B, 3, 3), the hips' location (T, 3) and the rest height of the pelvis it assumes.

    The pelvis starts above (0, 0); it walks towards -Y (the direction the rest pose faces), turns and comes back."""
    t = np.arange(frames) / fps
    rad = np.radians
    local = np.tile(np.eye(3), (frames, len(names), 1, 1))
    put = C.poser(local, names)
    walk = 1.0 - C.ramp(t, 2.8, 3.3) + C.ramp(t, 6.0, 6.5)
    heading = np.pi * C.ramp(t, *TURN)
    squat = C.window(t, 4.6, 5.25, edge=0.3) + C.window(t, 5.55, 6.05, edge=0.2) * 0.8
    flight = (t > JUMP[0]) & (t < JUMP[1])
    phase = GAIT_HZ * t

    sides = {"L": 0.0, "R": 0.5}
    for side, shift in sides.items():
        sign = 1.0 if side == "L" else -1.0
        p = phase + shift
        # Hip flexion (thigh forward is a negative x turn in the leg frame), knee, ankle: gait-like waveforms.
        hip = walk * (-rad(22) * np.cos(2 * np.pi * p) + rad(4) * (C.bump(p, 0.85, 0.07) - 0.3))
        knee = rad(5) + walk * (rad(12) * C.bump(p, 0.15, 0.06) + rad(57) * C.bump(p, 0.72, 0.1))
        ankle = walk * (
            rad(10) * C.bump(p, 0.45, 0.08) - rad(16) * C.bump(p, 0.62, 0.05) + rad(4) * np.sin(2 * np.pi * p)
        )
        hip = hip - squat * rad(85) + flight * rad(-10)
        knee = knee + squat * rad(90)
        ankle = ankle + squat * rad(-25)
        abduction = sign * (rad(3) * walk * np.sin(2 * np.pi * p) + rad(4))
        hip_turn = rad(3) * walk * np.sin(2 * np.pi * p + 0.4)  # thigh twist, seen through the knee's bend
        put(f"thigh.{side}", C.rx(hip) @ C.ry(hip_turn) @ C.rz(abduction))
        put(f"shin.{side}", C.rx(knee))
        put(f"foot.{side}", C.rx(-ankle) @ C.rz(sign * rad(3) * np.sin(2 * np.pi * p)))
        # Arms hang (lowered 75 deg from the T-pose), swing against the legs, elbows 15-45 deg.
        swing = walk * rad(20) * np.cos(2 * np.pi * p) + C.window(t, 4.6, 5.6, 0.2) * rad(-60)
        lower = -sign * rad(75) + sign * C.window(t, 5.0, 5.6, 0.2) * rad(40)
        put(f"clavicle.{side}", C.rz(sign * rad(4) * (1 + walk * np.sin(4 * np.pi * p))))
        put(f"upper_arm.{side}", C.rz(lower) @ C.rx(-swing) @ C.ry(rad(8) * np.sin(2 * np.pi * p)))
        elbow = rad(15) + rad(25) * (0.5 + 0.5 * walk * np.cos(2 * np.pi * p + 0.6)) + squat * rad(30)
        twist = C.window(t, *TWIST, 0.3) * rad(90) * np.sin(2 * np.pi * 2.0 * (t - TWIST[0]))
        put(f"forearm.{side}", C.rx(elbow) @ C.ry(sign * (rad(10) + twist)))
        put(
            f"hand.{side}", C.rx(rad(10) * np.sin(2 * np.pi * p + 1.0)) @ C.rz(rad(6) * np.cos(2 * np.pi * p))
        )
        for k, finger in enumerate(("thumb", "index", "middle", "ring", "pinky")):
            curl = rad(20 + 4 * k) + rad(8) * np.sin(2 * np.pi * (0.7 * t) + k)
            spread = rad(3) * np.cos(2 * np.pi * 0.5 * t + k)
            put(f"{finger}1.{side}", np.stack([C.swing(c, s) for c, s in zip(curl, spread)]))
            put(f"{finger}2.{side}", C.rx(1.2 * curl))
            put(f"{finger}3.{side}", C.rx(0.8 * curl))
    # Torso: pelvis rotation and tilt with the gait, a lean into the squat; the spine counter-rotates.
    g = 2 * np.pi * phase
    pelvis = (
        C.ry(heading + walk * rad(6) * np.sin(g))
        @ C.rx(rad(4) + squat * rad(-12))
        @ C.rz(walk * rad(3) * np.sin(2 * g))
    )
    put("hips", pelvis)
    counter = -walk * rad(8) * np.sin(g)  # the spine only twists: its bend is the hips' (what keypoints show)
    put("spine", C.ry(counter / 3))
    for bone in ("spine1", "spine2"):
        put(bone, C.ry(counter / 3))
    put("neck", C.rx(rad(5) * np.sin(2 * np.pi * 0.3 * t)))
    put("head", C.ry(rad(25) * np.sin(2 * np.pi * 0.4 * t)) @ C.rx(rad(8) * np.sin(2 * np.pi * 0.9 * t)))
    # Root travel: forward along the heading while walking (integrated speed), bob, sway, squat and jump.
    speed = SPEED * walk
    forward = np.stack([np.sin(heading), -np.cos(heading)], axis=1)
    step = np.concatenate([[0.0], np.diff(t)])
    xy = np.cumsum(forward * (speed * step)[:, None], axis=0)
    ballistic = np.where(flight, 4.905 * (t - JUMP[0]) * (JUMP[1] - t), 0.0)
    height = walk * 0.02 * np.cos(4 * np.pi * phase) - squat * 0.27 + ballistic
    sway = walk * 0.02 * np.sin(g)
    xy = xy + np.stack([np.cos(heading), np.sin(heading)], axis=1) * sway[:, None]
    return local, np.concatenate([xy, height[:, None]], axis=1)


def truth(parse, frames: int = FRAMES) -> dict:
    """Everything a test needs: measurements, rest pose, world frames and heads, and the clean keypoints."""
    return C.truth(parse, walker_measurements(parse), lambda names: walker_motion(names, frames))
