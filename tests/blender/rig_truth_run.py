"""A running ground truth for the humanoid rig: the walking truth's person (``rig_truth_walk.py``) runs, slows down
and stops -- faster limbs than the walk (knees to 105 deg in swing, hips +-35 deg at 1.4 strides/s, limb content
up to ~7 Hz), a forward lean, arms bent 80-100 deg swinging +-35 deg, and a flight phase every step.

240 frames at 29.97 fps (8 s): 0-5 s running at 3.2 m/s, 5-6.5 s slowing to a stop, then standing (a still body
under noise). Held out: the clean-up was not tuned on it (``benchmarks/bench_rig_noise.py --truth run``).
Loaded by path, like the other truths; ``parse`` is the caller's dict of the add-on's modules.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

FPS = 29.97
FRAMES = 240
STRIDE_HZ = 1.4
SPEED = 3.2  # m/s while running


_spec = importlib.util.spec_from_file_location(
    "sapiens2_rig_truths_common", Path(__file__).with_name("rig_truths_common.py")
)
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)
W = C.load("rig_truth_walk")


def runner_motion(names: list[str], frames: int = FRAMES, fps: float = FPS):
    """Local bone rotations (T, B, 3, 3) and the hips' location (T, 3) (the rest height not added)."""
    t = np.arange(frames) / fps
    rad = np.radians
    local = np.tile(np.eye(3), (frames, len(names), 1, 1))
    run = 1.0 - C.ramp(t, 5.0, 6.5)  # 1 while running, 0 once stopped
    # The stride slows as the runner stops: phase is the integral of a falling cadence.
    cadence = STRIDE_HZ * (0.6 + 0.4 * run)
    phase = np.cumsum(cadence) / fps
    put = C.poser(local, names)

    for side, shift in (("L", 0.0), ("R", 0.5)):
        sign = 1.0 if side == "L" else -1.0
        p = phase + shift
        hip = run * (-rad(35) * np.cos(2 * np.pi * p) + rad(8) * (C.bump(p, 0.8, 0.08) - 0.3))
        knee = rad(6) + run * (rad(25) * C.bump(p, 0.12, 0.05) + rad(100) * C.bump(p, 0.68, 0.09))
        ankle = run * (
            rad(15) * C.bump(p, 0.3, 0.06) - rad(25) * C.bump(p, 0.5, 0.05) + rad(6) * np.sin(2 * np.pi * p)
        )
        abduction = sign * (rad(4) * run * np.sin(2 * np.pi * p) + rad(3))
        hip_turn = rad(5) * run * np.sin(2 * np.pi * p + 0.3)
        put(f"thigh.{side}", C.rx(hip) @ C.ry(hip_turn) @ C.rz(abduction))
        put(f"shin.{side}", C.rx(knee))
        put(f"foot.{side}", C.rx(-ankle) @ C.rz(sign * rad(4) * np.sin(2 * np.pi * p)))
        swing = run * rad(35) * np.cos(2 * np.pi * p)
        put(f"clavicle.{side}", C.rz(sign * rad(5) * (1 + run * np.sin(4 * np.pi * p))))
        put(
            f"upper_arm.{side}",
            C.rz(-sign * rad(75)) @ C.rx(-swing) @ C.ry(rad(10) * run * np.sin(2 * np.pi * p)),
        )
        elbow = rad(20) + run * (rad(70) + rad(15) * np.cos(2 * np.pi * p + 0.5))
        put(f"forearm.{side}", C.rx(elbow) @ C.ry(sign * rad(15)))
        put(
            f"hand.{side}",
            C.rx(rad(12) * run * np.sin(2 * np.pi * p + 1.0)) @ C.rz(rad(5) * np.cos(2 * np.pi * p)),
        )
        for k, finger in enumerate(("thumb", "index", "middle", "ring", "pinky")):
            curl = rad(35 + 5 * k) + rad(6) * np.sin(2 * np.pi * 0.6 * t + k)
            put(f"{finger}1.{side}", np.stack([C.swing(c, 0.0) for c in curl]))
            put(f"{finger}2.{side}", C.rx(1.2 * curl))
            put(f"{finger}3.{side}", C.rx(0.8 * curl))
    g = 2 * np.pi * phase
    put(
        "hips",
        C.ry(run * rad(8) * np.sin(g)) @ C.rx(rad(3) + run * rad(10)) @ C.rz(run * rad(4) * np.sin(2 * g)),
    )
    counter = -run * rad(12) * np.sin(g)
    for bone in ("spine", "spine1", "spine2"):
        put(bone, C.ry(counter / 3))
    put("neck", C.rx(-run * rad(6)))
    put("head", C.ry(rad(10) * np.sin(2 * np.pi * 0.3 * t)) @ C.rx(rad(4) * run * np.sin(2 * g)))
    speed = SPEED * run
    step = np.concatenate([[0.0], np.diff(t)])
    forward = np.cumsum(speed * step)
    flight = run * 0.05 * np.abs(np.sin(2 * g))  # a flight every step, two a stride
    height = flight - run * 0.06
    return local, np.stack([np.zeros(frames), -forward, height], axis=1)


def truth(parse, frames: int = FRAMES) -> dict:
    """Measurements, rest pose, world frames and heads, and the clean keypoints (as ``rig_truth_walk.truth``)."""
    return C.truth(parse, W.walker_measurements(parse), lambda names: runner_motion(names, frames))
