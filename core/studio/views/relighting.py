"""Relighting from Sapiens2 normals: gather per-image inputs, call `core.shading`, composite, build the light map.

Colour handling: images, albedo, light colours and LDR environments arrive sRGB-encoded; everything is decoded to
linear light, shaded, and encoded back, so a light of intensity 1 on a white surface gives exactly white.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ...shading.relight import (
    DirectionalLight,
    backdrop_normals,
    composite,
    linear_to_srgb,
    relight,
    srgb_to_linear,
    view_directions,
)
from ...shading.sh import project_equirect
from ...shading.shadows import gaussian_blur, shadow_visibility
from ..errors import StudioError
from ..runtime.host import Host
from ..sources.batches import (
    TaskBatch,
    check_batch_count,
    check_image,
    check_mask,
    check_same_size,
    require_batch,
)

WHERE = ""  # messages carry no place name: the front-end adds its own (ComfyUI: the node's)
SHADOW_MAX_SIDE = 512  # shadow rays are marched on a grid of at most this many pixels per side


def add_light(
    lights: Sequence[DirectionalLight] | None,
    azimuth: float,
    elevation: float,
    color: str,
    intensity: float,
) -> tuple[DirectionalLight, ...]:
    """Append one directional light (colour given as sRGB text) to a chain of lights."""
    srgb = torch.tensor(parse_color(color))
    linear = tuple(float(c) for c in srgb_to_linear(srgb))
    light = DirectionalLight.from_angles(azimuth, elevation, color=linear, intensity=intensity)
    return (*tuple(lights or ()), light)


@dataclass
class RelightSettings:
    """Widget values of the Relight node (environment and ambient in linear radiance units)."""

    environment_intensity: float = 1.0
    environment_rotation: float = 0.0
    environment_is_linear: bool = False
    ambient: float = 0.0
    ambient_color: str = "#ffffff"
    specular: float = 0.0
    shininess: float = 32.0
    shadows: bool = True
    shadow_softness: float = 1.0
    exposure: float = 0.0


def _as_tensor(value, device=None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=torch.float32)
    return torch.as_tensor(np.asarray(value), dtype=torch.float32, device=device)


def _check_result_size(kind: str, value: torch.Tensor, h: int, w: int) -> None:
    if tuple(value.shape[:2]) != (h, w):
        raise StudioError(
            f"the {kind} are {value.shape[1]}x{value.shape[0]} but the image is {w}x{h}; run the "
            f"{kind} node on this same image"
        )


def environment_coefficients(
    environment: torch.Tensor, settings: RelightSettings, index: int
) -> torch.Tensor:
    """SH coefficients (9, 3) of the environment image for batch entry ``index`` (a single map serves all)."""
    env = check_image(environment, WHERE)
    env = env[min(index, env.shape[0] - 1)]
    if env.shape[1] < 2 * env.shape[0] * 0.9 or env.shape[1] > 2 * env.shape[0] * 1.1:
        raise StudioError(
            f"the environment is {env.shape[1]}x{env.shape[0]}; an equirectangular (lat-long) HDRI is twice "
            "as wide as it is high"
        )
    radiance = env if settings.environment_is_linear else srgb_to_linear(env)
    return project_equirect(radiance * settings.environment_intensity, yaw_deg=settings.environment_rotation)


def relight_batch(
    normals: TaskBatch,
    image: torch.Tensor,
    *,
    lights: Sequence[DirectionalLight] = (),
    settings: RelightSettings | None = None,
    albedo: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    environment: torch.Tensor | None = None,
    pointmap: TaskBatch | None = None,
    background: torch.Tensor | None = None,
    foreground: torch.Tensor | None = None,
    host: Host | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Relit IMAGE batch and an IC-Light style light map (white-albedo shading, backdrop gradient outside).

    mask: where to relight, 1 = person; a soft matte alpha works as is (the relit person is composited with it).
    foreground: the matte's straight colour, the surface colour when no albedo is given: at a soft edge the
    photo mixes in the old background, which relighting would carry onto the new one; the straight colour
    does not."""
    settings = settings or RelightSettings()
    host = host or Host()
    normals = require_batch(normals, "normal", WHERE, "normals")
    image = check_image(image, WHERE)
    b, h, w = image.shape[:3]
    if len(normals) not in (1, b):
        raise StudioError(f"{len(normals)} normal maps for {b} images; give one per image")
    albedo = check_same_size("albedo", albedo, image, WHERE) if albedo is not None else None
    background = check_same_size("background", background, image, WHERE) if background is not None else None
    foreground = check_same_size("foreground", foreground, image, WHERE) if foreground is not None else None
    mask = check_mask(mask, image, WHERE)
    if environment is not None:
        check_batch_count("environment", check_image(environment, WHERE).shape[0], b, WHERE)
    if pointmap is not None:
        pointmap = require_batch(pointmap, "pointmap", WHERE, "pointmap")
        check_batch_count("pointmap", len(pointmap), b, WHERE)
    if not lights and environment is None and settings.ambient <= 0:
        raise StudioError("no light: connect 'lights', an 'environment' image, or raise 'ambient'")
    ambient_rgb = srgb_to_linear(torch.tensor(parse_color(settings.ambient_color))) * settings.ambient
    gain = 2.0**settings.exposure
    relit, light_maps = [], []
    host.progress(0, b)
    for i in range(b):
        host.check_cancel()
        res = normals.results[min(i, len(normals) - 1)]
        n = _as_tensor(res.normals)
        _check_result_size("normals", n, h, w)
        fg = _foreground(res, n, mask[i] if mask is not None else None)
        base = albedo[i] if albedo is not None else foreground[i] if foreground is not None else image[i]
        sh = environment_coefficients(environment, settings, i) if environment is not None else None
        points, visibility = None, None
        if pointmap is not None:
            pm = pointmap.results[min(i, len(pointmap) - 1)]
            points = _as_tensor(pm.points)
            _check_result_size("pointmap", points, h, w)
            if settings.shadows and lights:
                visibility = torch.stack(
                    [
                        gaussian_blur(
                            cast_shadows(points, light, pm.intrinsics, fg > 0.5), settings.shadow_softness
                        )
                        for light in lights
                    ]
                )
        shaded = relight(
            n,
            srgb_to_linear(base),
            lights=lights,
            sh_coeffs=sh,
            ambient=ambient_rgb,
            specular=settings.specular,
            shininess=settings.shininess,
            view_dirs=view_directions(points, n) if points is not None else None,
            visibility=visibility,
        )
        fg_srgb = linear_to_srgb(shaded.radiance * gain)
        back = background[i] if background is not None else image[i]
        relit.append(composite(fg_srgb, back, fg))
        backdrop = relight(  # on the normals' device: --gpu-only keeps node outputs on the GPU
            backdrop_normals(h, w, device=n.device),
            torch.ones(h, w, 3, device=n.device),
            lights=lights,
            sh_coeffs=sh,
            ambient=ambient_rgb,
        )
        light_map = composite(shaded.shading + shaded.specular, backdrop.shading, fg)
        light_maps.append(linear_to_srgb(light_map * gain))
        host.progress(i + 1, b)
    device = host.output_device
    return torch.stack(relit).to(device), torch.stack(light_maps).to(device)


def cast_shadows(
    points: torch.Tensor,
    light: DirectionalLight,
    intrinsics,
    valid: torch.Tensor,
    max_side: int = SHADOW_MAX_SIDE,
) -> torch.Tensor:
    """Visibility (H, W) of one light, marched on a grid of at most ``max_side`` pixels and upsampled: shadows
    are soft at that scale anyway, and a 1024x768 pointmap costs 4x less to march at half size."""
    h, w = points.shape[:2]
    step = max(1, math.ceil(max(h, w) / max_side))
    if step == 1:
        return shadow_visibility(points, light.direction, intrinsics, valid=valid)
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    o = step // 2  # small pixel i is original pixel i * step + o: u_small = (u - o - 0.5) / step + 0.5
    small = shadow_visibility(
        points[o::step, o::step],
        light.direction,
        (fx / step, fy / step, (cx - o - 0.5) / step + 0.5, (cy - o - 0.5) / step + 0.5),
        valid=valid[o::step, o::step],
    )
    return F.interpolate(small[None, None], size=(h, w), mode="bilinear", align_corners=False)[0, 0]


def _foreground(result, normals: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Where to relight: the given MASK, else the normal result's own mask, else wherever normals are non-zero."""
    if mask is not None:
        return mask
    own = getattr(result, "mask", None)
    if own is not None:
        return _as_tensor(own)
    return (normals.norm(dim=-1) > 0.5).to(torch.float32)


def describe_lights(lights: Sequence[DirectionalLight]) -> str:
    """One line per light (direction as azimuth/elevation), for the node's text preview."""
    lines = []
    for light in lights:
        x, y, z = (float(c) for c in light.unit_direction())
        az = math.degrees(math.atan2(x, -z))
        el = math.degrees(math.asin(max(-1.0, min(1.0, -y))))
        lines.append(f"azimuth {az:.0f}°, elevation {el:.0f}°, intensity {light.intensity:g}")
    return "\n".join(lines)


def parse_color(text: str) -> tuple[float, float, float]:
    """'#rrggbb', 'rrggbb', '#rgb', 'r,g,b' (0-255) or 'r,g,b' floats (0-1) -> sRGB floats in [0, 1]."""
    s = (text or "").strip().lower()
    try:
        if "," in s:
            parts = [float(p) for p in s.split(",")]
            if len(parts) != 3:
                raise ValueError
            scale = 255.0 if any(p > 1.0 for p in parts) else 1.0
            rgb = tuple(min(max(p / scale, 0.0), 1.0) for p in parts)
        else:
            s = s.removeprefix("#")
            if len(s) == 3:
                s = "".join(c * 2 for c in s)
            if len(s) != 6:
                raise ValueError
            rgb = tuple(int(s[i : i + 2], 16) / 255.0 for i in (0, 2, 4))
    except ValueError:
        raise StudioError(f"cannot read the colour {text!r}; write it as #ffaa00 or 255,170,0") from None
    return rgb  # type: ignore[return-value]
