"""Ground truth for the humanoid-rig tests: a known body, a known rotation-driven motion, and its keypoints.

The motion only uses degrees of freedom that keypoints can observe (the solver's documented conventions):
hips and upper limbs and the head turn freely; the spine bends sideways and twists (shared by its bones);
clavicles lift; elbows and knees are hinges about their local X (kept bent by at least 15°) with the forearm's
twist (pronation) on the forearm; wrists, fingers and the neck swing without twisting; toes stay still.

This file is loaded by path (it is not a package) in two places: ``tests/blender_addon/test_rig_solver.py`` (plain numpy,
forward kinematics in ``rig_truths_common.py``) and the bpy check ``check_rig.py`` (forward kinematics by
Blender). ``parse`` is the add-on's ``parse`` package (imported by the caller, with or without bpy). It also
writes the bundles the bpy checks import (below).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location(
    "sapiens2_rig_truths_common", Path(__file__).with_name("rig_truths_common.py")
)
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)

FPS = 30.0


def truth_measurements(parse):
    """A 1.8 m person with layouts that are consistent with their own frame rules."""
    lengths = {
        "hips": 0.054,
        "spine": 0.1458,
        "spine1": 0.1458,
        "spine2": 0.1944,
        "neck": 0.11,
        "head": 0.14,
        "clavicle": 0.18,
        "upper_arm": 0.30,
        "forearm": 0.27,
        "thigh": 0.46,
        "shin": 0.43,
    }
    fingers = {"thumb": (0.045, 0.033, 0.028), "index": (0.045, 0.027, 0.022), "middle": (0.05, 0.031, 0.024)}
    fingers.update({"ring": (0.046, 0.029, 0.023), "pinky": (0.036, 0.022, 0.02)})
    hand = [
        [0, 0, 0],
        [0.012, 0.028, 0.026],
        [0.0, 0.092, 0.024],
        [0.0, 0.097, 0.0],
        [0.0, 0.092, -0.02],
        [0.0, 0.083, -0.038],
    ]
    foot = [[0.0, -0.065, 0.085], [-0.032, 0.185, 0.085], [0.034, 0.165, 0.085]]
    head = {
        "left_ear": np.array([0.076, 0.0, 0.0]),
        "right_ear": np.array([-0.076, 0.0, 0.0]),
        "left_eye": np.array([0.032, 0.03, 0.09]),
        "right_eye": np.array([-0.032, 0.03, 0.09]),
        "nose": np.array([0.0, -0.06, 0.115]),
    }
    return C.measurements(
        parse, lengths, fingers, 0.19, hand, foot, head, face=(11, 0.06, 0.07, -0.02, 0.095)
    )


def truth_motion(names: list[str], frames: int, seed: int = 3):
    """Local bone rotations (T, B, 3, 3) and the root (hips) location track (T, 3) in armature space."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / FPS
    local = np.tile(np.eye(3), (frames, len(names), 1, 1))
    put = C.poser(local, names)
    rx, ry, rz = C.rx, C.ry, C.rz

    def wave(amplitude, freq=None, phase=None):
        f = rng.uniform(0.2, 0.5) if freq is None else freq
        p = rng.uniform(0, 2 * np.pi) if phase is None else phase
        return amplitude * np.sin(2 * np.pi * f * t + p)

    def swings(ax, az):
        return np.stack([C.swing(a, b) for a, b in zip(ax, az)])

    put("hips", rz(wave(0.1)) @ rx(wave(0.25)) @ ry(wave(0.6)))
    bend, twist = wave(0.15), wave(0.35)
    put("spine", rz(bend) @ ry(twist / 3))
    for bone in ("spine1", "spine2"):
        put(bone, ry(twist / 3))
    put("neck", swings(wave(0.3), wave(0.2)))
    put("head", rx(wave(0.3)) @ ry(wave(0.6)) @ rz(wave(0.2)))
    for side, sign in (("L", 1.0), ("R", -1.0)):
        put(f"clavicle.{side}", rz(sign * (wave(0.12) + 0.05)))
        put(f"upper_arm.{side}", rx(wave(0.6)) @ ry(wave(0.7)) @ rz(wave(0.5)))
        elbow = 0.9 + wave(0.6)  # 0.3 .. 1.5 rad: always bent
        put(f"forearm.{side}", rx(elbow) @ ry(wave(0.8)))
        put(f"hand.{side}", swings(wave(0.5), wave(0.3)))
        for finger in ("thumb", "index", "middle", "ring", "pinky"):
            curl = 0.5 + wave(0.45)
            put(f"{finger}1.{side}", swings(curl, wave(0.15)))
            put(f"{finger}2.{side}", rx(1.1 * curl))
            put(f"{finger}3.{side}", rx(0.8 * curl))
        put(f"thigh.{side}", rx(wave(0.5)) @ ry(wave(0.3)) @ rz(wave(0.2)))
        put(f"shin.{side}", rx(0.8 + wave(0.5)))  # 0.3 .. 1.3 rad
        put(f"foot.{side}", rx(wave(0.3)) @ ry(wave(0.15)) @ rz(wave(0.15)))
    root = np.stack([wave(0.3, 0.2, 0.0), 3.0 + wave(0.4, 0.15, 1.0), 0.95 + wave(0.05, 0.5, 0.3)], axis=1)
    return local, root


def truth(parse, frames: int = 300) -> dict:
    """Measurements, rest pose, local rotations and root, world frames and heads, clean keypoints
    (``rig_truths_common.truth``; the root is absolute here)."""
    return C.truth(parse, truth_measurements(parse), lambda names: truth_motion(names, frames), lift=False)


# ------------------------------------------------------------------------------------- bundles for the bpy check

CAMERA = {"fx": 900.0, "fy": 900.0, "cx": 320.0, "cy": 240.0, "source": "user"}
BLENDER_TO_OPENCV = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])  # inverse of (x, y, z)cv -> (x, z, -y)


def _write_keypoint_sequence(folder, name: str, points_blender: np.ndarray, scores: np.ndarray,
                             fps: float = FPS) -> None:  # fmt: skip
    """A sequence written by the project's writer, then given these ``keypoints_3d`` (as a pointmap would)."""
    import json as _json

    from sapiens2_studio.core.formats.bundle import CaptureFrame, CapturePerson
    from sapiens2_studio.core.formats.sequence import write_sequence

    cv = points_blender @ BLENDER_TO_OPENCV.T
    frames = []
    for t in range(cv.shape[0]):
        uv = np.stack([CAMERA["fx"] * cv[t, :, 0] / cv[t, :, 2] + CAMERA["cx"],
                       CAMERA["fy"] * cv[t, :, 1] / cv[t, :, 2] + CAMERA["cy"]], axis=1)  # fmt: skip
        kps = np.concatenate([uv, scores[t, :, None]], axis=1).astype(np.float32)
        person = CapturePerson(bbox=(0.0, 0.0, 640.0, 480.0), keypoints=kps, track_id=0)
        frames.append(CaptureFrame(width=640, height=480, camera=dict(CAMERA), people=[person]))
    index = write_sequence(folder, name, frames, fps=fps)
    entries = _json.loads(index.read_text(encoding="utf-8"))["frames"]
    for t, entry in enumerate(entries):
        path = index.parent / entry["json"]
        doc = _json.loads(path.read_text(encoding="utf-8"))
        doc["people"][0]["keypoints_3d"] = cv[t].astype(np.float32).tolist()
        path.write_text(_json.dumps(doc), encoding="utf-8")


def write_truth_bundles(folder, parse, frames: int = 120) -> None:
    """``rigtruth`` (noisy, 5 % dropped) and ``rigstep`` (a still body stepping 30 cm sideways at frame 40, with
    jitter) sequences, plus ``rigtruth.npz`` with the clean motion the check rebuilds in Blender."""
    names = parse["names"]
    body = truth(parse, frames)
    clean = body["keypoints"]
    noisy, scores = C.corrupt(clean, noise=0.0015, drop=0.05)
    _write_keypoint_sequence(folder, "rigtruth", noisy, scores)
    np.savez(folder / "rigtruth.npz", local=body["local"], root=body["root"], keypoints=clean)
    still = np.repeat(clean[:1], frames, axis=0)
    still[40:, :, 0] += 0.3
    rng = np.random.default_rng(9)
    jittered = still + rng.normal(0.0, 0.003, still.shape)
    _write_keypoint_sequence(folder, "rigstep", jittered, np.full(still.shape[:2], 0.9))
    write_walk_bundle(folder, parse)
    write_degenerate_bundles(folder, len(names))


def write_degenerate_bundles(folder, points: int) -> None:
    """``rigtiny`` (random keypoints spread over a few micrometres) and ``rigpoint`` (every keypoint on one spot),
    5 m in front of the camera, 4 frames: bodies no rig can be sized from, which must still import (a fuzzed or
    broken capture), not fail on a bone Blender dropped for being too short."""
    rng = np.random.default_rng(28)
    centre = np.array([0.0, 5.0, 0.0])
    tiny = centre + rng.normal(0.0, 1e-5, (4, points, 3))
    _write_keypoint_sequence(folder, "rigtiny", tiny, np.full((4, points), 0.9))
    _write_keypoint_sequence(folder, "rigpoint", np.broadcast_to(centre, (4, points, 3)).copy(),
                             np.full((4, points), 0.9))  # fmt: skip


def write_walk_bundle(folder, parse) -> None:
    """``rigwalk``: the independent walking truth (``rig_truth_walk.py``: 300 frames at 29.97 fps) with 3 mm noise
    and 5 % dropped joints, 5 m in front of the camera; ``rigwalk.npz`` holds its clean keypoints, the bones' world
    rotations (in canonical bone order) and those canonical names."""
    walk = C.load("rig_truth_walk")
    body = walk.truth(parse)
    clean = body["keypoints"] + np.array([0.0, 5.0, 0.0])
    noisy, scores = C.corrupt(clean, noise=0.003, drop=0.05)
    _write_keypoint_sequence(folder, "rigwalk", noisy, scores, fps=walk.FPS)
    np.savez(folder / "rigwalk.npz", keypoints=clean, world=body["world"], names=np.array(body["rest"].names))
