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

Loaded by path (not a package), like ``rig_truth.py``; ``parse`` is the caller's dict of the add-on's modules.
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


def _rig_truth():
    spec = importlib.util.spec_from_file_location(
        "rig_truth_for_walk", Path(__file__).with_name("rig_truth.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RT = _rig_truth()
forward_kinematics = RT.forward_kinematics
keypoints_from_pose = RT.keypoints_from_pose
corrupt = RT.corrupt


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
    for finger, segs in fingers.items():
        lengths.update({f"{finger}{k}": v for k, v in zip((1, 2, 3), segs)})
    hand = np.array(
        [
            [0, 0, 0],
            [0.01, 0.026, 0.024],
            [0.0, 0.086, 0.022],
            [0.0, 0.09, 0.0],
            [0.0, 0.086, -0.019],
            [0.0, 0.077, -0.035],
        ]
    )
    foot = np.array([[0.0, -0.06, 0.078], [-0.03, 0.17, 0.078], [0.031, 0.152, 0.078]])
    head = {
        "left_ear": np.array([0.071, 0.0, 0.0]),
        "right_ear": np.array([-0.071, 0.0, 0.0]),
        "left_eye": np.array([0.03, 0.028, 0.085]),
        "right_eye": np.array([-0.03, 0.028, 0.085]),
        "nose": np.array([0.0, -0.055, 0.108]),
    }
    rng = np.random.default_rng(23)
    kp = parse["rig_keypoints"].KeypointIndex.from_names(parse["names"])
    for name in kp.face[5:]:
        t, r = rng.uniform(0, 2 * np.pi), np.sqrt(rng.uniform(0, 1))
        head[name] = np.array([0.055 * r * np.cos(t), 0.065 * r * np.sin(t) - 0.02, 0.09])
    m = parse["rig_skeleton"].Measurements(lengths=lengths, hip_width=0.21, hand_layout=hand, foot_layout=foot,
                                           head_layout=head)  # fmt: skip
    return parse["rig_measure"].canonical(m)


def _rx(a):
    a = np.asarray(a, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    out = np.zeros((*a.shape, 3, 3))
    out[..., 0, 0] = 1.0
    out[..., 1, 1], out[..., 1, 2], out[..., 2, 1], out[..., 2, 2] = c, -s, s, c
    return out


def _ry(a):
    a = np.asarray(a, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    out = np.zeros((*a.shape, 3, 3))
    out[..., 1, 1] = 1.0
    out[..., 0, 0], out[..., 0, 2], out[..., 2, 0], out[..., 2, 2] = c, s, -s, c
    return out


def _rz(a):
    a = np.asarray(a, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    out = np.zeros((*a.shape, 3, 3))
    out[..., 2, 2] = 1.0
    out[..., 0, 0], out[..., 0, 1], out[..., 1, 0], out[..., 1, 1] = c, -s, s, c
    return out


def _ramp(t, a, b):
    """Minimum-jerk 0 -> 1 between times a and b."""
    x = np.clip((t - a) / (b - a), 0.0, 1.0)
    return x**3 * (10 - 15 * x + 6 * x * x)


def _bump(phase, centre, width):
    """A periodic Gaussian bump over the gait cycle (phase in cycles), peak 1."""
    d = (phase - centre + 0.5) % 1.0 - 0.5
    return np.exp(-0.5 * (d / width) ** 2)


def _window(t, a, b, edge=0.25):
    return _ramp(t, a, a + edge) * (1.0 - _ramp(t, b - edge, b))


def walker_motion(names: list[str], frames: int = FRAMES, fps: float = FPS):
    """Local bone rotations (T, B, 3, 3), the hips' location (T, 3) and the rest height of the pelvis it assumes.

    The pelvis starts above (0, 0); it walks towards -Y (the direction the rest pose faces), turns and comes back."""
    t = np.arange(frames) / fps
    rad = np.radians
    local = np.tile(np.eye(3), (frames, len(names), 1, 1))
    walk = 1.0 - _ramp(t, 2.8, 3.3) + _ramp(t, 6.0, 6.5)
    heading = np.pi * _ramp(t, *TURN)
    squat = _window(t, 4.6, 5.25, edge=0.3) + _window(t, 5.55, 6.05, edge=0.2) * 0.8
    flight = (t > JUMP[0]) & (t < JUMP[1])
    phase = GAIT_HZ * t

    def put(name, rotations):
        if name in names:
            local[:, names.index(name)] = rotations

    sides = {"L": 0.0, "R": 0.5}
    for side, shift in sides.items():
        sign = 1.0 if side == "L" else -1.0
        p = phase + shift
        # Hip flexion (thigh forward is a negative x turn in the leg frame), knee, ankle: gait-like waveforms.
        hip = walk * (-rad(22) * np.cos(2 * np.pi * p) + rad(4) * (_bump(p, 0.85, 0.07) - 0.3))
        knee = rad(5) + walk * (rad(12) * _bump(p, 0.15, 0.06) + rad(57) * _bump(p, 0.72, 0.1))
        ankle = walk * (
            rad(10) * _bump(p, 0.45, 0.08) - rad(16) * _bump(p, 0.62, 0.05) + rad(4) * np.sin(2 * np.pi * p)
        )
        hip = hip - squat * rad(85) + flight * rad(-10)
        knee = knee + squat * rad(90)
        ankle = ankle + squat * rad(-25)
        abduction = sign * (rad(3) * walk * np.sin(2 * np.pi * p) + rad(4))
        hip_turn = rad(3) * walk * np.sin(2 * np.pi * p + 0.4)  # thigh twist, seen through the knee's bend
        put(f"thigh.{side}", _rx(hip) @ _ry(hip_turn) @ _rz(abduction))
        put(f"shin.{side}", _rx(knee))
        put(f"foot.{side}", _rx(-ankle) @ _rz(sign * rad(3) * np.sin(2 * np.pi * p)))
        # Arms hang (lowered 75 deg from the T-pose), swing against the legs, elbows 15-45 deg.
        swing = walk * rad(20) * np.cos(2 * np.pi * p) + _window(t, 4.6, 5.6, 0.2) * rad(-60)
        lower = -sign * rad(75) + sign * _window(t, 5.0, 5.6, 0.2) * rad(40)
        put(f"clavicle.{side}", _rz(sign * rad(4) * (1 + walk * np.sin(4 * np.pi * p))))
        put(f"upper_arm.{side}", _rz(lower) @ _rx(-swing) @ _ry(rad(8) * np.sin(2 * np.pi * p)))
        elbow = rad(15) + rad(25) * (0.5 + 0.5 * walk * np.cos(2 * np.pi * p + 0.6)) + squat * rad(30)
        twist = _window(t, *TWIST, 0.3) * rad(90) * np.sin(2 * np.pi * 2.0 * (t - TWIST[0]))
        put(f"forearm.{side}", _rx(elbow) @ _ry(sign * (rad(10) + twist)))
        put(f"hand.{side}", _rx(rad(10) * np.sin(2 * np.pi * p + 1.0)) @ _rz(rad(6) * np.cos(2 * np.pi * p)))
        for k, finger in enumerate(("thumb", "index", "middle", "ring", "pinky")):
            curl = rad(20 + 4 * k) + rad(8) * np.sin(2 * np.pi * (0.7 * t) + k)
            spread = rad(3) * np.cos(2 * np.pi * 0.5 * t + k)
            put(f"{finger}1.{side}", np.stack([RT._swing(c, s) for c, s in zip(curl, spread)]))
            put(f"{finger}2.{side}", _rx(1.2 * curl))
            put(f"{finger}3.{side}", _rx(0.8 * curl))
    # Torso: pelvis rotation and tilt with the gait, a lean into the squat; the spine counter-rotates.
    g = 2 * np.pi * phase
    pelvis = (
        _ry(heading + walk * rad(6) * np.sin(g))
        @ _rx(rad(4) + squat * rad(-12))
        @ _rz(walk * rad(3) * np.sin(2 * g))
    )
    put("hips", pelvis)
    counter = -walk * rad(8) * np.sin(g)  # the spine only twists: its bend is the hips' (what keypoints show)
    put("spine", _ry(counter / 3))
    for bone in ("spine1", "spine2"):
        put(bone, _ry(counter / 3))
    put("neck", _rx(rad(5) * np.sin(2 * np.pi * 0.3 * t)))
    put("head", _ry(rad(25) * np.sin(2 * np.pi * 0.4 * t)) @ _rx(rad(8) * np.sin(2 * np.pi * 0.9 * t)))
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


def walker(parse, frames: int = FRAMES):
    """Everything a test needs: measurements, rest pose, world frames and heads, and the clean keypoints."""
    m = walker_measurements(parse)
    rest = parse["rig_skeleton"].rest_pose(m)
    local, root = walker_motion(rest.names, frames)
    root = root + rest.heads[rest.index("hips")]
    world, heads = forward_kinematics(rest, local, root)
    keypoints = keypoints_from_pose(parse, parse["names"], rest, world, heads)
    return {"m": m, "rest": rest, "local": local, "root": root, "world": world, "heads": heads,
            "keypoints": keypoints}  # fmt: skip
