"""Order-2 spherical-harmonics irradiance from an equirectangular environment (pure torch).

Why SH: a Lambertian surface only sees the low frequencies of its environment, so nine coefficients per colour
channel reproduce the irradiance of any HDRI to within a few percent (Ramamoorthi & Hanrahan 2001, "An Efficient
Representation for Irradiance Environment Maps") at the cost of one dot product per pixel.

Frame: every direction here is in the OpenCV camera frame (x right, y down, z forward, away from the camera), the
frame of Sapiens2 normals and pointmaps.  An environment pixel at direction ``d`` holds the radiance that ARRIVES
FROM ``d``.  Equirectangular layout: the image centre looks forward (+z, what the camera sees behind the subject),
u grows to the right (+x at u = 0.75), the top row is straight up (-y).  This is the usual "panorama as seen from
the camera" layout, so the same picture works as a background plate.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .errors import ShadingError

__all__ = [
    "SH_BAND_FACTORS",
    "environment_irradiance",
    "equirect_directions",
    "irradiance_from_sh",
    "project_equirect",
    "sh_basis",
]

# Convolution of the clamped cosine with each SH band (A_l in Ramamoorthi & Hanrahan): pi, 2pi/3, pi/4.
SH_BAND_FACTORS = (math.pi, 2.0 * math.pi / 3.0, 2.0 * math.pi / 3.0, 2.0 * math.pi / 3.0) + (
    math.pi / 4.0,
) * 5

_C0 = 0.5 * math.sqrt(1.0 / math.pi)  # 0.282095
_C1 = math.sqrt(3.0 / (4.0 * math.pi))  # 0.488603
_C2 = 0.5 * math.sqrt(15.0 / math.pi)  # 1.092548
_C20 = 0.25 * math.sqrt(5.0 / math.pi)  # 0.315392
_C22 = 0.25 * math.sqrt(15.0 / math.pi)  # 0.546274


def sh_basis(dirs: torch.Tensor) -> torch.Tensor:
    """Real SH basis up to l = 2 for unit directions ``(..., 3)`` -> ``(..., 9)``.

    Order: (0,0), (1,-1), (1,0), (1,1), (2,-2), (2,-1), (2,0), (2,1), (2,2), with y/z/x in the usual real-SH roles.
    """
    x, y, z = dirs.unbind(-1)
    return torch.stack(
        [
            torch.full_like(x, _C0),
            _C1 * y,
            _C1 * z,
            _C1 * x,
            _C2 * x * y,
            _C2 * y * z,
            _C20 * (3.0 * z * z - 1.0),
            _C2 * x * z,
            _C22 * (x * x - y * y),
        ],
        dim=-1,
    )


def equirect_directions(
    height: int, width: int, *, yaw_deg: float = 0.0, device=None, dtype=torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit direction ``(H, W, 3)`` and solid angle ``(H, W)`` of every equirectangular pixel centre.

    ``yaw_deg`` turns the environment about the vertical axis; a positive angle moves what was in front of the
    camera towards the right of the frame.  The solid angles sum to 4*pi.
    """
    v = (torch.arange(height, device=device, dtype=torch.float64) + 0.5) / height
    u = (torch.arange(width, device=device, dtype=torch.float64) + 0.5) / width
    lat = (0.5 - v) * math.pi  # +pi/2 at the top row
    lon = (u - 0.5) * 2.0 * math.pi + math.radians(yaw_deg)
    lat, lon = torch.meshgrid(lat, lon, indexing="ij")
    cos_lat = torch.cos(lat)
    dirs = torch.stack([cos_lat * torch.sin(lon), -torch.sin(lat), cos_lat * torch.cos(lon)], dim=-1)
    # Exact solid angle of a latitude band cell (better than cos(lat)*dlat*dlon near the poles).
    band = torch.sin(lat + 0.5 * math.pi / height) - torch.sin(lat - 0.5 * math.pi / height)
    solid_angle = band * (2.0 * math.pi / width)
    return dirs.to(dtype), solid_angle.to(dtype)


def project_equirect(env: torch.Tensor, *, yaw_deg: float = 0.0, max_height: int = 64) -> torch.Tensor:
    """Project a linear-radiance equirectangular image ``(H, W, C)`` onto SH: returns ``(9, C)`` coefficients.

    The map is area-averaged down to at most ``max_height`` rows first: order-2 SH cannot see finer detail, and
    this keeps a 4K HDRI cheap.  Values are not clamped, so HDR radiance above 1 is kept.
    """
    if env.ndim != 3 or env.shape[-1] < 1:
        raise ShadingError(f"environment must be (H, W, C) with C >= 1, got shape {tuple(env.shape)}")
    h, w = env.shape[:2]
    if h < 2 or w < 2:
        raise ShadingError(
            f"environment map is too small ({w}x{h}); give an equirectangular image at least 4x2"
        )
    env = env.to(torch.float32)
    if h > max_height:
        new_h = max_height
        new_w = max(2, round(w * new_h / h))
        env = F.interpolate(env.permute(2, 0, 1)[None], size=(new_h, new_w), mode="area")[0].permute(1, 2, 0)
        h, w = new_h, new_w
    dirs, solid_angle = equirect_directions(h, w, yaw_deg=yaw_deg, device=env.device)
    basis = sh_basis(dirs) * solid_angle[..., None]  # (H, W, 9)
    return torch.einsum("hwk,hwc->kc", basis, env)


def irradiance_from_sh(coeffs: torch.Tensor, normals: torch.Tensor) -> torch.Tensor:
    """Irradiance ``E(n)`` (``(..., C)``, >= 0) for unit normals ``(..., 3)`` from SH radiance coefficients ``(9, C)``.

    For a constant environment of radiance ``L`` this is ``pi * L`` for every normal; divide by pi to get the
    radiance a white Lambertian surface reflects.
    """
    factors = torch.tensor(SH_BAND_FACTORS, dtype=coeffs.dtype, device=coeffs.device)
    weighted = coeffs * factors[:, None]
    basis = sh_basis(normals.to(coeffs.dtype))
    # The order-2 fit of the clamped cosine rings slightly negative opposite a strong light: clamp it.
    return torch.einsum("...k,kc->...c", basis, weighted).clamp_min(0.0)


def environment_irradiance(env: torch.Tensor, normals: torch.Tensor, *, yaw_deg: float = 0.0) -> torch.Tensor:
    """Convenience: reflected radiance of a white Lambertian surface, ``E(n) / pi``, for an environment map."""
    coeffs = project_equirect(env, yaw_deg=yaw_deg)
    return irradiance_from_sh(coeffs, normals) / math.pi
