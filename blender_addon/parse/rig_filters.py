"""Motion clean-up for the humanoid rig (numpy only).

- ``CleanUp`` + ``adaptive_smooth``: the solve's optional clean-up, a zero-phase One-Euro-style smoother run on
  joint-space tracks (bone directions and rotations as their parent sees them, twists, the pelvis). Its cut-off
  follows the local speed of the motion, so a still joint loses its jitter while a fast one (a 4 Hz knee, a
  2 Hz forearm twist, a jump) passes through nearly untouched; nothing is filtered unless the user asks;
- ``fill_weak``: frames that barely observe a quantity (a straight limb's bend plane) take it from the
  frames around them, linearly in time -- gap filling, not filtering;
- ``lock_feet``: finds ground contacts (slow and low) and pins a foot's keypoints there, with a short blend;
  the solver then holds the solved leg on them (two-bone IK, ``rig_solve``).
Low-confidence samples are filled by ``poses.fill_gaps`` (linear in time) before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .rig_keypoints import KeypointIndex, body_names

# Defaults of the clean-up at strength 1 (measured on tests/blender/rig_truth_walk.py, see
# tests/blender_addon/test_rig_solver.py):
# still joints are filtered at MIN_CUTOFF; every rad/s of joint speed in the surrounding ENVELOPE frames opens the
# cut-off by BETA, which keeps a +-20 deg, 4 Hz limb motion within 5 % of its amplitude.
MIN_CUTOFF = 1.0  # Hz
BETA = 10.0  # Hz per rad/s
ENVELOPE = 3  # frames either side: the speed that decides a frame's cut-off is the highest among them
# A weighted track starts each pass from a local line through its first END_FIT frames, not from its first
# (one-sided, so twice as noisy) frame: slow truth at 3 mm, thighs 5.4 / 6.3 -> 5.1 / 5.9 deg (seeds 12, 13, the
# last frame). Unweighted tracks keep their first frame (on the neck it made seed 8's first frame worse).
END_FIT = 10
SPEED_GAIN = 84.0 / 1024.0  # sum of squares of track_speed's kernel (binomial, then centred difference)


@dataclass(frozen=True)
class CleanUp:
    """How strongly the solve cleans up its tracks: ``min_cutoff`` (Hz) for a still joint, and the cut-off's rise
    ``beta`` (Hz) per rad/s of joint speed. ``from_strength`` scales both from one user setting."""

    min_cutoff: float = MIN_CUTOFF
    beta: float = BETA
    envelope: int = ENVELOPE

    @classmethod
    def from_strength(cls, strength: float) -> CleanUp | None:
        """Strength 1 = the defaults, 2 = twice the smoothing (half the cut-offs), 0 = no clean-up (None)."""
        if strength <= 0:
            return None
        return cls(min_cutoff=MIN_CUTOFF / strength, beta=BETA / strength)


def _alpha(cutoff: np.ndarray, fps: float) -> np.ndarray:
    tau = 1.0 / (2.0 * np.pi * cutoff)
    return 1.0 / (1.0 + tau * fps)


def _pass(x: np.ndarray, alpha: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """First-order recursive low-pass along axis 0 with a per-frame (and per-track) gain. It starts from the first
    frame or, with (T,) ``weights``, from a weighted line through the first ``END_FIT`` frames (the weighted mean
    of the first frames that gather one frame's weight in a shorter clip): a clip that ends on a barely-seen
    quantity (a straight knee's twist) must not start from that guess, nor from one noisy frame."""
    out = np.empty_like(x)
    prev = x[0]
    n = min(END_FIT, x.shape[0])
    if weights is not None and n >= 3:
        w = np.maximum(np.asarray(weights[:n], dtype=np.float64), 1e-6)
        design = np.stack([np.ones(n), np.arange(n, dtype=np.float64)], axis=-1) * w[:, None]
        target = (x[:n] * w.reshape(-1, *([1] * (x.ndim - 1)))).reshape(n, -1)
        prev = np.linalg.lstsq(design, target, rcond=None)[0][0].reshape(x.shape[1:])  # the line at frame 0
        prev = prev + alpha[0] * (x[0] - prev)
    elif weights is not None and weights[0] < 1.0:
        gathered = np.cumsum(weights) - weights < 1.0  # the first frame always counts
        w = np.where(gathered, weights, 0.0)
        w[0] = max(w[0], 1e-9)
        prev = np.tensordot(w, x, axes=(0, 0)) / w.sum()
        prev = prev + alpha[0] * (x[0] - prev)
    out[0] = prev
    for t in range(1, x.shape[0]):
        prev = prev + alpha[t] * (x[t] - prev)
        out[t] = prev
    return out


def noise_speed(x: np.ndarray, fps: float) -> np.ndarray:
    """(1, ..., 1) the rms speed ``track_speed`` reads from each (T, ..., C) track's noise alone. The noise is read
    from the track itself, robustly: the median of its second differences (a smooth motion adds next to nothing to
    them, a few fast frames do not move a median), over what a white noise gives them."""
    if x.shape[0] < 5:
        return np.zeros((1, *x.shape[1:-1], 1))
    c = x.shape[-1]
    r = x[1:-1] - 0.5 * (x[:-2] + x[2:])  # white noise of variance s^2 per component: 1.5 s^2
    median_chi2 = c * (1.0 - 2.0 / (9.0 * c)) ** 3  # Wilson-Hilferty
    variance = np.median(np.sum(r * r, axis=-1, keepdims=True), axis=0, keepdims=True) / (1.5 * median_chi2)
    return np.sqrt(SPEED_GAIN * c * variance) * fps


def track_speed(
    x: np.ndarray, fps: float, envelope: int = ENVELOPE, floor: np.ndarray | float = 0.0
) -> np.ndarray:
    """(T, ..., 1) speed of (T, ..., C) tracks (norm over C per second, centred difference over +-1 frame), as the
    highest value within +-``envelope`` frames: a sine's speed drops to zero at its turns, its envelope does not,
    so the filter stays open through the peaks of a fast motion instead of rounding them. ``floor`` is taken off
    each frame's speed (in quadrature) before the envelope: what noise alone would read."""
    frames = x.shape[0]
    t = np.arange(frames)
    near = [x[np.clip(t + k, 0, frames - 1)] for k in (-2, -1, 0, 1, 2)]
    calm = (
        near[0] + 4 * near[1] + 6 * near[2] + 4 * near[3] + near[4]
    ) / 16.0  # binomial: noise out, motion in
    lo, hi = np.clip(t - 1, 0, frames - 1), np.clip(t + 1, 0, frames - 1)
    span = np.maximum(hi - lo, 1).reshape(-1, *([1] * (x.ndim - 1))) / fps
    speed = np.linalg.norm((calm[hi] - calm[lo]) / span, axis=-1, keepdims=True)
    speed = np.sqrt(np.maximum(speed**2 - np.square(floor), 0.0))
    out = speed.copy()
    for k in range(1, envelope + 1):
        out[k:] = np.maximum(out[k:], speed[:-k])
        out[:-k] = np.maximum(out[:-k], speed[k:])
    return out


def adaptive_smooth(
    x: np.ndarray,
    fps: float,
    cleanup: CleanUp,
    weights: np.ndarray | None = None,
    speed_scale: float = 1.0,
    noise_floor: float = 0.0,
) -> np.ndarray:
    """Zero-phase speed-adaptive smoothing over axis 0 of (T, ..., C) tracks (C = the components of one quantity:
    a direction, a flattened rotation, a (cos, sin) twist, a position).

    The cut-off of each frame is ``min_cutoff + beta * speed`` (``track_speed`` x ``speed_scale``, in rad/s); a
    forward and a backward One-Euro pass are averaged, so their lag and lead cancel (a step stays on its frame).
    ``weights`` (T,) in [0, 1] say how well a frame observes the quantity: a frame of weight 0 takes its value from
    its neighbours only. ``noise_floor`` > 0: a speed below that many times what the track's own noise reads
    (``noise_speed``) counts as still -- for a quantity whose noise is large against its motion (a 10 cm neck
    under 3 mm noise moves 2 deg a frame from noise alone, which would keep the cut-off open everywhere)."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < 3:
        return x.copy()
    floor = noise_floor * noise_speed(x, fps) if noise_floor > 0 else 0.0
    speed = track_speed(x, fps, cleanup.envelope, floor) * speed_scale
    alpha = _alpha(cleanup.min_cutoff + cleanup.beta * speed, fps)
    if weights is not None:
        alpha = alpha * np.asarray(weights, dtype=np.float64).reshape(-1, *([1] * (x.ndim - 1)))
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    forward = _pass(x, alpha, w)
    backward = _pass(x[::-1], alpha[::-1], None if w is None else w[::-1])[::-1]
    return 0.5 * (forward + backward)


def fill_weak(x: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """(T, C) track whose frames outside ``ok`` (T,) are interpolated linearly in time from the frames in it (the
    ends hold the nearest); unchanged when every frame or none is ``ok``."""
    ok = np.asarray(ok, dtype=bool)
    if ok.all() or not ok.any():
        return np.array(x, dtype=np.float64, copy=True)
    out = np.array(x, dtype=np.float64, copy=True)
    frames = np.arange(x.shape[0])
    for c in range(x.shape[1]):
        out[~ok, c] = np.interp(frames[~ok], frames[ok], x[ok, c])
    return out


def contact_runs(flags: np.ndarray, min_frames: int) -> list[tuple[int, int]]:
    """[start, end] (inclusive) of every run of True at least ``min_frames`` long."""
    runs, start = [], None
    for t, on in enumerate([*list(flags), False]):
        if on and start is None:
            start = t
        elif not on and start is not None:
            if t - start >= min_frames:
                runs.append((start, t - 1))
            start = None
    return runs


def contact_weights(runs: list[tuple[int, int]], frames: int, blend: int = 3) -> np.ndarray:
    """(T,) how firmly a foot is planted: 1 on its contact runs, fading linearly to 0 over ``blend`` frames on
    either side (the same fade ``lock_feet`` gives the keypoints), 0 elsewhere."""
    weight = np.zeros(frames)
    for a, b in runs:
        weight[a : b + 1] = 1.0
        for k in range(1, blend + 1):
            fade = 1.0 - k / (blend + 1.0)
            for t in (a - k, b + k):
                if 0 <= t < frames:
                    weight[t] = max(weight[t], fade)
    return weight


def lock_feet(
    tracks: np.ndarray,
    kp: KeypointIndex,
    fps: float,
    up: np.ndarray,
    *,
    max_speed: float = 0.25,
    max_height: float = 0.04,
    min_frames: int = 3,
    blend: int = 3,
) -> tuple[np.ndarray, dict[str, list[tuple[int, int]]]]:
    """Tracks with each foot (ankle, heel, toes) held still during ground contact, and the contact runs.

    Contact: the foot's centre moves slower than ``max_speed`` (units/s) and its lowest point is within
    ``max_height`` of the ground (the 5th percentile of all foot heights along ``up``). A held foot sits at its
    mean position over the contact (each point at its own mean); the offset fades out over ``blend`` frames on either side."""
    out = np.array(tracks, dtype=np.float64, copy=True)
    frames = out.shape[0]
    up = np.asarray(up, dtype=np.float64) / np.linalg.norm(up)
    feet = {s: [kp.index[body_names(s)[r]] for r in ("ankle", "heel", "big_toe", "small_toe")] for s in "LR"}
    heights = {s: (out[:, idx] @ up).min(axis=1) for s, idx in feet.items()}
    ground = np.percentile(np.concatenate(list(heights.values())), 5)
    runs_by_side: dict[str, list[tuple[int, int]]] = {}
    for side, idx in feet.items():
        centre = out[:, idx].mean(axis=1)
        speed = np.zeros(frames)
        if frames > 1:
            speed = np.linalg.norm(np.gradient(centre, axis=0), axis=-1) * fps
        contact = (speed < max_speed) & (heights[side] < ground + max_height)
        runs = contact_runs(contact, min_frames)
        points = out[:, idx]
        offset = np.zeros_like(points)
        weight = np.zeros(frames)
        for a, b in runs:
            anchor = points[a : b + 1].mean(axis=0)  # each point held at its own mean: no slide, no jitter
            offset[a : b + 1] = anchor - points[a : b + 1]
            weight[a : b + 1] = 1.0
            for k in range(1, blend + 1):
                fade = 1.0 - k / (blend + 1.0)
                for t, edge in ((a - k, a), (b + k, b)):
                    if 0 <= t < frames and weight[t] < fade:
                        offset[t] = fade * (anchor - points[edge])
                        weight[t] = fade
        out[:, idx] += offset
        runs_by_side[side] = runs
    return out, runs_by_side
