"""Motion clean-up for keypoint tracks before the rig is solved (numpy only).

- ``one_euro``: the One-Euro filter (Casiez et al., CHI 2012): a low-pass whose cutoff rises with speed, so
  still joints lose their jitter while fast moves keep up (causal, as for live data);
- ``zero_phase_one_euro``: the same idea for a baked sequence: the speed is estimated centred in time and a
  forward and a backward pass are averaged, which cancels the filter's lag.
- ``lock_feet``: pins a foot in place while it is on the ground (slow and low), with a short blend in and out;
- ``smooth_track``: a weighted Whittaker smoother, which the solver runs on bone directions, twists and layouts
  in joint space (exact for motion quadratic in time, centred, O(frames)).
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


_THIRD_DIFFERENCE = (-1.0, 3.0, -3.0, 1.0)
_BLOCK = 64  # frames per dense block in the banded substitutions
_Blocks = list[tuple[int, int, np.ndarray, np.ndarray]]  # (start, stop, dense block of L, coupling)
_UNIFORM_FACTORS: dict[
    tuple[int, float], _Blocks
] = {}  # (frames, stiffness) -> factored blocks, unit weights


def smooth_track(y: np.ndarray, weights: np.ndarray | None = None, stiffness: float = 1e3) -> np.ndarray:
    """Weighted penalised least squares over frames (axis 0): the track ``x`` minimising
    ``sum_t w_t |x_t - y_t|^2 + stiffness * sum_t |third difference of x at t|^2`` (a Whittaker smoother).

    Why this and not a moving average: its null space is every quadratic in time, so a steadily accelerating
    joint angle comes out unbiased (no rounding of fast turns, no lag, centred by construction); the ends of a
    clip keep averaging over the frames they have instead of falling back to the raw sample; and ``weights``
    say how well each frame observes the quantity, so a badly conditioned frame (a nearly straight limb's bend
    plane) borrows from its neighbours instead of passing its noise on. Effective half-width ~ stiffness^(1/6)
    frames (1e3: ~3). Solved exactly by a banded Cholesky factorisation, O(frames), vectorised over channels.
    """
    y = np.asarray(y, dtype=np.float64)
    frames = y.shape[0]
    if frames < 4:
        return y.copy()
    if weights is None:
        w = np.ones(frames)
        key = (frames, float(stiffness))
        factor = _UNIFORM_FACTORS.get(key)
        if factor is None:
            if len(_UNIFORM_FACTORS) > 8:
                _UNIFORM_FACTORS.clear()
            factor = _UNIFORM_FACTORS[key] = _blocks(_factor(w, stiffness))
    else:
        w = np.asarray(weights, dtype=np.float64).reshape(frames)
        w = np.maximum(w, 1e-9 * max(float(w.max()), 1e-12))
        factor = _blocks(_factor(w, stiffness))
    rhs = (w.reshape(frames, *([1] * (y.ndim - 1))) * y).reshape(frames, -1)
    return _banded_solve(factor, rhs).reshape(y.shape)


def _factor(w: np.ndarray, stiffness: float) -> np.ndarray:
    """Banded lower Cholesky factor ``L[i, i - k]`` (frames, 4) of ``diag(w) + stiffness * D3^T D3``."""
    frames = w.shape[0]
    band = np.zeros((4, frames))  # band[k, i] = A[i, i + k]
    band[0] = w
    rows = frames - 3
    for a in range(4):
        for b in range(a, 4):
            band[b - a, a : a + rows] += stiffness * _THIRD_DIFFERENCE[a] * _THIRD_DIFFERENCE[b]
    return np.array(_banded_cholesky(band))


def _banded_cholesky(band: np.ndarray) -> list[list[float]]:
    """Lower Cholesky factor of a symmetric positive-definite matrix given by its upper bands
    (``band[k, i] = A[i, i + k]``): ``chol[i][k] = L[i, i - k]``. Plain floats: per-frame scalar work is faster
    in Python than in tiny numpy calls."""
    width, frames = band.shape
    a = band.tolist()
    chol: list[list[float]] = []
    for i in range(frames):
        row = [0.0] * width
        for k in range(width - 1, 0, -1):  # L[i, i-k], farthest first
            j = i - k
            if j < 0:
                continue
            s = a[k][j]
            for m in range(k + 1, width):  # L[i, i-m] * L[j, j-(m-k)]
                if j - (m - k) >= 0:
                    s -= row[m] * chol[j][m - k]
            row[k] = s / chol[j][0]
        row[0] = float(np.sqrt(max(a[0][i] - sum(r * r for r in row[1:]), 1e-300)))
        chol.append(row)
    return chol


def _dense_block(factor: np.ndarray, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``start:stop`` of L as a dense lower-triangular block and the (n, width-1) coupling to the
    ``width - 1`` rows before ``start``."""
    n, width = stop - start, factor.shape[1]
    block = np.zeros((n, n))
    coupling = np.zeros((n, width - 1))
    for k in range(width):
        rows = np.arange(max(start, k), stop)  # rows whose L[i, i-k] exists
        inside = rows - k >= start
        block[rows[inside] - start, rows[inside] - k - start] = factor[rows[inside], k]
        outside = rows[~inside]
        # column i-k lies before the block: index it from the block start, -1 = the row just before.
        coupling[outside - start, outside - k - start + width - 1] = factor[outside, k]
    return block, coupling


def _blocks(factor: np.ndarray) -> _Blocks:
    """The banded factor cut into dense blocks of ``_BLOCK`` frames for ``_banded_solve``."""
    starts = list(range(0, factor.shape[0], _BLOCK))
    stops = [*starts[1:], factor.shape[0]]
    return [(a, b, *_dense_block(factor, a, b)) for a, b in zip(starts, stops)]


def _banded_solve(blocks: _Blocks, rhs: np.ndarray) -> np.ndarray:
    """Solve ``L L^T x = rhs`` for the blocked banded factor; rhs (frames, channels). Each block is solved
    densely (one LAPACK call) and chained to its neighbours through the band's coupling."""
    width = blocks[0][3].shape[1] + 1
    z = np.empty_like(rhs)
    for a, b, block, coupling in blocks:
        acc = rhs[a:b] if a == 0 else rhs[a:b] - coupling @ z[a - width + 1 : a]
        z[a:b] = np.linalg.solve(block, acc)
    x = np.empty_like(rhs)
    for j in range(len(blocks) - 1, -1, -1):
        a, b, block, _ = blocks[j]
        acc = z[a:b].copy()
        if j + 1 < len(blocks):  # the next block's first rows reach back into this block's last width - 1
            later = blocks[j + 1][3]
            acc[-(width - 1) :] -= later.T @ x[b : b + later.shape[0]]
        x[a:b] = np.linalg.solve(block.T, acc)
    return x
