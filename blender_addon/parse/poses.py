"""Joint tracks over time -> per-bone local pose channels (location + quaternion), numpy only.

Every bone's head is placed exactly at its joint and its tail direction turned (shortest arc) towards the same
target its rest tail points at. The armature-space matrix M of a bone becomes Blender's ``matrix_basis`` by
undoing the parent chain: ``basis = rest^-1 @ rest_parent @ M_parent^-1 @ M`` (``basis = rest^-1 @ M`` for roots).
"""

from __future__ import annotations

import numpy as np


def fill_gaps(
    tracks: np.ndarray, valid: np.ndarray, fallback: np.ndarray, times: np.ndarray | None = None
) -> np.ndarray:
    """(T, K, 3) tracks with invalid samples linearly interpolated in time; never-valid joints get ``fallback``.

    ``times`` (T,) are the frame numbers (default 0..T-1): a numbered plate keeps its gaps (1001, 1003, 1010),
    and a joint missing on 1003 lies 2/9 of the way from 1001 to 1010, not halfway."""
    out = tracks.astype(np.float64, copy=True)
    frames = np.arange(tracks.shape[0]) if times is None else np.asarray(times, dtype=np.float64)
    for k in range(tracks.shape[1]):
        ok = valid[:, k]
        if ok.all():
            continue
        if not ok.any():
            out[:, k] = fallback[k]
            continue
        for axis in range(3):
            out[~ok, k, axis] = np.interp(frames[~ok], frames[ok], tracks[ok, k, axis])
    return out


def smooth_tracks(tracks: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average over ``window`` frames (odd; edges use the frames that exist). 0/1 = off."""
    if window <= 1 or tracks.shape[0] < 2:
        return tracks
    half = window // 2
    padded = np.concatenate([np.zeros_like(tracks[:1]), np.cumsum(tracks, axis=0)], axis=0)
    t = np.arange(tracks.shape[0])
    lo, hi = np.clip(t - half, 0, None), np.clip(t + half + 1, None, tracks.shape[0])
    return (padded[hi] - padded[lo]) / (hi - lo)[:, None, None]


def shortest_arc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotations taking unit vectors ``a`` to unit vectors ``b`` by the shortest arc."""
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    v = np.cross(a, b)
    c = np.sum(a * b, axis=-1)
    vx = np.zeros((*a.shape[:-1], 3, 3))
    vx[..., 0, 1], vx[..., 0, 2], vx[..., 1, 2] = -v[..., 2], v[..., 1], -v[..., 0]
    vx[..., 1, 0], vx[..., 2, 0], vx[..., 2, 1] = v[..., 2], -v[..., 1], v[..., 0]
    eye = np.broadcast_to(np.eye(3), vx.shape)
    factor = np.where(c > -1 + 1e-8, 1.0 / np.maximum(1.0 + c, 1e-8), 0.0)[..., None, None]
    rot = eye + vx + vx @ vx * factor
    opposite = c <= -1 + 1e-8
    if np.any(opposite):  # 180°: rotate about any axis perpendicular to a
        perp = np.cross(a[opposite], np.array([1.0, 0.0, 0.0]))
        weak = np.linalg.norm(perp, axis=-1) < 1e-6
        perp[weak] = np.cross(a[opposite][weak], np.array([0.0, 1.0, 0.0]))
        perp /= np.linalg.norm(perp, axis=-1, keepdims=True)
        rot[opposite] = 2.0 * perp[..., :, None] * perp[..., None, :] - np.eye(3)
    return rot


def matrix_to_quaternion(m: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices -> (..., 4) unit quaternions (w, x, y, z), sign-continuous in w >= 0."""
    m = np.asarray(m, dtype=np.float64)
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    cands = np.stack(
        [
            np.stack(
                [
                    1 + trace,
                    m[..., 2, 1] - m[..., 1, 2],
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 1, 0] - m[..., 0, 1],
                ],
                -1,
            ),
            np.stack(
                [
                    m[..., 2, 1] - m[..., 1, 2],
                    1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
                    m[..., 0, 1] + m[..., 1, 0],
                    m[..., 0, 2] + m[..., 2, 0],
                ],
                -1,
            ),
            np.stack(
                [
                    m[..., 0, 2] - m[..., 2, 0],
                    m[..., 0, 1] + m[..., 1, 0],
                    1 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2],
                    m[..., 1, 2] + m[..., 2, 1],
                ],
                -1,
            ),
            np.stack(
                [
                    m[..., 1, 0] - m[..., 0, 1],
                    m[..., 0, 2] + m[..., 2, 0],
                    m[..., 1, 2] + m[..., 2, 1],
                    1 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2],
                ],
                -1,
            ),
        ],
        axis=-2,
    )
    diag = np.stack([trace, m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], -1)
    best = np.take_along_axis(cands, np.argmax(diag, axis=-1)[..., None, None], axis=-2)[..., 0, :]
    q = best / np.linalg.norm(best, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)


def pose_channels(
    heads: np.ndarray,
    tails: np.ndarray,
    rest: np.ndarray,
    parent: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Local location (T, B, 3) and quaternion (T, B, 4) for every frame.

    Args:
        heads, tails: (T, B, 3) target heads and tail targets in armature space.
        rest: (B, 4, 4) Blender ``bone.matrix_local`` (armature-space rest matrices).
        parent: (B,) parent bone index, -1 for roots; parents come before children.
    """
    frames, bones = heads.shape[:2]
    rest_dir = rest[:, :3, 1]
    direction = tails - heads
    degenerate = np.linalg.norm(direction, axis=-1) < 1e-9
    direction[degenerate] = np.broadcast_to(rest_dir, direction.shape)[degenerate]
    swing = shortest_arc(np.broadcast_to(rest_dir, tails.shape), direction)
    pose = np.zeros((frames, bones, 4, 4))
    pose[..., :3, :3] = swing @ rest[None, :, :3, :3]
    pose[..., :3, 3] = heads
    pose[..., 3, 3] = 1.0
    rest_inv = np.linalg.inv(rest)
    basis = np.empty_like(pose)
    roots = parent < 0
    basis[:, roots] = rest_inv[None, roots] @ pose[:, roots]
    kids = np.nonzero(~roots)[0]
    if kids.size:
        p = parent[kids]
        basis[:, kids] = rest_inv[None, kids] @ rest[None, p] @ np.linalg.inv(pose[:, p]) @ pose[:, kids]
    quats = matrix_to_quaternion(basis[..., :3, :3])
    # Keep consecutive quaternions in the same hemisphere so interpolation takes the short way.
    for t in range(1, frames):
        flip = np.sum(quats[t] * quats[t - 1], axis=-1) < 0
        quats[t, flip] *= -1
    return basis[..., :3, 3], quats
