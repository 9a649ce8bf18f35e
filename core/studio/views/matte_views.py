"""Matting results as images: the alpha, the straight foreground, and the person composited over a background.

What the Matte node shows and what a script gets from `Studio` are the same numbers, because both call these
functions. Compositing is `MattingResult.composite` (the model's pre-multiplied colour + (1 − α) · background,
in the image's own encoding, as the official demo does).

A background of another size than the image is fitted by **cover**: scaled, keeping its aspect ratio, until it
fills the image, then centre-cropped (bilinear, antialiased when shrinking). Why: a new backdrop rarely has the
portrait's size; stretching it would distort it, and refusing it would make every graph add a resize node for the
one answer almost everybody wants. A background of the same size is used pixel for pixel.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..errors import StudioError
from ..sources.batches import TaskBatch, check_batch_count, check_image, place, require_batch
from .previews import alpha_preview
from .relighting import parse_color

DEFAULT_BACKGROUND_COLOR = "#00ff00"  # chroma green, what the official matting demo composites over


def fit_background(background: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """(B, h, w, C) image batch → (B, height, width, 3): unchanged when the size matches, else scaled to cover
    the target keeping its aspect ratio and centre-cropped."""
    rgb = check_image(background, "", "background")
    h, w = rgb.shape[1:3]
    if (h, w) == (height, width):
        return rgb
    scale = max(width / w, height / h)
    new_w, new_h = max(width, round(w * scale)), max(height, round(h * scale))
    resized = F.interpolate(
        rgb.permute(0, 3, 1, 2),
        size=(new_h, new_w),
        mode="bilinear",
        align_corners=False,
        antialias=scale < 1.0,
    ).clamp(0.0, 1.0)
    top, left = (new_h - height) // 2, (new_w - width) // 2
    return resized[:, :, top : top + height, left : left + width].permute(0, 2, 3, 1).contiguous()


def matte_images(
    batch: TaskBatch,
    *,
    background: torch.Tensor | None = None,
    color: str = DEFAULT_BACKGROUND_COLOR,
    output_device: torch.device | str = "cpu",
    where: str = "",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(alpha (B, H, W), straight foreground (B, H, W, 3), composite (B, H, W, 3)) of a matting batch.

    The composite is over `background` (one image for the batch or one per image; fitted by cover when its size
    differs) or, without one, over the flat `color` ('#rrggbb' or 'r,g,b')."""
    batch = require_batch(batch, "matting", where, "matting")
    sizes = {r.image_size for r in batch.results}
    if len(sizes) > 1:
        raise StudioError(
            f"{place(where)}the mattes have different sizes {sorted(sizes)}; cannot form one image batch"
        )
    width, height = sizes.pop()
    count = len(batch)
    backgrounds: Any
    if background is not None:
        check_batch_count("background", check_image(background, where, "background").shape[0], count, where)
        backgrounds = fit_background(background, width, height)
    else:
        backgrounds = torch.tensor(parse_color(color), dtype=torch.float32)
    alphas, foregrounds, composites = [], [], []
    for i, result in enumerate(batch.results):
        bg = backgrounds if background is None else backgrounds[min(i, backgrounds.shape[0] - 1)]
        alphas.append(alpha_preview(result.alpha))
        foregrounds.append(result.foreground.to(torch.float32).clamp(0.0, 1.0))
        composites.append(result.composite(bg.to(result.alpha.device)))
    return tuple(torch.stack(t).to(output_device) for t in (alphas, foregrounds, composites))  # type: ignore[return-value]
