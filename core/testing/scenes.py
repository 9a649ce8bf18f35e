"""Analytic scenes in the canonical (OpenCV) camera frame: exact pointmaps, normals and masks.

Why: no real weights run in the test suite, so every consumer of normals (relighting, shadows, colour maps,
meshes, Blender) and the cross-task checks are verified against geometry whose answer is known in closed form.
Pixel centres are at (col + 0.5, row + 0.5) in the corner-origin pixel frame, as everywhere in the project.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Scene", "ellipsoid_scene", "pixel_rays", "plane_scene"]


@dataclass(frozen=True)
class Scene:
    """points (H, W, 3) metric XYZ, normals (H, W, 3) unit, both OpenCV frame; mask (H, W) bool = the object.

    Outside the mask, points and normals are the background plane when the scene has one, else zero."""

    points: np.ndarray
    normals: np.ndarray
    mask: np.ndarray
    intrinsics: tuple[float, float, float, float]  # fx, fy, cx, cy in pixels

    @property
    def size(self) -> tuple[int, int]:
        """(W, H)."""
        return int(self.mask.shape[1]), int(self.mask.shape[0])


def pixel_rays(width: int, height: int, intrinsics: tuple[float, float, float, float]) -> np.ndarray:
    """(H, W, 3) camera rays (x, y, 1) through the pixel centres: x = (col + 0.5 − cx) / fx, …"""
    fx, fy, cx, cy = intrinsics
    cols = (np.arange(width, dtype=np.float64) + 0.5 - cx) / fx
    rows = (np.arange(height, dtype=np.float64) + 0.5 - cy) / fy
    xx, yy = np.meshgrid(cols, rows)
    return np.stack([xx, yy, np.ones_like(xx)], axis=-1)


def _default_intrinsics(width: int, height: int, focal: float | None) -> tuple[float, float, float, float]:
    f = float(focal if focal is not None else 1.2 * max(width, height))
    return (f, f, width / 2.0, height / 2.0)


def ellipsoid_scene(
    width: int = 96,
    height: int = 128,
    *,
    center: tuple[float, float, float] = (0.0, 0.0, 3.0),
    semi_axes: tuple[float, float, float] = (0.5, 0.5, 0.5),
    focal: float | None = None,
    background_depth: float | None = None,
) -> Scene:
    """An axis-aligned ellipsoid (a sphere when the semi-axes are equal) seen by a pinhole camera at the origin.

    Points: the first ray–ellipsoid intersection; normals: the outward gradient ((p − c) / r², normalised),
    which faces the camera on every visible point. `background_depth` adds a fronto-parallel wall (normal
    (0, 0, −1)) at that depth behind the object; without it the background holds zeros (invalid points).
    """
    intr = _default_intrinsics(width, height, focal)
    rays = pixel_rays(width, height, intr)
    c = np.asarray(center, dtype=np.float64)
    r = np.asarray(semi_axes, dtype=np.float64)
    # |(t·d − c) / r|² = 1  →  a t² − 2 b t + k = 0
    d_s, c_s = rays / r, c / r
    a = (d_s * d_s).sum(-1)
    b = (d_s * c_s).sum(-1)
    k = float((c_s * c_s).sum()) - 1.0
    disc = b * b - a * k
    mask = disc > 0
    t = np.where(mask, (b - np.sqrt(np.where(mask, disc, 0.0))) / a, 0.0)
    points = rays * t[..., None]
    grad = (points - c) / (r * r)
    normals = grad / np.maximum(np.linalg.norm(grad, axis=-1, keepdims=True), 1e-12)
    points[~mask] = 0.0
    normals[~mask] = 0.0
    if background_depth is not None:
        points[~mask] = rays[~mask] * float(background_depth)
        normals[~mask] = (0.0, 0.0, -1.0)
    return Scene(points.astype(np.float32), normals.astype(np.float32), mask, intr)


def plane_scene(
    width: int = 64,
    height: int = 48,
    *,
    normal: tuple[float, float, float] = (0.0, 0.0, -1.0),
    depth: float = 2.0,
    through: tuple[float, float, float] | None = None,
    focal: float | None = None,
) -> Scene:
    """A plane with the unit `normal` through `through` (default (0, 0, depth)); the mask is where the pixel
    rays hit it in front of the camera from its `normal` side (a floor: normal (0, −1, 0) through (0, 1, 0))."""
    intr = _default_intrinsics(width, height, focal)
    rays = pixel_rays(width, height, intr)
    n = np.asarray(normal, dtype=np.float64)
    n = n / np.linalg.norm(n)
    q = np.asarray((0.0, 0.0, depth) if through is None else through, dtype=np.float64)
    facing = rays @ n  # < 0: the ray meets the side the normal points to
    hit = facing < -1e-12
    t = np.where(hit, float(n @ q) / np.where(hit, facing, -1.0), 0.0)  # n · (t·d − q) = 0
    mask = hit & (t > 0)
    points = np.where(mask[..., None], rays * t[..., None], 0.0)
    normals = np.where(mask[..., None], n, 0.0)
    return Scene(points.astype(np.float32), normals.astype(np.float32), mask, intr)
