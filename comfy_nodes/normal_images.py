"""Normal-map IMAGEs in a chosen convention (the conversions themselves live in ``core.shading.conventions``)."""

from __future__ import annotations

import torch

from ..core.shading.conventions import normals_to_rgb
from .types import TaskBatch

# UI label -> core convention name; the first is the default.
_LABELS = {
    "opengl (blender camera, y up)": "opengl",
    "controlnet (BAE colours)": "controlnet",
    "directx (y down)": "directx",
    "opencv (raw Sapiens2 frame)": "opencv",
}
CONVENTIONS = tuple(_LABELS)


def normal_images(batch: TaskBatch, convention: str) -> torch.Tensor:
    """IMAGE ``(B, H, W, 3)`` of ``(n + 1) / 2`` in ``convention``; masked-out pixels are black."""
    if convention not in _LABELS:
        raise ValueError(f"unknown normal convention {convention!r}; choose one of {', '.join(CONVENTIONS)}")
    out = []
    for r in batch.results:
        n = r.normals.to(torch.float32)
        rgb = normals_to_rgb(n, _LABELS[convention])
        if r.mask is not None:
            rgb = rgb * r.mask.to(rgb.device, torch.float32)[..., None]
        out.append(rgb)
    return torch.stack(out)
