"""Read ComfyUI ``BOUNDING_BOX`` values into per-image person boxes (x1, y1, x2, y2) in pixels.

ComfyUI core (RT-DETR, SDPose) passes, per image, a list of dicts ``{"x", "y", "width", "height"}`` (extra keys
such as ``score`` or ``label`` are ignored); a single dict means one box for every image, and a shorter list of
frames repeats its last entry, as core nodes do.  ``[x1, y1, x2, y2]`` lists are accepted too.  An empty value
means the detector found nobody: every frame gets no boxes (an unconnected socket is None: no boxes given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.pipeline.boxes import Box, normalize_box


def _is_box(value: Any) -> bool:
    if isinstance(value, Mapping):
        return True
    return isinstance(value, Sequence) and len(value) == 4 and all(isinstance(v, (int, float)) for v in value)


def boxes_per_image(value: Any, batch: int, width: int, height: int, node: str) -> list[list[Box]] | None:
    """Per-image lists of valid boxes clipped to the image; None when no boxes were connected."""
    if value is None:
        return None
    if _is_box(value):
        frames: list[Any] = [[value]]
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) == 0:  # connected, but the detector found nobody (unconnected is None)
            return [[] for _ in range(batch)]
        # A flat list of boxes is one frame's boxes (used for every image); otherwise one entry per frame.
        frames = [list(value)] if all(_is_box(v) for v in value) else list(value)
    else:
        raise ValueError(f"{node}: 'bboxes' must be a BOUNDING_BOX value, got {type(value).__name__}")
    out: list[list[Box]] = []
    for i in range(batch):
        frame = frames[min(i, len(frames) - 1)]
        if frame is None:
            out.append([])
            continue
        if _is_box(frame):
            frame = [frame]
        boxes = []
        for j, item in enumerate(frame):
            try:
                x1, y1, x2, y2 = normalize_box(item)
            except ValueError as exc:
                raise ValueError(f"{node}: bboxes[{i}][{j}]: {exc}") from None
            x1, x2 = max(0.0, min(x1, x2)), min(float(width), max(x1, x2))
            y1, y2 = max(0.0, min(y1, y2)), min(float(height), max(y1, y2))
            if x2 - x1 >= 1.0 and y2 - y1 >= 1.0:
                boxes.append((x1, y1, x2, y2))
        out.append(boxes)
    return out
