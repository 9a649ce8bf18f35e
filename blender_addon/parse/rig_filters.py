"""Motion clean-up for keypoint tracks before the rig is solved (numpy only).

- ``one_euro``: the One-Euro filter (Casiez et al., CHI 2012): a low-pass whose cutoff rises with speed, so
  still joints lose their jitter while fast moves keep up (causal, as for live data);
- ``zero_phase_one_euro``: the same idea for a baked sequence: the speed is estimated centred in time and a
  forward and a backward pass are averaged, which cancels the filter's lag.
- ``lock_feet``: pins a foot in place while it is on the ground (slow and low), with a short blend in and out.
Low-confidence samples are filled by ``poses.fill_gaps`` (linear in time) before filtering.
"""

from __future__ import annotations

import numpy as np

from .rig_keypoints import KeypointIndex, body_names


def _alpha(cutoff: np.ndarray, dt: float) -> np.ndarray:
    tau = 1.0 / (2.0 * np.pi * cutoff)
    return 1.0 / (1.0 + tau / dt)


def one_euro(
    x: np.ndarray, fps: float, min_cutoff: float = 1.5, beta: float = 2.0, d_cutoff: float = 1.0
) -> np.ndarray:
    """Causal One-Euro filter over axis 0 of (T, ..., 3) points; one cutoff per point from its 3D speed.

    Args:
        min_cutoff: cutoff (Hz) at rest; lower removes more jitter.
        beta: cutoff increase per m/s of speed (scene units/s); higher follows fast moves more closely.
        d_cutoff: cutoff (Hz) of the speed estimate.
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    if x.shape[0] == 0:
        return out
    dt = 1.0 / float(fps)
    a_d = _alpha(np.asarray(d_cutoff, dtype=np.float64), dt)
    out[0] = prev = x[0]
    speed = np.zeros_like(x[0])
    for t in range(1, x.shape[0]):
        speed = a_d * (x[t] - prev) / dt + (1.0 - a_d) * speed
        cutoff = min_cutoff + beta * np.linalg.norm(speed, axis=-1, keepdims=True)
        a = _alpha(cutoff, dt)
        prev = a * x[t] + (1.0 - a) * prev
        out[t] = prev
    return out


def _centred_speed(x: np.ndarray, fps: float, half: int) -> np.ndarray:
    """(T, ..., 1) speed from a central difference over +-``half`` frames (noise averages out, no lag)."""
    frames = x.shape[0]
    lo = np.clip(np.arange(frames) - half, 0, frames - 1)
    hi = np.clip(np.arange(frames) + half, 0, frames - 1)
    span = np.maximum(hi - lo, 1).reshape(-1, *([1] * (x.ndim - 1))) / fps
    return np.linalg.norm((x[hi] - x[lo]) / span, axis=-1, keepdims=True)


def _adaptive_pass(x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    out[0] = prev = x[0]
    for t in range(1, x.shape[0]):
        prev = alpha[t] * x[t] + (1.0 - alpha[t]) * prev
        out[t] = prev
    return out


def zero_phase_one_euro(
    x: np.ndarray, fps: float, min_cutoff: float = 1.5, beta: float = 20.0, speed_window: int = 3
) -> np.ndarray:
    """One-Euro for baked sequences: the cutoff follows a centred speed estimate (over +-``speed_window``
    frames, so jitter barely opens the filter while a real move does at once), and a forward and a backward
    pass are averaged so their lag and lead cancel: a step stays on its frame (it looks ahead: offline only)."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < 3:
        return x.copy()
    cutoff = min_cutoff + beta * _centred_speed(x, fps, speed_window)
    alpha = _alpha(cutoff, 1.0 / float(fps))
    forward = _adaptive_pass(x, alpha)
    backward = _adaptive_pass(x[::-1], alpha[::-1])[::-1]
    return 0.5 * (forward + backward)


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
