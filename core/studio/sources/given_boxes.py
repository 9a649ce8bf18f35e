"""Person boxes from what users hand over: ComfyUI `BOUNDING_BOX` values and the CLI's boxes file.

ComfyUI values become per-image person boxes (x1, y1, x2, y2) in pixels.

ComfyUI core (RT-DETR, SDPose) passes, per image, a list of dicts ``{"x", "y", "width", "height"}`` (extra keys
such as ``score`` or ``label`` are ignored); a single dict means one box for every image, and a shorter list of
frames repeats its last entry, as core nodes do.  ``[x1, y1, x2, y2]`` lists are accepted too.  An empty value
means the detector found nobody: every frame gets no boxes (an unconnected socket is None: no boxes given).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...pipeline.boxes import Box, normalize_box
from ...pipeline.errors import PipelineError
from ..errors import InputError, StudioError


def _is_box(value: Any) -> bool:
    if isinstance(value, Mapping):
        return True
    return isinstance(value, Sequence) and len(value) == 4 and all(isinstance(v, (int, float)) for v in value)


def boxes_per_image(value: Any, batch: int, width: int, height: int) -> list[list[Box]] | None:
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
        raise StudioError(f"'bboxes' must be a BOUNDING_BOX value, got {type(value).__name__}")
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
            except PipelineError as exc:
                raise StudioError(f"bboxes[{i}][{j}]: {exc.message}") from None
            x1, x2 = max(0.0, min(x1, x2)), min(float(width), max(x1, x2))
            y1, y2 = max(0.0, min(y1, y2)), min(float(height), max(y1, y2))
            if x2 - x1 >= 1.0 and y2 - y1 >= 1.0:
                boxes.append((x1, y1, x2, y2))
        out.append(boxes)
    return out


BoxesFile = dict[str, list[list[float]]] | list[list[float]]


def read_boxes_file(path: str | os.PathLike | None) -> BoxesFile | None:
    """Boxes file: a list of [x1, y1, x2, y2] for every image, or {image file name or stem: [[…], …]}."""
    if path is None:
        return None
    file = Path(path)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"boxes file {file}: file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"boxes file {file}: not valid JSON ({exc})") from None

    def check(boxes: Any, where: str) -> list[list[float]]:
        if isinstance(boxes, dict) or (
            isinstance(boxes, list) and len(boxes) == 4 and all(isinstance(v, (int, float)) for v in boxes)
        ):
            boxes = [boxes]  # one box given without the surrounding list
        if not isinstance(boxes, list):
            raise InputError(
                f"boxes file {file}: {where} must be a list of boxes [x1, y1, x2, y2] or "
                '{"x": …, "y": …, "width": …, "height": …}'
            )
        out = []
        for box in boxes:
            try:
                out.append(list(normalize_box(box)))
            except PipelineError as exc:
                raise InputError(f"boxes file {file}: {where}: {exc.message}") from None
        return out

    if isinstance(doc, list):
        return check(doc, "the top-level list")
    if isinstance(doc, dict):
        return {str(k): check(v, f"entry {k!r}") for k, v in doc.items()}
    raise InputError(f"boxes file {file}: expected a list of boxes or an object keyed by image name")


def boxes_for(
    boxes: BoxesFile | None,
    source_name: str,
    frame_number: int | None = None,
    *,
    size: tuple[int, int] | None = None,
) -> list[list[float]] | None:
    """The boxes file's boxes for one image (None: none given); with `size` (W, H), checked against the image so a
    box entirely outside it fails that image, named, instead of the whole batch."""
    chosen = None
    if isinstance(boxes, list):
        chosen = boxes
    elif boxes is not None:
        keys = [source_name, Path(source_name).stem, "*"]
        if frame_number is not None:
            keys.insert(0, f"{source_name}#{frame_number}")
        chosen = next((boxes[key] for key in keys if key in boxes), None)
    if chosen is None or size is None:
        return chosen
    where = source_name if frame_number is None else f"{source_name}#{frame_number}"
    try:
        return [list(normalize_box(box, size)) for box in chosen]
    except PipelineError as exc:
        raise InputError(f"{where}: boxes file: {exc.message}") from None
