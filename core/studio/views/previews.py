"""Previews of predictions: seg colours, normal maps, depth maps, albedo, mattes — one implementation for every
front-end.

Previews are for looking, not for data (the capture bundle holds the data). They work on torch tensors on any
device (ComfyUI keeps node outputs on its intermediate device) and return float RGB in [0, 1]; `to_uint8` and
`save_png` turn them into files for the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...data import seg29
from ...formats.arrays import to_numpy
from ...formats.png import write_png
from ...shading.conventions import normals_to_rgb
from ..errors import StudioError

NORMAL_PREVIEW_CONVENTION = (
    "opengl"  # what the CLI writes and ComfyUI shows by default: R right, G up, B to viewer
)
DEPTH_COLORMAPS = ("grey", "ramp")
QUANTILE_SAMPLES = 1_000_000  # depth values the 1st/99th percentiles are estimated from
RAMP_STEPS = 4096  # entries of the depth colour table (steps of 1/4095: below one 8-bit level)
# Control points of a perceptual dark-to-bright colour ramp (near = bright yellow, far = dark purple).
_RAMP = (
    (0.05, 0.03, 0.20),
    (0.30, 0.05, 0.45),
    (0.60, 0.15, 0.45),
    (0.87, 0.35, 0.25),
    (0.98, 0.65, 0.10),
    (0.99, 0.95, 0.55),
)


def _tensor(value: Any, device: torch.device | None = None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value if device is None else value.to(device)
    return torch.as_tensor(np.asarray(value), device=device)


def seg_palette(device: torch.device | str | None = None) -> torch.Tensor:
    """(29, 3) float RGB of the official class palette."""
    return torch.tensor(seg29()["palette_rgb"], dtype=torch.float32, device=device) / 255.0


def seg_colors(labels: Any, image: Any = None, opacity: float = 1.0) -> torch.Tensor:
    """Class ids (H, W) → palette colours (H, W, 3), optionally blended over `image` (H, W, 3) in [0, 1]."""
    ids = _tensor(labels)
    palette = seg_palette(ids.device)
    colours = palette[ids.long().clamp(0, palette.shape[0] - 1)]
    if image is None or opacity >= 1.0:
        return colours
    return _tensor(image, ids.device).to(torch.float32) * (1.0 - opacity) + colours * opacity


def seg_colours_u8(labels: Any) -> np.ndarray:
    """`to_uint8(seg_colors(labels))` without the float image: the palette converted to 8 bits once and gathered per
    pixel (the job's seg preview; the same bytes)."""
    ids = _tensor(labels)
    palette = torch.from_numpy(to_uint8(seg_palette()))
    return palette[ids.long().clamp(0, palette.shape[0] - 1).cpu()].numpy()


def normal_map(normals: Any, convention: str = NORMAL_PREVIEW_CONVENTION, mask: Any = None) -> torch.Tensor:
    """Canonical-frame unit normals (H, W, 3) → (n + 1) / 2 colours in `convention` (see core.shading.conventions);
    pixels outside `mask` are black."""
    n = _tensor(normals).to(torch.float32)
    rgb = normals_to_rgb(torch.nan_to_num(n), convention)
    if mask is not None:
        rgb = rgb * _tensor(mask, rgb.device).to(torch.float32)[..., None]
    return rgb


def albedo_preview(albedo: Any, mask: Any = None) -> torch.Tensor:
    """Albedo (H, W, 3) clamped to [0, 1]; black outside `mask`."""
    a = _tensor(albedo).to(torch.float32)
    if mask is not None:
        a = a * _tensor(mask, a.device).to(torch.float32)[..., None]
    return a.clamp(0.0, 1.0)


def alpha_preview(alpha: Any) -> torch.Tensor:
    """A matte's alpha (H, W) as a grey image in [0, 1] (white = person), for a PNG or a MASK."""
    return _tensor(alpha).to(torch.float32).clamp(0.0, 1.0)


def cutout_preview(foreground: Any, alpha: Any) -> torch.Tensor:
    """(H, W, 4) straight colour + alpha: the person cut out, as PNG files and ComfyUI's IMAGE + MASK expect it
    (straight, not pre-multiplied, alpha)."""
    colour = _tensor(foreground).to(torch.float32).clamp(0.0, 1.0)
    return torch.cat([colour, alpha_preview(alpha).to(colour.device)[..., None]], dim=-1)


def valid_depth(points: Any, mask: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(depth Z, valid) of a pointmap (H, W, 3): valid = finite, in front of the camera and inside `mask`."""
    return valid_z(_tensor(points).to(torch.float32)[..., 2], mask)


def valid_z(depth: Any, mask: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`valid_depth` from the depth (H, W) alone (a banded pointmap's Z, read without its X and Y)."""
    z = _tensor(depth).to(torch.float32)
    ok = torch.isfinite(z) & (z > 0)
    if mask is not None:
        ok &= _tensor(mask, z.device).bool()
    return z, ok


def depth_preview(
    depths: Sequence[torch.Tensor],
    valid: Sequence[torch.Tensor],
    *,
    near_bright: bool = True,
    per_image: bool = False,
    colormap: str = "grey",
) -> torch.Tensor:
    """Depth maps → (B, H, W, 3) previews normalised to the 1st–99th percentile of the valid depths, over the whole
    batch (no flicker in a video) unless `per_image`; invalid pixels are black.

    The range comes from a bounded sample of every frame, so a long video never concatenates all its pixels.
    """
    if colormap not in DEPTH_COLORMAPS:
        raise StudioError(
            f"unknown depth colour map {colormap!r}; choose one of {', '.join(DEPTH_COLORMAPS)}"
        )
    ranges = depth_ranges(depths, valid, per_image=per_image)
    out = [
        depth_colours(d, v, depth_range, near_bright=near_bright, colormap=colormap)
        for d, v, depth_range in zip(depths, valid, ranges)
    ]
    return torch.stack(out).to(torch.float32)


def depth_ranges(
    depths: Sequence[torch.Tensor], valid: Sequence[torch.Tensor], *, per_image: bool = False
) -> list[tuple[float, float]]:
    """The (near, far) range `depth_preview` maps to [0, 1], per depth map."""
    if per_image:
        return [_depth_range(_valid_sample(d, v, QUANTILE_SAMPLES, 0)) for d, v in zip(depths, valid)]
    share = max(1, QUANTILE_SAMPLES // max(1, len(depths)))
    samples = [_valid_sample(d, v, share, i) for i, (d, v) in enumerate(zip(depths, valid))]
    return [_depth_range(torch.cat(samples))] * len(depths)


def depth_colours(
    depth: torch.Tensor,
    valid: torch.Tensor,
    depth_range: tuple[float, float],
    *,
    near_bright: bool = True,
    colormap: str = "grey",
) -> torch.Tensor:
    """One depth map (or rows of it) → (…, 3) colours in `depth_range`; invalid pixels black. Per pixel, so rows
    drawn apart equal the whole map's."""
    lo, hi = depth_range
    t = ((depth.to(torch.float32) - lo) / max(hi - lo, 1e-6)).clamp(0.0, 1.0)
    if near_bright:
        t = 1.0 - t
    rgb = _ramp(t) if colormap == "ramp" else t[..., None].expand(*t.shape, 3)
    return torch.where(valid[..., None], rgb, torch.zeros_like(rgb))


def depth_colours_u8(
    depth: torch.Tensor, valid: torch.Tensor, depth_range: tuple[float, float], *, near_bright: bool = True
) -> np.ndarray:
    """`to_uint8(depth_colours(..., colormap="ramp"))` without the float image: the ramp's table converted to 8 bits
    once and gathered per pixel, black where not valid (the job's depth preview; the same bytes)."""
    lo, hi = depth_range
    t = ((depth.to(torch.float32) - lo) / max(hi - lo, 1e-6)).clamp(0.0, 1.0)
    if near_bright:
        t = 1.0 - t
    table = torch.from_numpy(to_uint8(_ramp_colours(torch.linspace(0.0, 1.0, RAMP_STEPS, device=t.device))))
    index = (t * (RAMP_STEPS - 1)).round_().long().clamp_(0, RAMP_STEPS - 1)
    rgb = torch.cat([table, torch.zeros((1, 3), dtype=torch.uint8)])[index.masked_fill_(~valid, RAMP_STEPS)]
    return rgb.numpy()


def _ramp_colours(t: torch.Tensor) -> torch.Tensor:
    """The colour ramp at t in [0, 1] (…, 3): linear between the control points."""
    ramp = torch.tensor(_RAMP, dtype=torch.float32, device=t.device)
    pos = t * (len(_RAMP) - 1)
    i0 = pos.long().clamp(max=len(_RAMP) - 2)
    frac = (pos - i0)[..., None]
    return ramp[i0] * (1 - frac) + ramp[i0 + 1] * frac


def _ramp(t: torch.Tensor) -> torch.Tensor:
    """`_ramp_colours` through a RAMP_STEPS-entry table: one lookup per pixel instead of two gathers and a blend
    of three channels (a 1080p depth preview: 180 → ~40 ms), within 1/4095 of the exact ramp."""
    table = _ramp_colours(torch.linspace(0.0, 1.0, RAMP_STEPS, device=t.device))
    return table[(t * (RAMP_STEPS - 1)).round_().long().clamp_(0, RAMP_STEPS - 1)]


def _valid_sample(depth: torch.Tensor, valid: torch.Tensor, count: int, seed: int) -> torch.Tensor:
    """At most `count` of the valid depth values of one frame (all of them when there are fewer)."""
    values = depth[valid].float()
    if values.numel() <= count:
        return values
    picks = torch.randperm(values.numel(), generator=torch.Generator().manual_seed(seed))[:count]
    return values[picks.to(values.device)]


def _depth_range(values: torch.Tensor) -> tuple[float, float]:
    """1st and 99th percentile of (already sampled) valid depth values; (0, 1) when there are none."""
    if values.numel() == 0:
        return 0.0, 1.0
    if values.device.type == "cpu":
        return _quantiles_cpu(values.numpy(), (0.01, 0.99))
    return _quantile(values, 0.01), _quantile(values, 0.99)


def _quantiles_cpu(values: np.ndarray, qs: Sequence[float]) -> tuple[float, ...]:
    """`_quantile` for several q at once on the host: one `np.partition` finds every order statistic needed
    (a million samples: ~15 instead of ~70 core-ms for the four `kthvalue` calls); the same values, since an
    order statistic does not depend on how it is found."""
    n = values.size
    ranks = [q * (n - 1) for q in qs]
    needed = sorted({min(int(r) + k, n - 1) for r in ranks for k in (0, 1)})
    ordered = np.partition(values, needed)
    out = []
    for rank in ranks:
        below = int(rank)
        low = float(ordered[below])
        out.append(low if rank == below else low + (float(ordered[below + 1]) - low) * (rank - below))
    return tuple(out)


def _quantile(values: torch.Tensor, q: float) -> float:
    """`torch.quantile(values, q)` (linear interpolation between order statistics) by selection, not a full
    sort: two `kthvalue` calls are ~5x cheaper on the million samples of a preview."""
    rank = q * (values.numel() - 1)
    below = int(rank)
    low = float(values.kthvalue(below + 1).values)
    if rank == below:
        return low
    high = float(values.kthvalue(below + 2).values)
    return low + (high - low) * (rank - below)


def to_uint8(image: Any) -> np.ndarray:
    """uint8 / uint16 / float-in-[0, 1] image (numpy or tensor) → uint8 numpy (for drawing and PNG files)."""
    arr = to_numpy(image)
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.uint16:
        return (arr // 257).astype(np.uint8)
    return np.rint(np.clip(arr.astype(np.float32), 0.0, 1.0) * 255.0).astype(np.uint8)


def save_png(path: str | Path, array: Any) -> None:
    """Write an (H, W[, 3]) image as PNG (float images are taken as [0, 1]) with our fast encoder
    (`core.formats.png`: one vectorised filter and ISA-L's deflate, ~10× less CPU than Pillow's encoder)."""
    write_png(path, to_uint8(array))


# ------------------------------------------------------------------------------------- whole batches of results


def seg_preview_batch(batch: Any, image: torch.Tensor | None = None, opacity: float = 0.6) -> torch.Tensor:
    """(B, H, W, 3) class colours of a seg TaskBatch, blended over the (B, H, W, 3) image batch when given."""
    frames = []
    for i, result in enumerate(batch.results):
        background = None if image is None else image[min(i, image.shape[0] - 1)]
        frames.append(
            seg_colors(result.labels.cpu(), None if background is None else background.cpu(), opacity)
        )
    return torch.stack(frames)


def normal_map_batch(batch: Any, convention: str = NORMAL_PREVIEW_CONVENTION) -> torch.Tensor:
    """(B, H, W, 3) normal maps of a normal TaskBatch; black outside each result's mask."""
    return torch.stack([normal_map(r.normals, convention, r.mask) for r in batch.results])


def albedo_batch(batch: Any) -> torch.Tensor:
    """(B, H, W, 3) albedo of an albedo TaskBatch, clamped; black outside each result's mask."""
    return torch.stack([albedo_preview(r.albedo, r.mask) for r in batch.results])


def depth_preview_batch(
    batch: Any, *, near_bright: bool = True, per_image: bool = False, colormap: str = "grey"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Depth previews (B, H, W, 3) and valid-depth masks (B, H, W) float of a pointmap TaskBatch."""
    pairs = [valid_depth(r.points.cpu(), None if r.mask is None else r.mask.cpu()) for r in batch.results]
    depths, valid = [p[0] for p in pairs], [p[1] for p in pairs]
    preview = depth_preview(depths, valid, near_bright=near_bright, per_image=per_image, colormap=colormap)
    return preview, torch.stack(valid).to(torch.float32)
