"""ComfyUI IMAGE/MASK checks and conversions, previews and mask morphology (torch only, no ComfyUI imports).

ComfyUI layouts: IMAGE is ``(B, H, W, C)`` float in [0, 1] with C = 3 (or 4); MASK is ``(B, H, W)`` float in
[0, 1] (a single ``(H, W)`` mask is accepted).  Every function returns new tensors: ComfyUI caches outputs and
shares them between consumers, so inputs are never changed in place.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..core.data import seg29
from ..core.shading.shadows import gaussian_blur


def check_image(image: torch.Tensor, node: str) -> torch.Tensor:
    """Validate an IMAGE batch and return its RGB part as float32."""
    if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[-1] not in (1, 3, 4):
        shape = tuple(image.shape) if isinstance(image, torch.Tensor) else type(image).__name__
        raise ValueError(f"{node}: expected an IMAGE batch (B, H, W, 3), got {shape}")
    if image.shape[0] == 0:
        raise ValueError(f"{node}: the image batch is empty (0 images); connect a node that outputs images")
    if image.shape[1] < 2 or image.shape[2] < 2:
        raise ValueError(
            f"{node}: the images are {image.shape[2]}x{image.shape[1]} pixels; give at least 2x2"
        )
    rgb = image[..., :3] if image.shape[-1] >= 3 else image.expand(*image.shape[:3], 3)
    return rgb.to(torch.float32)


def check_batch_count(name: str, count: int, batch: int, node: str, of: str = "the image batch") -> None:
    """ComfyUI's convention: one entry serves every image, otherwise exactly one per image."""
    if count not in (1, batch):
        raise ValueError(
            f"{node}: {name} has {count} entries but {of} has {batch}; give one {name} for all images or "
            f"exactly one per image"
        )


def match_batch(
    name: str, value: torch.Tensor, batch: int, node: str, of: str = "the image batch"
) -> torch.Tensor:
    """Broadcast a batch of 1 to ``batch`` entries; any other mismatch is an error naming both sizes."""
    check_batch_count(name, value.shape[0], batch, node, of)
    return value if value.shape[0] == batch else value.expand(batch, *value.shape[1:])


def check_mask(
    mask: torch.Tensor | None, image: torch.Tensor, node: str, name: str = "mask", of: str = "the image batch"
) -> torch.Tensor | None:
    """Validate an optional MASK against an IMAGE batch (only its shape is read): same H and W, batch 1 or B;
    returns (B, H, W) float."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor) or mask.ndim not in (2, 3):
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"{node}: {name} must be a MASK (B, H, W), got {shape}")
    m = mask[None] if mask.ndim == 2 else mask
    b, h, w = image.shape[:3]
    if tuple(m.shape[1:]) != (h, w):
        raise ValueError(
            f"{node}: {name} is {m.shape[2]}x{m.shape[1]} but the image is {w}x{h}; they must match (resize the "
            f"mask with an upscale node, or leave '{name}' unconnected)"
        )
    return match_batch(name, m.to(torch.float32).clamp(0.0, 1.0), b, node, of)


def check_same_size(name: str, value: torch.Tensor, image: torch.Tensor, node: str) -> torch.Tensor:
    """An IMAGE that must line up pixel-for-pixel with ``image`` (albedo, background...)."""
    value = check_image(value, node)
    if tuple(value.shape[1:3]) != tuple(image.shape[1:3]):
        raise ValueError(
            f"{node}: {name} is {value.shape[2]}x{value.shape[1]} but the image is {image.shape[2]}x{image.shape[1]};"
            f" they must be the same size"
        )
    return match_batch(name, value, image.shape[0], node)


def seg_metadata() -> dict:
    """Class names and palette of the 29 Sapiens2 body-part classes (core/data/seg29.json)."""
    return seg29()


def seg_palette(device=None) -> torch.Tensor:
    return torch.tensor(seg_metadata()["palette_rgb"], dtype=torch.float32, device=device) / 255.0


def colorize_labels(
    labels: torch.Tensor, image: torch.Tensor | None = None, opacity: float = 1.0
) -> torch.Tensor:
    """Class ids ``(H, W)`` -> palette colours ``(H, W, 3)``, optionally blended over ``image`` ``(H, W, 3)``."""
    palette = seg_palette(labels.device)
    colours = palette[labels.long().clamp(0, palette.shape[0] - 1)]
    if image is None or opacity >= 1.0:
        return colours
    return image * (1.0 - opacity) + colours * opacity


QUANTILE_SAMPLES = 1_000_000  # depth values the 1st/99th percentiles are estimated from


def depth_preview(
    depths: list[torch.Tensor],
    valid: list[torch.Tensor],
    *,
    near_bright: bool = True,
    per_image: bool = False,
) -> torch.Tensor:
    """Depth maps -> grey IMAGE batch; normalised over the whole batch (no video flicker) unless ``per_image``.

    The batch range comes from a bounded sample of every frame, so a long video never concatenates all its pixels.
    """
    if per_image:
        ranges = [_depth_range(_valid_sample(d, v, QUANTILE_SAMPLES, 0)) for d, v in zip(depths, valid)]
    else:
        share = max(1, QUANTILE_SAMPLES // len(depths))
        samples = [_valid_sample(d, v, share, i) for i, (d, v) in enumerate(zip(depths, valid))]
        ranges = [_depth_range(torch.cat(samples))] * len(depths)
    out = []
    for d, v, (lo, hi) in zip(depths, valid, ranges):
        t = ((d - lo) / max(hi - lo, 1e-6)).clamp(0.0, 1.0)
        if near_bright:
            t = 1.0 - t
        t = torch.where(v, t, torch.zeros_like(t))
        out.append(t[..., None].expand(*t.shape, 3))
    return torch.stack(out).to(torch.float32)


def _valid_sample(depth: torch.Tensor, valid: torch.Tensor, count: int, seed: int) -> torch.Tensor:
    """At most ``count`` of the valid depth values of one frame (all of them when there are fewer)."""
    values = depth[valid].float()
    if values.numel() <= count:
        return values
    picks = torch.randperm(values.numel(), generator=torch.Generator().manual_seed(seed))[:count]
    return values[picks.to(values.device)]


def _depth_range(values: torch.Tensor) -> tuple[float, float]:
    """1st and 99th percentile of (already sampled) valid depth values; (0, 1) when there are none."""
    if values.numel() == 0:
        return 0.0, 1.0
    lo, hi = torch.quantile(values, torch.tensor([0.01, 0.99], device=values.device)).tolist()
    return lo, hi


def grow_mask(mask: torch.Tensor, pixels: int) -> torch.Tensor:
    """Dilate (``pixels`` > 0) or erode (< 0) a ``(..., H, W)`` mask with a square of radius ``|pixels|``."""
    if pixels == 0:
        return mask
    lead, (h, w) = mask.shape[:-2], mask.shape[-2:]
    m = mask.reshape(-1, 1, h, w).to(torch.float32)
    r = abs(pixels)
    k = 2 * r + 1
    if pixels > 0:
        out = F.max_pool2d(F.pad(m, (r, r, r, r), mode="constant", value=0.0), k, stride=1)
    else:
        out = -F.max_pool2d(F.pad(-m, (r, r, r, r), mode="constant", value=-1.0), k, stride=1)
    return out.reshape(*lead, h, w)


def feather_mask(mask: torch.Tensor, sigma: float) -> torch.Tensor:
    """Soft edges: Gaussian blur with ``sigma`` pixels, clamped to [0, 1]."""
    return gaussian_blur(mask.to(torch.float32), sigma).clamp(0.0, 1.0)


def parse_color(text: str, node: str = "Sapiens2") -> tuple[float, float, float]:
    """'#rrggbb', 'rrggbb', 'r,g,b' (0-255) or 'r,g,b' floats (0-1) -> sRGB floats in [0, 1]."""
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
        raise ValueError(
            f"{node}: cannot read the colour {text!r}; write it as #ffaa00 or 255,170,0"
        ) from None
    return rgb  # type: ignore[return-value]
