"""Body-part masks from Sapiens2 segmentation: named groups, try-on presets, grow/shrink, feather, invert."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..pipeline.boxes import boxes_from_labels
from ..pipeline.errors import UnknownSegClassError
from ..pipeline.seg_groups import SEG_GROUPS, labels_to_mask, resolve_classes
from ..shading.shadows import gaussian_blur
from .batches import TaskBatch, require_batch
from .errors import StudioError

CUSTOM = "custom (classes below)"
# Try-on presets first (what people come for), then every named group of core.pipeline.seg_groups.
PRESETS = (
    *[g for g in SEG_GROUPS if g.startswith("tryon_")],
    *[g for g in SEG_GROUPS if not g.startswith("tryon_")],
    CUSTOM,
)


def _split(text: str) -> list[str | int]:
    parts = [part.strip() for part in (text or "").replace(";", ",").split(",") if part.strip()]
    return [int(p) if p.isdigit() else p for p in parts]


def selected_classes(preset: str, classes: str = "", exclude: str = "") -> tuple[int, ...]:
    """Class ids of ``preset`` plus the comma-separated ``classes`` (names, ids or group names) minus ``exclude``."""
    if preset not in PRESETS:
        raise StudioError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    wanted: set[int] = set() if preset == CUSTOM else set(resolve_classes(preset))
    try:
        wanted |= set(resolve_classes(_split(classes))) if _split(classes) else set()
        removed = set(resolve_classes(_split(exclude))) if _split(exclude) else set()
    except UnknownSegClassError as exc:
        raise StudioError(exc.message) from None
    ids = tuple(sorted(wanted - removed))
    if not ids:
        raise StudioError(
            "the selection is empty; pick a preset or list classes such as 'Upper_Clothing, Hair' "
            "(names, ids 0-28 or group names)"
        )
    return ids


def body_part_mask(
    seg: TaskBatch,
    *,
    preset: str,
    classes: str = "",
    exclude: str = "",
    grow: int = 0,
    feather: float = 0.0,
    invert: bool = False,
    person: int = 0,
    output_device: torch.device | str = "cpu",
) -> torch.Tensor:
    """MASK ``(B, H, W)``: 1 where the selected body parts are (0 there with ``invert``); ``person`` N > 0 keeps
    only the N-th largest person."""
    seg = require_batch(seg, "seg", "", "seg")
    ids = selected_classes(preset, classes, exclude)
    if person < 0:
        raise StudioError(f"person must be 0 (everyone) or 1, 2, ... (largest first), got {person}")
    masks = []
    for result in seg.results:
        m = labels_to_mask(result.labels, ids).to(torch.float32)
        if person:
            m = m * person_region(result.labels, person)
        m = grow_mask(m, grow)
        if feather > 0:
            m = feather_mask(m, feather)
        masks.append(1.0 - m if invert else m)
    sizes = {tuple(m.shape) for m in masks}
    if len(sizes) > 1:
        raise StudioError(
            f"the segmentations have different sizes {sorted(sizes)}; cannot form one mask batch"
        )
    return torch.stack(masks).to(output_device)


def person_region(labels: torch.Tensor, person: int) -> torch.Tensor:
    """(H, W) float: 1 inside the box of the ``person``-th largest person (people found as Pose finds them from
    segmentation: connected body regions); all 0 when the frame has fewer people.  Overlapping people share
    their overlap."""
    region = torch.zeros(labels.shape, dtype=torch.float32, device=labels.device)
    boxes = boxes_from_labels(labels)
    if person <= len(boxes):
        x1, y1, x2, y2 = boxes[person - 1]
        region[int(y1) : int(-(-y2 // 1)), int(x1) : int(-(-x2 // 1))] = 1.0
    return region


def foreground_masks(seg: TaskBatch) -> torch.Tensor:
    """Person (label > 0) masks ``(B, H, W)`` float."""
    return torch.stack([(r.labels > 0).to(torch.float32) for r in seg.results])


def grow_mask(mask: torch.Tensor, pixels: int) -> torch.Tensor:
    """Dilate (`pixels` > 0) or erode (< 0) a `(..., H, W)` mask with a square of radius `|pixels|`."""
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
    """Soft edges: Gaussian blur with `sigma` pixels, clamped to [0, 1]."""
    return gaussian_blur(mask.to(torch.float32), sigma).clamp(0.0, 1.0)
