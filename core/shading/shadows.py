"""Cast shadows from a metric pointmap by screen-space ray marching (pure torch).

Why screen space: the pointmap is all the geometry we have, and it is exactly what the camera sees.  A point is in
shadow when the ray from it towards the light passes *behind* a visible surface: at some step the ray's depth is
larger than the depth map at the pixel it projects to, by more than ``bias`` and by less than ``thickness`` (so a
thin arm does not cast an infinitely deep shadow wall behind it).

Frame: OpenCV camera frame (x right, y down, z forward), pixel origin at the top-left corner of the top-left
pixel, pixel centres at ``i + 0.5``; intrinsics ``(fx, fy, cx, cy)`` in pixels of the pointmap's resolution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .errors import ShadingError

__all__ = ["gaussian_blur", "shadow_visibility"]


def shadow_visibility(
    points: torch.Tensor,
    direction: Sequence[float] | torch.Tensor,
    intrinsics: Sequence[float],
    *,
    valid: torch.Tensor | None = None,
    steps: int = 48,
    max_distance: float | None = None,
    bias: float | None = None,
    thickness: float | None = None,
) -> torch.Tensor:
    """Visibility ``(H, W)`` (1 = lit, 0 = shadowed) of the light ``direction`` for a pointmap ``(H, W, 3)``.

    Args:
        points: metric XYZ per pixel (camera frame); invalid pixels may hold anything when ``valid`` is given,
            otherwise pixels with ``z <= 0`` are invalid.
        direction: towards the light, camera frame.
        intrinsics: ``(fx, fy, cx, cy)`` of the pointmap grid.
        valid: optional ``(H, W)`` bool mask of pixels that hold geometry (others neither cast nor receive).
        steps: samples along each ray; more steps catch thinner occluders.
        max_distance: ray length in metres; default: the diagonal of the valid points' bounding box (no occluder
            can be farther away than that).
        bias: depth tolerance against self-shadowing; default 1 % of the median depth.
        thickness: assumed thickness of visible surfaces; default 25 % of the median depth.
    """
    if points.ndim != 3 or points.shape[-1] != 3:
        raise ShadingError(f"points must be (H, W, 3), got {tuple(points.shape)}")
    if steps < 1:
        raise ShadingError(f"steps must be >= 1, got {steps}")
    h, w = points.shape[:2]
    pts = points.to(torch.float32)
    depth = pts[..., 2]
    ok = depth > 0 if valid is None else valid.to(torch.bool) & (depth > 0)
    if not bool(ok.any()):
        return torch.ones((h, w), dtype=torch.float32, device=pts.device)
    d = torch.as_tensor(direction, dtype=torch.float32, device=pts.device)
    d = d / d.norm().clamp_min(1e-12)
    z_valid = depth[ok]
    median = float(z_valid.median())
    if max_distance is None:
        valid_points = pts[ok]
        extent = valid_points.amax(dim=0) - valid_points.amin(dim=0)
        max_distance = max(1e-3, float(extent.norm()))
    bias = 0.01 * median if bias is None else bias
    thickness = 0.25 * median if thickness is None else thickness
    fx, fy, cx, cy = (float(v) for v in intrinsics)

    # Depth map with invalid pixels pushed to infinity so they never occlude.
    depth_map = torch.where(ok, depth, torch.full_like(depth, math.inf)).reshape(-1)
    origin = pts[ok]  # (N, 3): only receivers with geometry are marched
    occluded = torch.zeros(origin.shape[0], dtype=torch.bool, device=pts.device)
    active = torch.arange(origin.shape[0], device=pts.device)  # rays still inside the image and unoccluded
    for k in range(1, steps + 1):
        q = origin[active] + d * (max_distance * k / steps)
        qz = q[:, 2]
        safe_z = qz.clamp_min(1e-6)
        col = torch.floor(fx * q[:, 0] / safe_z + cx).long()
        row = torch.floor(fy * q[:, 1] / safe_z + cy).long()
        inside = (qz > 1e-6) & (col >= 0) & (col < w) & (row >= 0) & (row < h)
        scene_z = depth_map[(row.clamp(0, h - 1) * w + col.clamp(0, w - 1))]
        hit = inside & (qz > scene_z + bias) & (qz < scene_z + thickness)
        occluded[active[hit]] = True
        # A ray that left the frame or is already occluded needs no more steps (a ray cannot re-enter the
        # frustum towards a directional light once it left through the sides, except behind the camera).
        active = active[inside & ~hit]
        if active.numel() == 0:
            break
    visibility = torch.ones((h, w), dtype=torch.float32, device=pts.device)
    visibility[ok] = (~occluded).to(torch.float32)
    return visibility


def gaussian_blur(image: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of ``(..., H, W)`` with reflect padding; ``sigma`` in pixels (0 = unchanged)."""
    if sigma <= 0:
        return image
    radius = max(1, math.ceil(3.0 * sigma))
    x = torch.arange(-radius, radius + 1, dtype=torch.float32, device=image.device)
    kernel = torch.exp(-0.5 * (x / sigma) ** 2)
    kernel = (kernel / kernel.sum()).to(image.dtype)
    lead = image.shape[:-2]
    h, w = image.shape[-2:]
    img = image.reshape(-1, 1, h, w)
    pad_mode = "reflect" if min(h, w) > radius else "replicate"
    img = F.pad(img, (radius, radius, 0, 0), mode=pad_mode)
    img = F.conv2d(img, kernel.view(1, 1, 1, -1))
    img = F.pad(img, (0, 0, radius, radius), mode=pad_mode)
    img = F.conv2d(img, kernel.view(1, 1, -1, 1))
    return img.reshape(*lead, h, w)
