"""Pointmap -> grid mesh topology, vectorised with numpy (no per-vertex Python loops).

Each kept pixel of the (strided) grid becomes a vertex and each 2x2 block of kept pixels a quad, unless the quad
spans a depth discontinuity (a silhouette edge: foreground in front of background) or touches an invalid or
background pixel. Quads are wound so that their normals face the camera.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class GridMesh:
    """Topology plus the pixel every vertex came from, so any per-pixel layer can be sampled per vertex."""

    rows: np.ndarray  # (V,) int32 pixel row of each vertex (in the full-resolution image)
    cols: np.ndarray  # (V,) int32 pixel column of each vertex
    quads: np.ndarray  # (F, 4) int32 vertex indices

    @property
    def num_vertices(self) -> int:
        return int(self.rows.shape[0])

    def sample(self, layer: np.ndarray) -> np.ndarray:
        """Per-vertex values of a per-pixel array (H, W[, C])."""
        return layer[self.rows, self.cols]


def valid_pixels(
    x: np.ndarray,
    y: np.ndarray,
    z: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    seg: np.ndarray | None = None,
    drop_background: bool = True,
    mask_threshold: float = 0.5,
) -> np.ndarray:
    """(H, W) bool: pixels with a finite point in front of the camera (and in the foreground if asked).

    Takes the pointmap's X, Y, Z channels separately so a 4K capture never needs an (H, W, 3) copy.
    """
    valid = np.isfinite(x) & np.isfinite(y) & np.isfinite(z)
    with np.errstate(invalid="ignore"):
        valid &= z > 0
    if drop_background:
        if mask is not None:
            valid &= mask >= mask_threshold
        elif seg is not None:
            valid &= np.rint(seg) != 0
    return valid


def build_grid(
    depth: np.ndarray,
    valid: np.ndarray,
    *,
    stride: int = 1,
    depth_threshold: float = 0.05,
    faces: bool = True,
    drop_unused: bool = True,
) -> GridMesh:
    """Vertices for kept grid pixels and quads between them.

    Args:
        depth: (H, W) the pointmap's Z (OpenCV camera frame).
        valid: (H, W) bool, pixels that may become vertices.
        stride: take every ``stride``-th row and column (decimation for large captures).
        depth_threshold: drop a quad when (max Z - min Z) > threshold * min Z over its corners; 0 keeps all.
        faces: False gives vertices only (a point cloud).
        drop_unused: remove vertices that no quad uses (stray pixels along silhouettes).
    """
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    rows_idx = np.arange(0, depth.shape[0], stride, dtype=np.int32)
    cols_idx = np.arange(0, depth.shape[1], stride, dtype=np.int32)
    sub_valid = valid[np.ix_(rows_idx, cols_idx)]
    depth = depth[np.ix_(rows_idx, cols_idx)].astype(np.float32)

    quads = np.zeros((0, 4), dtype=np.int32)
    keep_vertex = sub_valid
    if faces and sub_valid.shape[0] > 1 and sub_valid.shape[1] > 1:
        corners_valid = sub_valid[:-1, :-1] & sub_valid[1:, :-1] & sub_valid[1:, 1:] & sub_valid[:-1, 1:]
        if depth_threshold > 0:
            z = np.where(sub_valid, depth, 0.0)  # invalid corners are already excluded; keep the maths finite
            stack = np.stack([z[:-1, :-1], z[1:, :-1], z[1:, 1:], z[:-1, 1:]])
            nearest, farthest = stack.min(axis=0), stack.max(axis=0)
            corners_valid &= (farthest - nearest) <= depth_threshold * nearest
        quad_r, quad_c = np.nonzero(corners_valid)
        if drop_unused:
            keep_vertex = np.zeros_like(sub_valid)
            for dr, dc in ((0, 0), (1, 0), (1, 1), (0, 1)):
                keep_vertex[quad_r + dr, quad_c + dc] = True
        index = np.full(sub_valid.shape, -1, dtype=np.int64)
        index[keep_vertex] = np.arange(int(keep_vertex.sum()))
        # Image rows grow downwards, so (r,c) -> (r+1,c) -> (r+1,c+1) -> (r,c+1) is counter-clockwise as seen from
        # the camera: the face normal points towards the viewer.
        quads = np.stack(
            [
                index[quad_r, quad_c],
                index[quad_r + 1, quad_c],
                index[quad_r + 1, quad_c + 1],
                index[quad_r, quad_c + 1],
            ],
            axis=1,
        ).astype(np.int32)
    vr, vc = np.nonzero(keep_vertex)
    return GridMesh(rows=rows_idx[vr], cols=cols_idx[vc], quads=quads)
