"""What a host shows of any registered task's results, without knowing the task: a preview image and a mask.

Why here: ComfyUI's generic "Sapiens2 Run Task" node (and any front-end listing tasks from the registry) must show a
plug-in task it has never heard of the same way the CLI's previews do. Each result goes into a capture frame
through the task's own `store`, exactly as a bundle would hold it; the preview is the task's first preview as the
CLI draws it (its `draw`, or the studio's drawer of that suffix), and the mask is the task's person mask, else its
first declared bundle layer (class ids: any class but 0; values: clipped to 0..1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ...formats.bundle import CaptureFrame
from ...formats.task_layers import CLASS_ID, TaskLayer
from ...tasks import registry
from ...tasks.base import StoreContext
from ..errors import StudioError


def task_frame(task_name: str, result: Any, width: int, height: int) -> CaptureFrame:
    """A capture frame holding one result, stored by its task as a bundle would hold it."""
    frame = CaptureFrame(width=width, height=height)
    registry.get(task_name).store(frame, result, StoreContext())
    return frame


def _extra_mask(frame: CaptureFrame) -> np.ndarray | None:
    for layer, channels in frame.extra.items():
        spec = frame.task_layers.get(layer)
        meaning = spec.meaning if isinstance(spec, TaskLayer) else (spec or {}).get("meaning")
        values = np.asarray(next(iter(channels.values())))
        if meaning == CLASS_ID:
            return (values > 0).astype(np.float32)
        return np.clip(np.nan_to_num(values.astype(np.float32)), 0.0, 1.0)
    return None


def _preview(task_name: str, frame: CaptureFrame, image: np.ndarray) -> np.ndarray | None:
    from .frame_previews import preview_makers

    makers = None
    for preview in registry.get(task_name).previews:
        make = preview.draw(frame, image) if preview.draw is not None else None
        if make is None:
            makers = preview_makers(frame, image) if makers is None else makers
            make = makers.get(preview.suffix)
        if make is not None:
            return np.asarray(make(), dtype=np.uint8)
    return None


def task_views(
    task_name: str, results: Sequence[Any], images: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(preview (B, H, W, 3) float 0..1, mask (B, H, W) float 0..1) of a batch of one task's results, for the
    (B, H, W, C) float images they were computed from. A task with no preview shows its mask in grey."""
    if len(results) != images.shape[0]:
        raise StudioError(f"{len(results)} {task_name} results for {images.shape[0]} images")
    task = registry.get(task_name)
    previews, masks = [], []
    for result, image in zip(results, images, strict=True):
        height, width = int(image.shape[0]), int(image.shape[1])
        frame = task_frame(task_name, result, width, height)
        mask = task.person_mask(frame) if task.mask_rank is not None else None
        mask = _extra_mask(frame) if mask is None else np.asarray(mask, dtype=np.float32)
        mask = np.zeros((height, width), np.float32) if mask is None else mask
        photo = (image[..., :3].clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()
        drawn = _preview(task_name, frame, photo)
        previews.append(np.repeat(mask[..., None], 3, axis=2) if drawn is None else drawn[..., :3] / 255.0)
        masks.append(mask)
    preview = torch.from_numpy(np.stack(previews).astype(np.float32))
    return preview, torch.from_numpy(np.stack(masks).astype(np.float32))
