"""Smoothers for the rig's clean-up beyond the speed-adaptive filter (numpy only): curvature-adaptive, and a
maximum-likelihood spline.

A symmetric low-pass leaves a constant-speed motion untouched: its bias comes from the motion's *curvature*
(second derivative), not its speed. The One-Euro filter of ``rig_filters`` opens with speed, so a part that turns
smoothly but fast (a head looking round) keeps all its noise. This smoother fits a local line under a Gaussian
window whose width is chosen per frame to balance that bias against the noise -- the mean-square-optimal width of
a local-linear fit, h^5 = gain s^2 / (2 sqrt(pi) x''^2), with x'' from a local cubic pilot (the largest within
+-2 frames, so a kink is not smoothed over) and s the track's own noise. Symmetric: a step stays on its frame.
Used for the head (``rig_solve``), where it measured best against an oracle (docs/blender.md).

``spline_smooth``: a track whose every frame's noise is known (a thigh's twist, read from a bend plane worth
sin^2 of the bend and from the foot) smoothed as a cubic smoothing spline in its Kalman / Rauch-Tung-Striebel form,
its one parameter the maximum-likelihood one for the track. Used for the thighs' and upper arms' twist
(``rig_solve.limb``).
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


# Process noises (rad^2 per frame^3) the likelihood picks the spline's from, a quarter decade apart; the walking,
# running and slow truths at 3 mm pick 1e-6 to 1e-4 for a thigh's twist.
SPLINE_GRID = np.geomspace(1e-12, 1e0, 49)


def _filter(z: np.ndarray, variance: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """Kalman filter of an integrated random walk (a value and its speed, white acceleration of variance ``q`` per
    frame^3), one filter per entry of (G,) ``q``, over (T,) readings of (T,) noise ``variance`` (inf: not seen).
    Returns the (G,) negative log-likelihood of the innovations (the first two frames, which only set a diffuse
    start, left out) and per frame the predicted and filtered (value, speed, p00, p01, p11)."""
    g = q.shape[0]
    seen = np.isfinite(variance)
    big = 1e6 * (1.0 + float(np.max(np.abs(z[seen]), initial=0.0)) ** 2)
    a, b = np.full(g, z[0] if seen[0] else 0.0), np.zeros(g)
    p00, p01, p11 = np.full(g, big), np.zeros(g), np.full(g, big)
    nll = np.zeros(g)
    steps = []
    for t in range(z.shape[0]):
        if t > 0:
            a, p00, p01, p11 = a + b, p00 + 2.0 * p01 + p11 + q / 3.0, p01 + p11 + q / 2.0, p11 + q
        predicted = (a, b, p00, p01, p11)
        if seen[t]:
            s = p00 + variance[t]
            k0, k1, v = p00 / s, p01 / s, z[t] - a
            if t >= 2:
                nll += np.log(s) + v * v / s
            a, b = a + k0 * v, b + k1 * v
            p00, p01, p11 = p00 - k0 * p00, p01 - k0 * p01, p11 - k1 * p01
        steps.append((predicted, (a, b, p00, p01, p11)))
    return nll, steps


def spline_smooth(z: np.ndarray, variance: np.ndarray) -> np.ndarray:
    """(T,) track ``z`` whose per-frame noise ``variance`` (T,) is known (inf: not seen), smoothed as an integrated
    random walk -- the Kalman / Rauch-Tung-Striebel form of a cubic smoothing spline -- whose one parameter, the
    acceleration's process noise, is the maximum-likelihood one for this track.

    Why: a frame is weighed by what it is worth (a nearly straight knee's bend plane next to nothing, a well-bent
    one a lot), a constant speed passes without bias, and a clip's first and last frames are estimated from one
    side as well as they can be. Noise-free (or too short) tracks come back as they are."""
    z = np.asarray(z, dtype=np.float64)
    variance = np.asarray(variance, dtype=np.float64)
    if z.shape[0] < 8 or not np.any(np.isfinite(variance) & (variance > 0)):
        return z.copy()
    variance = np.where(np.isfinite(variance), np.maximum(variance, 0.0), np.inf)
    nll, _ = _filter(z, variance, SPLINE_GRID)
    q = SPLINE_GRID[[int(np.argmin(nll))]]
    _, steps = _filter(z, variance, q)
    out = np.empty_like(z)
    value, speed = steps[-1][1][:2]
    out[-1] = value[0]
    for t in range(z.shape[0] - 2, -1, -1):
        (a, b, f00, f01, f11), ((pa, pb, p00, p01, p11), _) = steps[t][1], steps[t + 1]
        # Smoother gain C = P_filtered F^T P_predicted^-1 (F = [[1, 1], [0, 1]]), 2x2 in closed form.
        m00, m01, m10, m11 = f00 + f01, f01, f01 + f11, f11
        det = p00 * p11 - p01 * p01
        c00, c01 = (m00 * p11 - m01 * p01) / det, (m01 * p00 - m00 * p01) / det
        c10, c11 = (m10 * p11 - m11 * p01) / det, (m11 * p00 - m10 * p01) / det
        dv, ds = value - pa, speed - pb
        value, speed = a + c00 * dv + c01 * ds, b + c10 * dv + c11 * ds
        out[t] = value[0]
    return out
