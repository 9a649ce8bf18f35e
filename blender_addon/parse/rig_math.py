"""Batched rotation helpers for the humanoid rig solver (numpy only; every function works on (..., 3) stacks).

Rotations are 3x3 matrices whose columns are a bone's x, y, z axes (Blender's convention: y runs head -> tail).
"""

from __future__ import annotations

import numpy as np

EPS = 1e-9


def normalize(v: np.ndarray) -> np.ndarray:
    """Unit vectors; zero vectors stay zero (callers blend in a fallback where that matters)."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, EPS)


def reject(v: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The part of ``v`` perpendicular to the unit vector ``axis``."""
    return v - np.sum(v * axis, axis=-1, keepdims=True) * axis


def frame_from_yx(y: np.ndarray, x_hint: np.ndarray) -> np.ndarray:
    """Right-handed frame with y exactly along ``y`` and x as close to ``x_hint`` as possible (Gram-Schmidt)."""
    y = normalize(y)
    x = normalize(reject(x_hint, y))
    z = np.cross(x, y)
    return np.stack([x, y, z], axis=-1)


def frame_from_yz(y: np.ndarray, z_hint: np.ndarray) -> np.ndarray:
    """Right-handed frame with y exactly along ``y`` and z as close to ``z_hint`` as possible."""
    y = normalize(y)
    z = normalize(reject(z_hint, y))
    x = np.cross(y, z)
    return np.stack([x, y, z], axis=-1)


def axis_angle(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotations by ``angle`` (radians) about unit ``axis`` (Rodrigues)."""
    axis = normalize(np.asarray(axis, dtype=np.float64))
    angle = np.asarray(angle, dtype=np.float64)[..., None, None]
    x, y, z = axis[..., 0], axis[..., 1], axis[..., 2]
    k = np.zeros((*axis.shape[:-1], 3, 3))
    k[..., 0, 1], k[..., 0, 2], k[..., 1, 2] = -z, y, -x
    k[..., 1, 0], k[..., 2, 0], k[..., 2, 1] = z, -y, x
    eye = np.broadcast_to(np.eye(3), k.shape)
    return eye + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def shortest_arc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotations turning direction ``a`` onto ``b`` about their common normal (no twist)."""
    a, b = normalize(a), normalize(b)
    axis = np.cross(a, b)
    s = np.linalg.norm(axis, axis=-1)
    c = np.sum(a * b, axis=-1)
    # Antiparallel: any perpendicular axis will do.
    fallback = np.cross(a, np.array([1.0, 0.0, 0.0]))
    weak = np.linalg.norm(fallback, axis=-1, keepdims=True) < 1e-6
    fallback = np.where(weak, np.cross(a, np.array([0.0, 1.0, 0.0])), fallback)
    axis = np.where((s < 1e-9)[..., None], fallback, axis)
    return axis_angle(axis, np.arctan2(s, c))


def signed_angle(a: np.ndarray, b: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Angle (radians) turning ``a`` onto ``b`` about unit ``axis``, both taken perpendicular to it."""
    a, b = reject(a, axis), reject(b, axis)
    return np.arctan2(np.sum(np.cross(a, b) * axis, axis=-1), np.sum(a * b, axis=-1))


def twist_about_y(rel: np.ndarray) -> np.ndarray:
    """Angle of the twist T in ``rel = T @ S`` (T about local y, S a swing: a rotation with no y twist).

    Used to move a hand's (or any child's) twist about its parent's axis into the parent, as rigs expect:
    pronation lives in the forearm, the wrist only flexes and deviates."""
    inv = np.swapaxes(rel, -1, -2)  # rel^T = S^T T^T: a swing-after-twist form whose twist we can read
    y = np.array([0.0, 1.0, 0.0])
    swing = shortest_arc(np.broadcast_to(y, inv.shape[:-1]), inv[..., :, 1])
    twist = np.swapaxes(swing, -1, -2) @ inv  # rotation about y
    return -np.arctan2(twist[..., 0, 2], twist[..., 0, 0])  # twist = Ry(-angle)


def rotation_y(angle: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotations about the local y axis."""
    angle = np.asarray(angle, dtype=np.float64)
    c, s = np.cos(angle), np.sin(angle)
    out = np.zeros((*angle.shape, 3, 3))
    out[..., 0, 0], out[..., 0, 2] = c, s
    out[..., 1, 1] = 1.0
    out[..., 2, 0], out[..., 2, 2] = -s, c
    return out


def kabsch(local: np.ndarray, observed: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(..., 3, 3) rotations best mapping ``local`` (N, 3) point layouts onto ``observed`` (..., N, 3).

    Least squares over all points, so a hand's or a face's orientation averages the noise of every point
    instead of trusting two of them."""
    w = np.ones(observed.shape[:-1]) if weights is None else np.asarray(weights, dtype=np.float64)
    w = w / np.maximum(w.sum(axis=-1, keepdims=True), EPS)
    local = np.broadcast_to(local, observed.shape)
    lc = local - np.sum(local * w[..., None], axis=-2, keepdims=True)
    oc = observed - np.sum(observed * w[..., None], axis=-2, keepdims=True)
    cov = np.swapaxes(oc * w[..., None], -1, -2) @ lc  # sum w o l^T
    u, _, vt = np.linalg.svd(cov)
    d = np.sign(np.linalg.det(u @ vt))
    fix = np.ones((*d.shape, 3))
    fix[..., 2] = d
    return (u * fix[..., None, :]) @ vt


def rotation_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle (radians) of the rotation taking ``a`` to ``b``."""
    rel = np.swapaxes(a, -1, -2) @ b
    c = (np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.arccos(np.clip(c, -1.0, 1.0))


def mirror_frame(frame: np.ndarray) -> np.ndarray:
    """A left-side bone frame reflected to the right side (X mirror), kept right-handed: x' = -Mx, y' = My,
    z' = Mz with M = diag(-1, 1, 1)."""
    m = np.diag([-1.0, 1.0, 1.0])
    out = m @ frame
    out[..., :, 0] *= -1.0
    return out
