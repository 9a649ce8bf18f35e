"""Person boxes for top-down pose: given boxes, boxes from a segmentation, or the whole image.

Rule for boxes from a segmentation (documented in docs/pipeline.md):
1. foreground = label > 0, analysed on a copy downsampled (nearest) so its long side is ≤ 256 px;
2. 8-connected components (label propagation with pointer jumping, in torch, on the labels' device);
3. keep components whose area is ≥ `min_area_fraction` of the image (default 0.5 %);
4. merge components whose boxes, each grown by `merge_margin` (default 2 % of the image diagonal), overlap —
   a person cut in two by an occluder or a thin belt stays one box;
5. sort by area, largest first; at most `max_people`.
Boxes are returned in corner-origin image pixels (x1, y1, x2, y2), exclusive of the far edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .errors import NoPersonFoundError, PipelineError

Box = tuple[float, float, float, float]


def normalize_box(box: Any, image_size: tuple[int, int] | None = None) -> Box:
    """(x1, y1, x2, y2) sequence, or a dict with x, y, width, height (ComfyUI BOUNDING_BOX) → float tuple."""
    if isinstance(box, dict):
        try:
            x, y = float(box["x"]), float(box["y"])
            w, h = float(box["width"]), float(box["height"])
        except KeyError as exc:
            raise PipelineError(f"box dict needs keys x, y, width, height; got {sorted(box)}") from exc
        values = (x, y, x + w, y + h)
    else:
        try:
            values = tuple(float(v) for v in box)
        except TypeError as exc:
            raise PipelineError(f"a box must be (x1, y1, x2, y2) or a dict, got {box!r}") from exc
        if len(values) != 4:
            raise PipelineError(f"a box must have 4 numbers (x1, y1, x2, y2), got {len(values)}")
    x1, y1, x2, y2 = values
    if not all(v == v and abs(v) != float("inf") for v in values):
        raise PipelineError(f"box has non-finite numbers: {values}")
    if x2 <= x1 or y2 <= y1:
        raise PipelineError(f"box must have x2 > x1 and y2 > y1 (corner format x1, y1, x2, y2), got {values}")
    if image_size is not None:
        width, height = image_size
        if x2 <= 0 or y2 <= 0 or x1 >= width or y1 >= height:
            raise PipelineError(f"box {values} lies entirely outside the {width}×{height} image")
    return (x1, y1, x2, y2)


def whole_image_box(width: int, height: int) -> Box:
    """The reference's fallback box [0, 0, W−1, H−1] (pixel-centre convention) in corner-origin pixels.

    An axis only 1 px long would give an empty box (the reference then fails); it spans the whole pixel instead.
    """

    def span(size: int) -> tuple[float, float]:
        return (0.5, size - 0.5) if size > 1 else (0.0, float(size))

    (x1, x2), (y1, y2) = span(width), span(height)
    return (x1, y1, x2, y2)


def connected_components(mask: Tensor) -> Tensor:
    """(H, W) bool → (H, W) int64 component ids (−1 = background), 8-connectivity."""
    h, w = mask.shape
    n = h * w
    ids = torch.arange(n, device=mask.device, dtype=torch.int64).reshape(h, w)
    label = torch.where(mask, ids, torch.full_like(ids, -1))
    for _ in range(n + 1):
        pooled = F.max_pool2d(label[None, None].to(torch.float32), 3, stride=1, padding=1)[0, 0].to(
            torch.int64
        )
        grown = torch.where(mask, pooled, label)
        flat = grown.reshape(-1)
        jumped = torch.where(mask, flat[grown.clamp(min=0)].reshape(h, w), grown)  # pointer jumping
        jumped = torch.maximum(jumped, grown)
        if torch.equal(jumped, label):
            break
        label = jumped
    return label


def boxes_from_labels(
    labels: Tensor,
    *,
    min_area_fraction: float = 0.005,
    merge_margin: float = 0.02,
    max_people: int | None = None,
    analysis_size: int = 256,
) -> list[Box]:
    """Person boxes from an (H, W) class-id map (see the module doc for the rule); [] when none qualifies."""
    height, width = int(labels.shape[0]), int(labels.shape[1])
    factor = max(1.0, max(height, width) / analysis_size)
    small_h, small_w = max(1, round(height / factor)), max(1, round(width / factor))
    fg = labels > 0
    if (small_h, small_w) != (height, width):
        fg = (
            F.interpolate(fg[None, None].to(torch.float32), size=(small_h, small_w), mode="nearest")[0, 0]
            > 0.5
        )
    comp = connected_components(fg)
    sx, sy = width / small_w, height / small_h
    found: list[list[float]] = []  # x1, y1, x2, y2, area
    for cid in torch.unique(comp[comp >= 0]).tolist():
        ys, xs = torch.nonzero(comp == cid, as_tuple=True)
        area = float(xs.numel()) / (small_w * small_h)
        if area < min_area_fraction:
            continue
        found.append(
            [
                float(xs.min()) * sx,
                float(ys.min()) * sy,
                (float(xs.max()) + 1) * sx,
                (float(ys.max()) + 1) * sy,
                area,
            ]
        )
    margin = merge_margin * (width**2 + height**2) ** 0.5
    merged = True
    while merged:
        merged = False
        for i in range(len(found)):
            for j in range(i + 1, len(found)):
                a, b = found[i], found[j]
                if (
                    a[0] - margin < b[2]
                    and b[0] - margin < a[2]
                    and a[1] - margin < b[3]
                    and b[1] - margin < a[3]
                ):
                    found[i] = [
                        min(a[0], b[0]),
                        min(a[1], b[1]),
                        max(a[2], b[2]),
                        max(a[3], b[3]),
                        a[4] + b[4],
                    ]
                    del found[j]
                    merged = True
                    break
            if merged:
                break
    found.sort(key=lambda r: -r[4])
    boxes = [(min(r[0], width), min(r[1], height), min(r[2], width), min(r[3], height)) for r in found]
    return boxes[:max_people] if max_people else boxes


def boxes_for_image(
    image_size: tuple[int, int],
    given: Sequence[Any] | None = None,
    labels: Tensor | None = None,
    *,
    if_no_person: str = "image",
    **seg_options: Any,
) -> tuple[list[Box], str, list[str]]:
    """Choose the person boxes of one image → (boxes, source, warnings).

    `if_no_person` ("image" | "empty" | "error") decides what happens when a segmentation finds nobody.
    """
    width, height = image_size
    if given is not None and len(given) > 0:
        return [normalize_box(b, image_size) for b in given], "given", []
    if labels is not None:
        if tuple(labels.shape) != (height, width):
            raise PipelineError(
                f"segmentation is {labels.shape[1]}×{labels.shape[0]} but the image is {width}×{height}; "
                "segment the same images you run pose on"
            )
        boxes = boxes_from_labels(labels, **seg_options)
        if boxes:
            return boxes, "seg", []
        message = "segmentation found no person (no foreground component above the area threshold)"
        if if_no_person == "error":
            raise NoPersonFoundError(message + "; pass boxes explicitly or use if_no_person='image'")
        if if_no_person == "empty":
            return [], "seg", [message]
        if if_no_person != "image":
            raise PipelineError(f"if_no_person must be 'image', 'empty' or 'error', got {if_no_person!r}")
        return [whole_image_box(width, height)], "image", [message + "; used the whole image"]
    return [whole_image_box(width, height)], "image", []
