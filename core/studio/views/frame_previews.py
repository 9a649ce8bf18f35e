"""A capture frame's previews as uint8 images: one drawer per preview kind, drawn in row bands.

Why here and not in the output store: ComfyUI's generic task node (`task_views`) and the job's writer show the
same previews; the store only writes what this module draws (`store/outputs.frame_files`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...formats.bundle import CaptureFrame
from ...tasks import registry as tasks_registry
from ...tasks.base import Preview, Task
from .drawing import pose_preview
from .previews import (
    albedo_preview,
    alpha_preview,
    cutout_preview,
    depth_colours_u8,
    depth_ranges,
    normal_map,
    seg_colours_u8,
    to_uint8,
    valid_z,
)


def all_previews() -> list[tuple[Task, Preview]]:
    """Every registered task's previews, in the order a frame writes them (`Preview.rank`)."""
    found = [(task, preview) for task in tasks_registry.all_tasks() for preview in task.previews]
    return sorted(found, key=lambda pair: pair[1].rank)


PREVIEW_BAND_ROWS = 256  # rows of a preview drawn at a time (a 9000-wide photo: 256 × 9000 × 3 floats, 28 MB)


def preview_makers(frame: CaptureFrame, image: np.ndarray) -> dict[str, Callable[[], np.ndarray]]:
    """Suffix → a function drawing that preview as uint8 (the same previews ComfyUI's nodes show).

    Why functions: the job draws each preview just before its PNG is written, one at a time, and in row bands
    (`_in_bands`), so a 9000×6000 frame never holds its float previews (648 MB each) nor, for banded maps
    (docs/pipeline.md), the maps whole. Every step is per pixel, so the bands give the whole image's bytes."""
    makers: dict[str, Callable[[], np.ndarray]] = {}
    mask = None if frame.mask is None else np.asarray(frame.mask) > 0.5
    for task, preview in all_previews():
        if preview.draw is not None:
            make = preview.draw(frame, image)
        else:
            make = _DRAWERS[preview.kind](task, preview, frame, image, mask)
        if make is not None:
            makers[preview.suffix] = make
    return makers


Maker = Callable[[], np.ndarray]


def _skeleton(
    task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any
) -> Maker | None:
    if not task.stored(frame):
        return None
    return lambda: to_uint8(pose_preview(image, getattr(frame, preview.source)))


def _banded(draw: Callable[[Any, slice, Any], Any]) -> Callable[..., Maker | None]:
    """A drawer of a per-pixel preview of the frame attribute `preview.source`, drawn in row bands."""

    def drawer(
        task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any
    ) -> Maker | None:
        data = getattr(frame, preview.source)
        if data is None:
            return None
        return lambda: _in_bands(frame.height, lambda rows: draw(data, rows, mask))

    return drawer


def _depth(task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any) -> Maker | None:
    points = getattr(frame, preview.source)
    return None if points is None else (lambda: _depth_preview(points, mask, frame.height))


def _cutout(task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any) -> Maker | None:
    foreground, alpha = getattr(frame, preview.source), frame.alpha
    if foreground is None or alpha is None:
        return None
    return lambda: _in_bands(frame.height, lambda rows: cutout_preview(foreground[rows], alpha[rows]))


# The studio's preview drawers by `Preview.kind` (a task without its own `Preview.draw` names one of these).
_DRAWERS: dict[str, Callable[..., Maker | None]] = {
    "skeleton": _skeleton,
    "classes": _banded(lambda data, rows, mask: seg_colours_u8(data[rows])),
    "normals": _banded(
        lambda data, rows, mask: normal_map(data[rows], mask=None if mask is None else mask[rows])
    ),
    "depth": _depth,
    "colour": _banded(lambda data, rows, mask: albedo_preview(data[rows])),
    "matte": _banded(lambda data, rows, mask: alpha_preview(data[rows])),
    "cutout": _cutout,
}


def preview_images(frame: CaptureFrame, image: np.ndarray) -> dict[str, np.ndarray]:
    """Suffix → uint8 preview image for every layer the frame holds (all drawn now; see `preview_makers`)."""
    return {suffix: render_preview(make) for suffix, make in preview_makers(frame, image).items()}


def render_preview(make: Callable[[], np.ndarray]) -> np.ndarray:
    """Draw one preview (the benchmarks' `previews.render` stage)."""
    return make()


def _in_bands(height: int, draw: Callable[[slice], Any]) -> np.ndarray:
    """A uint8 image drawn `PREVIEW_BAND_ROWS` rows at a time by `draw(rows)` (float or uint8 rows)."""
    out: np.ndarray | None = None
    for top in range(0, height, PREVIEW_BAND_ROWS):
        rows = slice(top, min(top + PREVIEW_BAND_ROWS, height))
        band = to_uint8(draw(rows))
        if out is None:
            out = np.empty((height, *band.shape[1:]), np.uint8)
        out[rows] = band
    assert out is not None, "a frame has at least one row"
    return out


def _depth_preview(points: Any, mask: np.ndarray | None, height: int) -> np.ndarray:
    """The depth preview: its range from the whole map's valid depths, its colours drawn in bands."""
    depth, valid = valid_z(points[:, :, 2], mask)  # Z alone (216 MB at 9000×6000), not the points
    (depth_range,) = depth_ranges([depth], [valid], per_image=True)
    return _in_bands(height, lambda rows: depth_colours_u8(depth[rows], valid[rows], depth_range))
