"""A curvature-adaptive smoother for the rig's clean-up (numpy only).

A symmetric low-pass leaves a constant-speed motion untouched: its bias comes from the motion's *curvature*
(second derivative), not its speed. The One-Euro filter of ``rig_filters`` opens with speed, so a part that turns
smoothly but fast (a head looking round) keeps all its noise. This smoother fits a local line under a Gaussian
window whose width is chosen per frame to balance that bias against the noise -- the mean-square-optimal width of
a local-linear fit, h^5 = gain s^2 / (2 sqrt(pi) x''^2), with x'' from a local cubic pilot (the largest within
+-2 frames, so a kink is not smoothed over) and s the track's own noise. Symmetric: a step stays on its frame.
Used for the head (``rig_solve``), where it measured best against an oracle (docs/blender.md).
"""

from __future__ import annotations

import numpy as np

BANK = np.geomspace(0.6, 12.0, 14)  # Gaussian widths (frames) the per-frame choice picks from


def _local_poly(x: np.ndarray, h: float, degree: int, weights: np.ndarray | None) -> np.ndarray:
    """(T, degree+1, C) coefficients of a local polynomial fit at every frame (Gaussian window of width ``h``
    frames, offsets in frames): value, first, second... derivative terms (not scaled by factorials)."""
    frames = x.shape[0]
    reach = int(np.ceil(3.5 * h))
    k = np.arange(-reach, reach + 1)
    idx = np.arange(frames)[:, None] + k[None, :]
    inside = (idx >= 0) & (idx < frames)
    idx = np.clip(idx, 0, frames - 1)
    w = np.exp(-0.5 * (k / h) ** 2)[None, :] * inside
    if weights is not None:
        w = w * np.maximum(weights[idx], 1e-6)
    design = np.stack([k.astype(np.float64) ** p for p in range(degree + 1)], axis=-1)  # (K, P)
    a = np.einsum("tk,kp,kq->tpq", w, design, design) + 1e-9 * np.eye(degree + 1)
    b = np.einsum("tk,kp,tkc->tpc", w, design, x[idx])
    return np.linalg.solve(a, b)


def noise_sigma(x: np.ndarray) -> float:
    """Per-component noise of a (T, C) track, from the median of its second differences (robust to motion)."""
    if x.shape[0] < 5:
        return 0.0
    c = x.shape[-1]
    r = x[1:-1] - 0.5 * (x[:-2] + x[2:])
    median_chi2 = c * (1.0 - 2.0 / (9.0 * c)) ** 3
    return float(np.sqrt(np.median(np.sum(r * r, axis=-1)) / (1.5 * median_chi2)))


def curvature_smooth(
    x: np.ndarray, weights: np.ndarray | None = None, pilot: float = 4.0, gain: float = 1.0
) -> np.ndarray:
    """(T, C) track smoothed by a local line under a per-frame Gaussian width (see the module docstring);
    ``weights`` (T,) in [0, 1]: how far each frame can be trusted; ``gain`` scales the noise (x32: windows twice
    as wide). Noise-free tracks come back as they are."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < 8:
        return x.copy()
    sigma = noise_sigma(x)
    if sigma <= 0:
        return x.copy()
    cubic = _local_poly(x, pilot, 3, weights)
    curvature = np.linalg.norm(2.0 * cubic[:, 2], axis=-1)  # |x''| per frame^2
    near = np.stack([np.roll(curvature, s) for s in range(-2, 3)]).max(axis=0)
    width = (gain * sigma**2 / (2.0 * np.sqrt(np.pi) * np.maximum(near, 1e-12) ** 2)) ** 0.2
    width = np.clip(width, BANK[0], BANK[-1])
    pick = np.abs(np.log(width)[:, None] - np.log(BANK)[None, :]).argmin(axis=1)
    out = np.empty_like(x)
    for j in np.unique(pick):
        rows = pick == j
        out[rows] = _local_poly(x, BANK[j], 1, weights)[rows, 0]
    return out
