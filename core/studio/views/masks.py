"""Body-part masks from Sapiens2 segmentation: named groups, try-on presets, grow/shrink, feather, invert, and
soft outer edges from a matte."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...pipeline.boxes import boxes_from_labels
from ...pipeline.errors import UnknownSegClassError
from ...pipeline.postprocess import MATTE_EPS
from ...pipeline.seg_groups import SEG_GROUPS, labels_to_mask, resolve_classes
from ...shading.shadows import gaussian_blur
from ..errors import StudioError
from ..sources.batches import TaskBatch, require_batch

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
    matte: torch.Tensor | None = None,
    output_device: torch.device | str = "cpu",
) -> torch.Tensor:
    """MASK ``(B, H, W)``: 1 where the selected body parts are (0 there with ``invert``); ``person`` N > 0 keeps
    only the N-th largest person. ``matte``: a soft person alpha ``(B, H, W)`` or ``(H, W)`` (one serves every
    image), applied before grow/feather/invert as `matte_parts` describes."""
    seg = require_batch(seg, "seg", "", "seg")
    ids = selected_classes(preset, classes, exclude)
    if person < 0:
        raise StudioError(f"person must be 0 (everyone) or 1, 2, ... (largest first), got {person}")
    mattes = _check_matte(matte, seg)
    masks = []
    for i, result in enumerate(seg.results):
        if mattes is None:
            m = labels_to_mask(result.labels, ids).to(torch.float32)
        else:
            m = matte_parts(result.labels, ids, mattes[min(i, len(mattes) - 1)].to(result.labels.device))
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


def _check_matte(matte: torch.Tensor | None, seg: TaskBatch) -> torch.Tensor | None:
    """(N, H, W) float mattes (N = 1 or one per segmentation) of the segmentations' size, or None."""
    if matte is None:
        return None
    if not isinstance(matte, torch.Tensor) or matte.ndim not in (2, 3):
        shape = tuple(matte.shape) if isinstance(matte, torch.Tensor) else type(matte).__name__
        raise StudioError(f"'person_mask' must be a mask (B, H, W), got {shape}")
    m = (matte[None] if matte.ndim == 2 else matte).to(torch.float32).clamp(0.0, 1.0)
    h, w = seg.results[0].labels.shape[-2:]
    if tuple(m.shape[1:]) != (h, w):
        raise StudioError(
            f"'person_mask' is {m.shape[2]}x{m.shape[1]} but the segmentation is {w}x{h}; matte the same image",
        )
    if m.shape[0] not in (1, len(seg)):
        raise StudioError(
            f"'person_mask' has {m.shape[0]} masks for {len(seg)} segmentations; give one or one per image"
        )
    return m


def matte_parts(
    labels: torch.Tensor, ids: tuple[int, ...] | list[int], alpha: torch.Tensor, eps: float = MATTE_EPS
) -> torch.Tensor:
    """Soft mask (H, W) of the classes ``ids`` whose edges toward the background follow a matte's ``alpha``.

    Why: segmentation gives every pixel one class, so hair strands, motion blur and sheer cloth end in a hard
    stair-step where the person meets the background; the matte knows how much of each such pixel is person.
    How: pixels the segmentation calls background but where alpha > ``eps`` (the matte's fringe) take the
    label of the nearest body part (grown outward one pixel at a time; where two parts are equally near, the
    higher class id), then mask = (label in ``ids``) × alpha. Edges between two body parts stay where the
    segmentation put them (alpha is ~1 inside the person); only the outer silhouette becomes soft.
    """
    labels = labels.to(torch.long)
    alpha = alpha.to(device=labels.device, dtype=torch.float32).clamp(0.0, 1.0)
    filled = labels.clone()
    fringe = (labels == 0) & (alpha > eps)
    for _ in range(max(labels.shape[-2:])):
        open_ = fringe & (filled == 0)
        if not open_.any():
            break
        nearest = F.max_pool2d(filled[None, None].to(torch.float32), 3, stride=1, padding=1)[0, 0].to(
            torch.long
        )
        grow = open_ & (nearest > 0)
        if not grow.any():  # fringe pixels that touch no body part at all (a matte of someone seg missed)
            break
        filled = torch.where(grow, nearest, filled)
    return labels_to_mask(filled, tuple(ids)).to(torch.float32) * alpha


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
