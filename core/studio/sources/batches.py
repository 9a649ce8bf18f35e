"""Batches of images and of task results, and the checks that they describe the same pictures.

Layouts: an image batch is `(B, H, W, C)` float in [0, 1] (C = 1, 3 or 4; ComfyUI's IMAGE); a mask batch is
`(B, H, W)` float in [0, 1] (a single `(H, W)` mask is accepted). A batch of one serves every image; any other
count must match. Every function returns new tensors (hosts cache and share their inputs). `where` names the
place the data came from (a ComfyUI node, a CLI option) so that messages point at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ... import catalogue
from ..errors import StudioError


@dataclass
class TaskBatch:
    """Results of one task for a batch of images (one entry per image) and the record of the model that made them."""

    task: str
    results: list[Any]
    model: dict[str, Any] | None = None
    # the temporal pass the results went through as one sequence (`sequence.BatchSequence.record`); None: raw
    temporal: dict[str, Any] | None = None

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> Any:
        """Entry `index`, or the only one when the batch has one (a single result serves every image)."""
        return self.results[min(index, len(self.results) - 1)]

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the images, read from the first result."""
        first = self.results[0]
        if hasattr(first, "image_size"):
            return tuple(first.image_size)
        for name in ("labels", "normals", "albedo", "points", "alpha"):
            value = getattr(first, name, None)
            if value is not None:
                return int(value.shape[1]), int(value.shape[0])
        raise StudioError(f"cannot tell the image size of a {self.task} result")


def place(where: str) -> str:
    """Message prefix naming the place ('' when the front-end adds its own, as ComfyUI does with the node name)."""
    return f"{where}: " if where else ""


def _label(task: str) -> str:
    return catalogue.TASK_LABELS.get(task, task)


def require_batch(value: Any, task: str, where: str, name: str) -> TaskBatch:
    """A clear error when a place gets the wrong kind of Sapiens2 data (or none)."""
    if not isinstance(value, TaskBatch) or value.task != task:
        got = f"{_label(value.task)} results" if isinstance(value, TaskBatch) else type(value).__name__
        raise StudioError(f"{place(where)}'{name}' needs Sapiens2 {_label(task)} results, got {got}")
    if len(value) == 0:
        raise StudioError(f"{place(where)}'{name}' holds no images (empty batch)")
    return value


def check_image(image: Any, where: str, name: str = "image") -> torch.Tensor:
    """Validate a `(B, H, W, C)` image batch and return its RGB part as float32."""
    if not isinstance(image, torch.Tensor) or image.ndim != 4 or image.shape[-1] not in (1, 3, 4):
        shape = tuple(image.shape) if isinstance(image, torch.Tensor) else type(image).__name__
        raise StudioError(f"{place(where)}'{name}' must be an image batch (B, H, W, 3), got {shape}")
    if image.shape[0] == 0:
        raise StudioError(f"{place(where)}the '{name}' batch is empty (0 images)")
    if image.shape[1] < 2 or image.shape[2] < 2:
        raise StudioError(
            f"{place(where)}'{name}' is {image.shape[2]}x{image.shape[1]} pixels; give at least 2x2"
        )
    rgb = image[..., :3] if image.shape[-1] >= 3 else image.expand(*image.shape[:3], 3)
    return rgb.to(torch.float32)


def check_batch_count(name: str, count: int, batch: int, where: str, of: str = "the image batch") -> None:
    """One entry serves every image, otherwise exactly one per image."""
    if count not in (1, batch):
        raise StudioError(
            f"{place(where)}{name} has {count} entries but {of} has {batch}; give one {name} for all images or "
            "exactly one per image"
        )


def match_batch(
    name: str, value: torch.Tensor, batch: int, where: str, of: str = "the image batch"
) -> torch.Tensor:
    """Broadcast a batch of 1 to `batch` entries; any other mismatch is an error naming both sizes."""
    check_batch_count(name, value.shape[0], batch, where, of)
    return value if value.shape[0] == batch else value.expand(batch, *value.shape[1:])


def check_mask(
    mask: Any, image: torch.Tensor, where: str, name: str = "mask", of: str = "the image batch"
) -> torch.Tensor | None:
    """Validate an optional mask against an image batch (only its shape is read): same H and W, batch 1 or B;
    returns (B, H, W) float in [0, 1]."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor) or mask.ndim not in (2, 3):
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise StudioError(f"{place(where)}'{name}' must be a mask (B, H, W), got {shape}")
    m = mask[None] if mask.ndim == 2 else mask
    b, h, w = image.shape[:3]
    if tuple(m.shape[1:]) != (h, w):
        raise StudioError(
            f"{place(where)}'{name}' is {m.shape[2]}x{m.shape[1]} but the image is {w}x{h}; they must match",
            hints={"comfyui": f"resize the mask with an upscale node, or leave '{name}' unconnected"},
        )
    return match_batch(name, m.to(torch.float32).clamp(0.0, 1.0), b, where, of)


def check_same_size(name: str, value: Any, image: torch.Tensor, where: str) -> torch.Tensor:
    """An image batch that must line up pixel for pixel with `image` (albedo, a background, …)."""
    value = check_image(value, where, name)
    if tuple(value.shape[1:3]) != tuple(image.shape[1:3]):
        raise StudioError(
            f"{place(where)}'{name}' is {value.shape[2]}x{value.shape[1]} but the image is "
            f"{image.shape[2]}x{image.shape[1]}; they must be the same size"
        )
    return match_batch(name, value, image.shape[0], where)
