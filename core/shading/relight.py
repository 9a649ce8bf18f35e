"""Deterministic relighting from normals and albedo (pure torch, channel-last tensors).

Model: Lambertian diffuse plus an optional energy-normalised Blinn-Phong lobe, lit by directional lights, an
order-2 SH environment (see ``sh.py``) and a constant ambient term.  All shading is done in linear light; albedo
and images arrive sRGB-encoded (as Sapiens2 and ComfyUI deliver them) and are decoded first.

Units: a light's ``intensity`` is the radiance a white Lambertian surface facing it reflects, so one light of
intensity 1 straight on a white surface gives exactly 1.0 (linear).  A constant environment or ambient of radiance
``L`` makes a white surface reflect ``L`` whatever its orientation.

Frame: the canonical OpenCV camera frame (x right, y down, z forward) of the project's normals (converted from
the model's OpenGL frame in post-processing, docs/conventions.md) and pointmaps.  A light
``direction`` points FROM the surface TOWARDS the light; a surface facing the camera has normal (0, 0, -1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .errors import ShadingError
from .sh import irradiance_from_sh

__all__ = [
    "DirectionalLight",
    "RelightOutput",
    "backdrop_normals",
    "blinn_phong_normalization",
    "composite",
    "direction_from_angles",
    "lambert",
    "linear_to_srgb",
    "relight",
    "srgb_to_linear",
    "view_directions",
]

FACING_CAMERA = (0.0, 0.0, -1.0)


def srgb_to_linear(x: torch.Tensor) -> torch.Tensor:
    """IEC 61966-2-1 sRGB decoding (values outside [0, 1] are clamped first)."""
    x = x.clamp(0.0, 1.0)
    return torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(x: torch.Tensor) -> torch.Tensor:
    """sRGB encoding; linear values above 1 clip to white (tone-map before calling if you want otherwise)."""
    x = x.clamp(0.0, 1.0)
    return torch.where(x <= 0.0031308, x * 12.92, 1.055 * x.clamp_min(1e-12) ** (1.0 / 2.4) - 0.055)


def direction_from_angles(azimuth_deg: float, elevation_deg: float) -> tuple[float, float, float]:
    """Unit direction towards a light given as seen from the camera.

    ``azimuth_deg`` 0 = light next to the camera, +90 = from the image's right, -90 = from its left, 180 = from
    behind the subject (rim light).  ``elevation_deg`` +90 = from straight above, -90 = from below.
    """
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    return (math.sin(az) * math.cos(el), -math.sin(el), -math.cos(az) * math.cos(el))


@dataclass(frozen=True)
class DirectionalLight:
    """A light at infinity: ``direction`` towards the light (any length), linear RGB ``color``, ``intensity``."""

    direction: tuple[float, float, float]
    color: tuple[float, float, float] = (1.0, 1.0, 1.0)
    intensity: float = 1.0

    def __post_init__(self) -> None:
        if math.sqrt(sum(c * c for c in self.direction)) < 1e-8:
            raise ShadingError("a directional light needs a non-zero direction vector")
        if self.intensity < 0 or any(c < 0 for c in self.color):
            raise ShadingError(
                f"light colour and intensity must be >= 0, got {self.color} x {self.intensity}"
            )

    @classmethod
    def from_angles(
        cls, azimuth_deg: float, elevation_deg: float, color=(1.0, 1.0, 1.0), intensity: float = 1.0
    ) -> DirectionalLight:
        return cls(direction_from_angles(azimuth_deg, elevation_deg), tuple(color), float(intensity))

    def unit_direction(self, device=None, dtype=torch.float32) -> torch.Tensor:
        d = torch.tensor(self.direction, device=device, dtype=dtype)
        return d / d.norm()

    def radiance(self, device=None, dtype=torch.float32) -> torch.Tensor:
        return torch.tensor(self.color, device=device, dtype=dtype) * self.intensity


def lambert(normals: torch.Tensor, direction: torch.Tensor) -> torch.Tensor:
    """Lambert's cosine ``max(0, n . l)`` for normals ``(..., 3)`` and a unit direction ``(3,)`` -> ``(...)``."""
    return (normals * direction).sum(-1).clamp_min(0.0)


def blinn_phong_normalization(shininess: float) -> float:
    """Factor ``k`` that makes ``k * (n.h)^s`` reflect exactly all energy at normal incidence, less elsewhere.

    Closed form of ``1 / (2 pi * integral cos^s(theta/2) cos(theta) sin(theta) dtheta)`` over the hemisphere;
    the usual ``(s + 8) / (8 pi)`` overshoots by up to 8 %, which adds light instead of reflecting it.
    """
    s = float(shininess)
    if s < 0:
        raise ShadingError(f"shininess must be >= 0, got {shininess}")
    r = 2.0**-0.5
    integral = (2.0 / (s + 4.0) - 1.0 / (s + 2.0)) - (
        2.0 * r ** (s + 4.0) / (s + 4.0) - r ** (s + 2.0) / (s + 2.0)
    )
    return 1.0 / (8.0 * math.pi * integral)


def view_directions(points: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """Unit vectors from surface points to the camera (``-P/|P|``); orthographic (0, 0, -1) without points."""
    if points is None:
        return torch.tensor(FACING_CAMERA, dtype=like.dtype, device=like.device).expand_as(like)
    p = points.to(like.dtype)
    norm = p.norm(dim=-1, keepdim=True)
    ortho = torch.tensor(FACING_CAMERA, dtype=like.dtype, device=like.device).expand_as(p)
    return torch.where(norm > 1e-8, -p / norm.clamp_min(1e-8), ortho)


@dataclass
class RelightOutput:
    """Linear-light results, all ``(..., 3)``: final ``radiance``, white-albedo ``shading``, ``specular`` part."""

    radiance: torch.Tensor
    shading: torch.Tensor
    specular: torch.Tensor


def relight(
    normals: torch.Tensor,
    albedo: torch.Tensor,
    *,
    lights: Sequence[DirectionalLight] = (),
    sh_coeffs: torch.Tensor | None = None,
    ambient: Sequence[float] | torch.Tensor = (0.0, 0.0, 0.0),
    specular: float = 0.0,
    shininess: float = 32.0,
    view_dirs: torch.Tensor | None = None,
    visibility: torch.Tensor | None = None,
) -> RelightOutput:
    """Shade unit ``normals`` ``(..., 3)`` with linear ``albedo`` ``(..., 3)``.

    ``specular`` in [0, 1] moves that fraction of the reflectance from the diffuse into the Blinn-Phong lobe, so
    the total never exceeds what arrives.  ``visibility`` ``(L, ...)`` in [0, 1] shadows each directional light
    (1 = lit); the environment and ambient terms are unshadowed.  Zero normals (background) get no direct light.
    """
    if not 0.0 <= specular <= 1.0:
        raise ShadingError(f"specular must be in [0, 1], got {specular}")
    if normals.shape[-1] != 3 or albedo.shape[-1] != 3:
        raise ShadingError(
            f"normals and albedo must end in 3 channels, got {tuple(normals.shape)} and {tuple(albedo.shape)}"
        )
    if visibility is not None and visibility.shape[0] != len(lights):
        raise ShadingError(f"visibility has {visibility.shape[0]} layers for {len(lights)} lights")
    dtype, device = torch.float32, normals.device
    n = normals.to(dtype)
    irradiance = torch.zeros(n.shape, dtype=dtype, device=device)  # radiance-units "E / pi"
    spec = torch.zeros_like(irradiance)
    ambient_t = torch.as_tensor(ambient, dtype=dtype, device=device)
    irradiance = irradiance + ambient_t
    if sh_coeffs is not None:
        irradiance = irradiance + irradiance_from_sh(sh_coeffs.to(device, dtype), n) / math.pi
    v = view_dirs.to(dtype) if view_dirs is not None else view_directions(None, n)
    k_spec = blinn_phong_normalization(shininess) * math.pi if specular > 0 else 0.0
    for i, light in enumerate(lights):
        l_dir = light.unit_direction(device, dtype)
        cos_l = lambert(n, l_dir)
        if visibility is not None:
            cos_l = cos_l * visibility[i].to(dtype)
        radiance = light.radiance(device, dtype)
        irradiance = irradiance + cos_l[..., None] * radiance
        if specular > 0:
            h = v + l_dir
            h = h / h.norm(dim=-1, keepdim=True).clamp_min(1e-8)
            n_dot_h = (n * h).sum(-1).clamp_min(0.0)
            lobe = k_spec * n_dot_h.pow(shininess) * cos_l
            spec = spec + lobe[..., None] * radiance
    spec = spec * specular
    alb = albedo.to(dtype)
    radiance_out = alb * irradiance * (1.0 - specular) + spec
    return RelightOutput(radiance=radiance_out, shading=irradiance, specular=spec)


def backdrop_normals(height: int, width: int, *, device=None, dtype=torch.float32) -> torch.Tensor:
    """Normals ``(H, W, 3)`` of a large bulge facing the camera: a soft, direction-aware backdrop.

    Used to fill a light map outside the subject, so an IC-Light style conditioning image shows a gradient that
    brightens on the side the light comes from instead of a flat colour.
    """
    ys = (torch.arange(height, device=device, dtype=dtype) + 0.5) / height * 2.0 - 1.0
    xs = (torch.arange(width, device=device, dtype=dtype) + 0.5) / width * 2.0 - 1.0
    aspect = width / height
    yy, xx = torch.meshgrid(ys, xs * aspect, indexing="ij")
    n = torch.stack([xx, yy, -torch.full_like(xx, 1.5)], dim=-1)
    return n / n.norm(dim=-1, keepdim=True)


def composite(foreground: torch.Tensor, background: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``fg * m + bg * (1 - m)`` for channel-last images and a mask without the channel axis."""
    m = mask.to(foreground.dtype).clamp(0.0, 1.0)[..., None]
    return foreground * m + background.to(foreground.dtype) * (1.0 - m)
