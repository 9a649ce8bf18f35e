"""Ground truth for the humanoid-rig tests: a known body, a known rotation-driven motion, and its keypoints.

The motion only uses degrees of freedom that keypoints can observe (the solver's documented conventions):
hips and upper limbs and the head turn freely; the spine bends sideways and twists (shared by its bones);
clavicles lift; elbows and knees are hinges about their local X (kept bent by at least 15°) with the forearm's
twist (pronation) on the forearm; wrists, fingers and the neck swing without twisting; toes stay still.

This file is loaded by path (it is not a package) in two places: ``tests/test_rig_solver.py`` (plain numpy,
forward kinematics written here) and the bpy check ``check_rig.py`` (forward kinematics by Blender). ``parse``
is the add-on's ``parse`` package (imported by the caller, with or without bpy).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

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
    for finger, segs in fingers.items():
        lengths.update({f"{finger}{k}": v for k, v in zip((1, 2, 3), segs)})
    hand = np.array(
        [
            [0, 0, 0],
            [0.012, 0.028, 0.026],
            [0.0, 0.092, 0.024],
            [0.0, 0.097, 0.0],
            [0.0, 0.092, -0.02],
            [0.0, 0.083, -0.038],
        ]
    )
    foot = np.array([[0.0, -0.065, 0.085], [-0.032, 0.185, 0.085], [0.034, 0.165, 0.085]])
    rng = np.random.default_rng(11)
    head = {
        "left_ear": np.array([0.076, 0.0, 0.0]),
        "right_ear": np.array([-0.076, 0.0, 0.0]),
        "left_eye": np.array([0.032, 0.03, 0.09]),
        "right_eye": np.array([-0.032, 0.03, 0.09]),
        "nose": np.array([0.0, -0.06, 0.115]),
    }
    names = parse["names"]
    kp = parse["rig_keypoints"].KeypointIndex.from_names(names)
    for name in kp.face[5:]:
        t, r = rng.uniform(0, 2 * np.pi), np.sqrt(rng.uniform(0, 1))
        head[name] = np.array([0.06 * r * np.cos(t), 0.07 * r * np.sin(t) - 0.02, 0.095])
    m = parse["rig_skeleton"].Measurements(lengths=lengths, hip_width=0.19, hand_layout=hand, foot_layout=foot,
                                           head_layout=head)  # fmt: skip
    return parse["rig_measure"].canonical(m)


def _rx(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _ry(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _swing(ax, az):
    """A rotation about an axis in the local x-z plane (no twist about y)."""
    axis = np.array([ax, 0.0, az])
    angle = np.linalg.norm(axis)
    if angle < 1e-12:
        return np.eye(3)
    k = axis / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def truth_motion(names: list[str], frames: int, seed: int = 3):
    """Local bone rotations (T, B, 3, 3) and the root (hips) location track (T, 3) in armature space."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / FPS
    local = np.tile(np.eye(3), (frames, len(names), 1, 1))

    def wave(amplitude, freq=None, phase=None):
        f = rng.uniform(0.2, 0.5) if freq is None else freq
        p = rng.uniform(0, 2 * np.pi) if phase is None else phase
        return amplitude * np.sin(2 * np.pi * f * t + p)

    def put(name, rotations):
        if name in names:
            local[:, names.index(name)] = rotations

    put("hips", np.stack([_rz(a) @ _rx(b) @ _ry(c) for a, b, c in zip(wave(0.1), wave(0.25), wave(0.6))]))
    bend, twist = wave(0.15), wave(0.35)
    put("spine", np.stack([_rz(b) @ _ry(a / 3) for b, a in zip(bend, twist)]))
    for bone in ("spine1", "spine2"):
        put(bone, np.stack([_ry(a / 3) for a in twist]))
    put("neck", np.stack([_swing(a, b) for a, b in zip(wave(0.3), wave(0.2))]))
    put("head", np.stack([_rx(a) @ _ry(b) @ _rz(c) for a, b, c in zip(wave(0.3), wave(0.6), wave(0.2))]))
    for side, sign in (("L", 1.0), ("R", -1.0)):
        put(f"clavicle.{side}", np.stack([_rz(sign * e) for e in wave(0.12) + 0.05]))
        put(
            f"upper_arm.{side}",
            np.stack([_rx(a) @ _ry(b) @ _rz(c) for a, b, c in zip(wave(0.6), wave(0.7), wave(0.5))]),
        )
        elbow = 0.9 + wave(0.6)  # 0.3 .. 1.5 rad: always bent
        put(f"forearm.{side}", np.stack([_rx(e) @ _ry(p) for e, p in zip(elbow, wave(0.8))]))
        put(f"hand.{side}", np.stack([_swing(a, b) for a, b in zip(wave(0.5), wave(0.3))]))
        for finger in ("thumb", "index", "middle", "ring", "pinky"):
            curl = 0.5 + wave(0.45)
            put(f"{finger}1.{side}", np.stack([_swing(c, s) for c, s in zip(curl, wave(0.15))]))
            put(f"{finger}2.{side}", np.stack([_rx(c) for c in 1.1 * curl]))
            put(f"{finger}3.{side}", np.stack([_rx(c) for c in 0.8 * curl]))
        put(
            f"thigh.{side}",
            np.stack([_rx(a) @ _ry(b) @ _rz(c) for a, b, c in zip(wave(0.5), wave(0.3), wave(0.2))]),
        )
        put(f"shin.{side}", np.stack([_rx(k) for k in 0.8 + wave(0.5)]))  # 0.3 .. 1.3 rad
        put(
            f"foot.{side}",
            np.stack([_rx(a) @ _ry(b) @ _rz(c) for a, b, c in zip(wave(0.3), wave(0.15), wave(0.15))]),
        )
    root = np.stack([wave(0.3, 0.2, 0.0), 3.0 + wave(0.4, 0.15, 1.0), 0.95 + wave(0.05, 0.5, 0.3)], axis=1)
    return local, root


def forward_kinematics(rest, local: np.ndarray, root: np.ndarray):
    """World frames (T, B, 3, 3) and heads (T, B, 3) from local rotations (Blender's pose-bone rules)."""
    frames_, bones = local.shape[:2]
    world = np.empty((frames_, bones, 3, 3))
    heads = np.empty((frames_, bones, 3))
    for b in range(bones):
        p = rest.parent[b]
        if p < 0:
            world[:, b] = rest.frames[b] @ local[:, b]
            heads[:, b] = root if rest.names[b] == "hips" else rest.heads[b]
            continue
        delta = world[:, p] @ rest.frames[p].T
        world[:, b] = delta @ rest.frames[b] @ local[:, b]
        heads[:, b] = heads[:, p] + np.einsum("tij,j->ti", delta, rest.heads[b] - rest.heads[p])
        if rest.names[b] == "hips":
            heads[:, b] = root
    return world, heads


def keypoints_from_pose(parse, names: list[str], rest, world: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """(T, K, 3) keypoints of the posed body, Blender frame: joints at bone heads/tails, the rest carried by
    the bone they sit on (face points by the head, knuckles by the hand, toes by the foot)."""
    rk = parse["rig_keypoints"]
    frames_ = world.shape[0]
    out = np.zeros((frames_, len(names), 3))
    index = {n: i for i, n in enumerate(names)}
    delta = world @ np.swapaxes(rest.frames, -1, -2)[None]

    def carried(bone: str, rest_point: np.ndarray) -> np.ndarray:
        b = rest.index(bone)
        return heads[:, b] + np.einsum("tij,j->ti", delta[:, b], rest_point - rest.heads[b])

    def head_of(bone):
        return heads[:, rest.index(bone)]

    def tail_of(bone):
        b = rest.index(bone)
        return carried(bone, rest.tails[b])

    def put(name, value):
        if name in index:
            out[:, index[name]] = value

    put("neck", head_of("neck"))
    for name in names:
        marker = rest.markers.get(f"face:{name}")
        if marker is not None:
            put(name, carried("head", marker))
    for side in ("L", "R"):
        b = rk.body_names(side)
        put(b["shoulder"], head_of(f"upper_arm.{side}"))
        put(b["elbow"], head_of(f"forearm.{side}"))
        put(b["wrist"], head_of(f"hand.{side}"))
        put(b["hip"], head_of(f"thigh.{side}"))
        put(b["knee"], head_of(f"shin.{side}"))
        put(b["ankle"], head_of(f"foot.{side}"))
        for role in ("heel", "big_toe", "small_toe"):
            put(b[role], carried(f"foot.{side}", rest.markers[f"{role}.{side}"]))
        for finger in ("thumb", "index", "middle", "ring", "pinky"):
            for j in (1, 2, 3):
                put(rk.finger_joint(finger, j, side), head_of(f"{finger}{j}.{side}"))
            put(rk.finger_joint(finger, 4, side), tail_of(f"{finger}3.{side}"))
        word = rk.SIDE_WORD[side]
        put(
            f"{word}_olecranon",
            carried(f"forearm.{side}", rest.heads[rest.index(f"forearm.{side}")] + [0, 0.02, 0]),
        )
        put(
            f"{word}_cubital_fossa",
            carried(f"forearm.{side}", rest.heads[rest.index(f"forearm.{side}")] - [0, 0.02, 0]),
        )
        put(
            f"{word}_acromion",
            carried(f"upper_arm.{side}", rest.heads[rest.index(f"upper_arm.{side}")] + [0, 0, 0.03]),
        )
    return out


def corrupt(points: np.ndarray, noise: float, drop: float, seed: int = 5):
    """Gaussian noise (metres, per axis) and a fraction ``drop`` of joint-frames thrown off by 20 cm and given a
    low score: (noisy points, scores)."""
    rng = np.random.default_rng(seed)
    noisy = points + rng.normal(0.0, noise, points.shape)
    scores = rng.uniform(0.6, 0.95, points.shape[:2])
    dropped = rng.uniform(size=points.shape[:2]) < drop
    dropped[0] = dropped[-1] = False  # keep the ends, so interpolation (not extrapolation) is measured
    noisy[dropped] += rng.normal(0.0, 0.2, (int(dropped.sum()), 3))
    scores[dropped] = rng.uniform(0.0, 0.2, int(dropped.sum()))
    return noisy, scores


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
    m = truth_measurements(parse)
    rest = parse["rig_skeleton"].rest_pose(m)
    local, root = truth_motion(rest.names, frames)
    world, heads = forward_kinematics(rest, local, root)
    clean = keypoints_from_pose(parse, names, rest, world, heads)
    noisy, scores = corrupt(clean, noise=0.0015, drop=0.05)
    _write_keypoint_sequence(folder, "rigtruth", noisy, scores)
    np.savez(folder / "rigtruth.npz", local=local, root=root, keypoints=clean)
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
    spec = importlib.util.spec_from_file_location(
        "rig_truth_walk_for_bundle", Path(__file__).with_name("rig_truth_walk.py")
    )
    walk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(walk)
    truth = walk.walker(parse)
    clean = truth["keypoints"] + np.array([0.0, 5.0, 0.0])
    noisy, scores = corrupt(clean, noise=0.003, drop=0.05)
    _write_keypoint_sequence(folder, "rigwalk", noisy, scores, fps=walk.FPS)
    np.savez(
        folder / "rigwalk.npz", keypoints=clean, world=truth["world"], names=np.array(truth["rest"].names)
    )
