"""What every humanoid-rig truth shares: what the keypoints *mean* and how a truth is measured.

- building blocks of a motion: rotations about one axis (vectorised over frames), a twist-free swing, minimum-jerk
  ramps and gait bumps;
- a body from its own numbers (``measurements``), forward kinematics with Blender's pose-bone rules, the keypoint
  layout on the posed bones (``keypoints_from_pose``) and a whole truth from a motion (``truth``);
- the corruption every test and benchmark applies (``corrupt``: noise and dropped joints);
- the measurement of a solve against a truth (``errors``), the ideal zero-phase low-pass and rotation vectors
  of the oracle experiments (``ideal_lowpass``, ``rotation_vector``), and the loaders the tests and benchmarks use (the
  add-on's bpy-free ``parse`` package and the truth modules, both by file path: tests are not a package and the
  repo is never put on ``sys.path``).

The truths themselves (``rig_truth.py``, ``rig_truth_walk.py``, ``rig_truth_run.py``) keep only their own body and
motion. ``parse`` is the caller's dict of the add-on's modules (with or without bpy) plus ``"names"``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RIG_MODULES = ("rig_keypoints", "rig_skeleton", "rig_measure", "rig_solve", "rig_pipeline", "rig_math",
               "rig_filters", "rig_gaps", "rig_smooth")  # fmt: skip


# ---------------------------------------------------------------------------------------------------- loaders


def keypoint_names() -> list[str]:
    """The 308 keypoint names of the project's layout."""
    doc = json.loads((REPO / "core" / "data" / "keypoints308.json").read_text(encoding="utf-8"))
    return doc["keypoint_names"]


def load_parse(name: str = "sapiens2_rig_truths_parse", modules: tuple[str, ...] = RIG_MODULES) -> dict:
    """The add-on's bpy-free ``parse`` package under a private name (its parent package imports bpy), as the
    ``parse`` dict the truths take."""
    folder = REPO / "blender_addon" / "parse"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    return {m: importlib.import_module(f"{name}.{m}") for m in modules} | {"names": keypoint_names()}


def load(stem: str):
    """A truth module of this folder (``rig_truth``, ``rig_truth_walk``, ``rig_truth_run``), loaded once."""
    name = f"sapiens2_rig_truths.{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# ------------------------------------------------------------------------------------------ motion building blocks


def _about(axis: int, a) -> np.ndarray:
    """Rotations about one coordinate axis, (..., 3, 3) for angles (...)."""
    a = np.asarray(a, dtype=np.float64)
    c, s = np.cos(a), np.sin(a)
    i, j = (axis + 1) % 3, (axis + 2) % 3
    out = np.zeros((*a.shape, 3, 3))
    out[..., axis, axis] = 1.0
    out[..., i, i], out[..., i, j], out[..., j, i], out[..., j, j] = c, -s, s, c
    return out


def rx(a) -> np.ndarray:
    """Rotations about x, (..., 3, 3) for angles (...)."""
    return _about(0, a)


def ry(a) -> np.ndarray:
    """Rotations about y."""
    return _about(1, a)


def rz(a) -> np.ndarray:
    """Rotations about z."""
    return _about(2, a)


def swing(ax: float, az: float) -> np.ndarray:
    """A rotation about an axis in the local x-z plane (no twist about y)."""
    axis = np.array([ax, 0.0, az])
    angle = np.linalg.norm(axis)
    if angle < 1e-12:
        return np.eye(3)
    k = axis / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx


def ramp(t, a, b):
    """Minimum-jerk 0 -> 1 between times a and b."""
    x = np.clip((t - a) / (b - a), 0.0, 1.0)
    return x**3 * (10 - 15 * x + 6 * x * x)


def bump(phase, centre, width):
    """A periodic Gaussian bump over the gait cycle (phase in cycles), peak 1."""
    d = (phase - centre + 0.5) % 1.0 - 0.5
    return np.exp(-0.5 * (d / width) ** 2)


def window(t, a, b, edge=0.25):
    """1 between times a and b, with minimum-jerk edges of ``edge`` seconds inside."""
    return ramp(t, a, a + edge) * (1.0 - ramp(t, b - edge, b))


def poser(local: np.ndarray, names: list[str]) -> Callable[[str, np.ndarray], None]:
    """``put(bone, rotations)``: sets a bone's local rotations (T, 3, 3) in ``local``; a bone the rest pose lacks
    is skipped."""

    def put(name: str, rotations: np.ndarray) -> None:
        if name in names:
            local[:, names.index(name)] = rotations

    return put


# ------------------------------------------------------------------------------------- the body and its keypoints


def measurements(parse, lengths: dict, fingers: dict, hip_width: float, hand, foot, head: dict, face: tuple):
    """A body from its own numbers: bone ``lengths``, three segments per finger, the hand, foot and named head
    layouts, and ``face`` = (seed, half width, half height, height offset, depth) of the random face points the
    layout has besides the named ones (uniform over an ellipse in front of the head)."""
    seed, wide, tall, lift, depth = face
    lengths = dict(lengths)
    for finger, segs in fingers.items():
        lengths.update({f"{finger}{k}": v for k, v in zip((1, 2, 3), segs)})
    head = dict(head)
    rng = np.random.default_rng(seed)
    kp = parse["rig_keypoints"].KeypointIndex.from_names(parse["names"])
    for name in kp.face[5:]:
        t, r = rng.uniform(0, 2 * np.pi), np.sqrt(rng.uniform(0, 1))
        head[name] = np.array([wide * r * np.cos(t), tall * r * np.sin(t) + lift, depth])
    m = parse["rig_skeleton"].Measurements(lengths=lengths, hip_width=hip_width, hand_layout=np.array(hand),
                                           foot_layout=np.array(foot), head_layout=head)  # fmt: skip
    return parse["rig_measure"].canonical(m)


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
        forearm = rest.heads[rest.index(f"forearm.{side}")]
        put(f"{word}_olecranon", carried(f"forearm.{side}", forearm + np.array([0, 0.02, 0])))
        put(f"{word}_cubital_fossa", carried(f"forearm.{side}", forearm - np.array([0, 0.02, 0])))
        upper_arm = rest.heads[rest.index(f"upper_arm.{side}")]
        put(f"{word}_acromion", carried(f"upper_arm.{side}", upper_arm + np.array([0, 0, 0.03])))
    return out


def truth(parse, m, motion: Callable[[list[str]], tuple], lift: bool = True) -> dict:
    """A whole truth: measurements ``m``, its rest pose, the local rotations and root ``motion(bone names)``
    gives, world frames and heads, and the clean keypoints. ``lift`` adds the rest pose's pelvis height to the
    root (a motion that gives the root relative to standing)."""
    rest = parse["rig_skeleton"].rest_pose(m)
    local, root = motion(rest.names)
    if lift:
        root = root + rest.heads[rest.index("hips")]
    world, heads = forward_kinematics(rest, local, root)
    keypoints = keypoints_from_pose(parse, parse["names"], rest, world, heads)
    return {"m": m, "rest": rest, "local": local, "root": root, "world": world, "heads": heads,
            "keypoints": keypoints}  # fmt: skip


# ------------------------------------------------------------------------------------- corruption and measurement


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


def posed_keypoints(parse, solved) -> np.ndarray:
    """(T, K, 3) keypoints where the solved rig puts them (the truth's layout on the solved bones)."""
    return keypoints_from_pose(
        parse, parse["names"], solved.rest, solved.motion.rotations, solved.motion.heads
    )


def errors(parse, truth: dict, solved) -> tuple[np.ndarray, np.ndarray]:
    """Per-keypoint position errors (T, K') in metres over the keypoints the rig needs, and per-bone rotation
    errors (T, B) in degrees."""
    names = parse["names"]
    used = [names.index(n) for n in parse["rig_keypoints"].required_names()]
    posed = posed_keypoints(parse, solved)
    position = np.linalg.norm(posed[:, used] - truth["keypoints"][:, used], axis=-1)
    rotation = np.degrees(parse["rig_math"].rotation_angle(truth["world"], solved.motion.rotations))
    return position, rotation


def ideal_lowpass(x: np.ndarray, cutoff: float, fps: float) -> np.ndarray:
    """Ideal zero-phase low-pass over axis 0 (mirrored ends): the oracle filter, with no bias a real one lacks."""
    frames = x.shape[0]
    padded = np.concatenate([x[::-1], x, x[::-1]])
    spectrum = np.fft.rfft(padded, axis=0)
    spectrum[np.fft.rfftfreq(3 * frames, 1.0 / fps) > cutoff] = 0.0
    return np.fft.irfft(spectrum, n=3 * frames, axis=0)[frames : 2 * frames]


def rotation_vector(r: np.ndarray) -> np.ndarray:
    """(T, 3) rotation vectors (radians) of (T, 3, 3) rotations below 180 deg."""
    c = np.clip((np.trace(r, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    a = np.arccos(c)
    axis = np.stack([r[:, 2, 1] - r[:, 1, 2], r[:, 0, 2] - r[:, 2, 0], r[:, 1, 0] - r[:, 0, 1]], axis=-1)
    return axis * (a / np.maximum(2.0 * np.sin(a), 1e-12))[:, None]
