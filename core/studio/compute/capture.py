"""Task results → capture frames: the one path from predictions to what a bundle stores.

The CLI, the Python API, ComfyUI's Save Capture Bundle and the Ray workers all build their bundles here, so the
same photo and checkpoints give the same file everywhere. Rules (docs/formats.md):
- the person mask is the given mask, else the segmentation's foreground (label > 0), else where the matte's
  alpha is at least 0.5 (the soft alpha itself is stored as its own layer, never as the mask);
- pointmap points outside the person mask are not stored (invalid), as in the official demo, and 3D keypoints
  are sampled from the stored points only;
- the camera comes from the pointmap's intrinsics when the predicted scale gives a valid focal length, else the
  default camera (its `source` says which, and `reason` why a pointmap gave none);
- model records are listed in the run order of the catalogue.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...formats.arrays import to_numpy
from ...formats.bundle import CaptureFrame, default_camera
from ...tasks import registry as tasks_registry
from ...tasks.base import StoreContext, Task
from ...timing import stage
from ..errors import StudioError
from ..runtime.host import Host
from ..sources.batches import TaskBatch, place, require_batch
from .geometry_checks import can_check, check_geometry


class _BatchFields(Mapping[str, str]):
    """Task → the input/attribute name of its results (`Task.field`), read from the registry when asked."""

    def __getitem__(self, task: str) -> str:
        return tasks_registry.get(task).field

    def __iter__(self) -> Iterator[str]:
        return iter(tasks_registry.names())

    def __len__(self) -> int:
        return len(tasks_registry.names())


BATCH_FIELDS: Mapping[str, str] = _BatchFields()


def _image_list(images: Any, where: str) -> list[np.ndarray]:
    """(B, H, W, C) tensor/array or a list of H×W×C arrays → list of numpy images (RGB, alpha dropped)."""
    if hasattr(images, "shape") and len(images.shape) == 4:
        return [to_numpy(images[i])[..., :3] for i in range(images.shape[0])]
    if isinstance(images, Sequence) and not isinstance(images, (str, bytes)):
        out = []
        for image in images:
            arr = to_numpy(image)
            out.append(arr[..., :3] if arr.ndim == 3 else arr)
        if out:
            return out
    raise StudioError(f"{place(where)}expected a non-empty batch of images")


def _check(batch: TaskBatch | None, task: Task, count: int, where: str) -> TaskBatch | None:
    if batch is None:
        return None
    batch = require_batch(batch, task.name, where, task.field)
    if len(batch) not in (1, count):
        raise StudioError(f"{place(where)}'{task.field}' has {len(batch)} results for {count} images")
    return batch


def _result_size(task: Task, result: Any) -> tuple[int, int]:
    size = task.result_size(result)
    return TaskBatch(task.name, [result]).size if size is None else size


def model_records(batches: Mapping[str, TaskBatch | None]) -> list[dict[str, Any]]:
    """The bundle's `models` list, in run order."""
    held = [t for t in batches if tasks_registry.has(t)]
    return [
        dict(batches[t].model)  # type: ignore[union-attr, arg-type]
        for t in tasks_registry.run_order(held)
        if batches.get(t) is not None and batches[t].model  # type: ignore[union-attr]
    ]


def capture_frames(
    images: Any,
    batches: Mapping[str, TaskBatch | None],
    *,
    albedo_image: Any = None,
    mask: Any = None,
    source_names: Sequence[str | None] | None = None,
    host: Host | None = None,
    where: str = "",
    consume: bool = False,
    first: int = 0,
    total: int | None = None,
) -> list[CaptureFrame]:
    """One CaptureFrame per image from task batches (task → TaskBatch, any subset).

    albedo_image: an albedo image batch (B, H, W, 3) used when no albedo results are given (ComfyUI passes the
    Albedo node's IMAGE). mask: (B, H, W) person mask overriding the segmentation's foreground.
    Each frame gets the cross-task geometry checks its results allow (`frame.checks`); poor ones become notes on
    `host`, named by the source name (or the frame number). `consume`: the caller hands the results over (the
    engine's job drops them after capture), so a pointmap is masked in its own memory instead of copied (648 MB
    less on a 9000×6000 photo); the frame's points then share that memory, and a seg result's labels become the
    frame's int32 labels (the int64 ones are released at once). `first`, `total`: the images are frames
    `first`.. of a batch of `total` given in windows (a long clip in bounded memory), for the messages' numbers.
    """
    pictures = _image_list(images, where)
    count = len(pictures)
    order = [tasks_registry.get(name) for name in tasks_registry.run_order()]
    checked = {task.name: _check(batches.get(task.name), task, count, where) for task in order}
    records = model_records(checked)
    masks = None if mask is None else to_numpy(mask).astype(np.float32)
    if masks is not None and masks.ndim == 2:
        masks = masks[None]
    albedos = None if albedo_image is None else _image_list(albedo_image, where)
    # tasks whose data can give the person mask store first (seg: its int32 labels first, so that, consumed, the
    # int64 ones are released before the mask is made); the others after the checks, which read the model's own
    # values (a pointmap is masked in its own memory when consumed)
    maskers = sorted((t for t in order if t.mask_rank is not None), key=lambda t: t.mask_rank)  # type: ignore[arg-type, return-value]
    frames = []
    for i, picture in enumerate(pictures):
        height, width = picture.shape[:2]
        which = "the image" if (total or count) == 1 else f"image {first + i + 1}"
        results = {
            task.name: (None if checked[task.name] is None else checked[task.name][i]) for task in order
        }
        for task in order:
            result = results[task.name]
            if result is not None and _result_size(task, result) != (width, height):
                w, h = _result_size(task, result)
                raise StudioError(
                    f"{place(where)}'{task.field}' is {w}x{h} but {which} is {width}x{height}; connect "
                    "results computed from this same image"
                )
        frame = CaptureFrame(
            width=width,
            height=height,
            image=picture,
            mask=None,
            models=records,
            source_name=None if source_names is None else source_names[i],
        )
        frame.camera = default_camera(width, height)
        early = StoreContext(consume=consume)
        for task in maskers:
            if results[task.name] is not None:
                task.store(frame, results[task.name], early)
        if masks is not None:
            frame.mask = masks[min(i, len(masks) - 1)]
            if frame.mask.shape != (height, width):
                raise StudioError(
                    f"{place(where)}the mask is {frame.mask.shape[1]}x{frame.mask.shape[0]} but {which} is "
                    f"{width}x{height}"
                )
        else:
            frame.mask = next(
                (
                    m
                    for t in maskers
                    if results[t.name] is not None and (m := t.person_mask(frame)) is not None
                ),
                None,
            )
        frame.checks = _checks(results, frame.mask)  # before any masking: the checks read the model's points
        late = StoreContext(consume=consume, mask=frame.mask)
        for task in order:
            if task.mask_rank is None and results[task.name] is not None:
                task.store(frame, results[task.name], late)
        if frame.albedo is None and albedos is not None:
            frame.albedo = albedos[min(i, len(albedos) - 1)].astype(np.float32)
        if host is not None and frame.checks is not None:
            label = (source_names[i] if source_names else None) or (
                f"frame {first + i + 1}" if (total or count) > 1 else ""
            )
            for warning in frame.checks.warnings:
                host.note(f"{label}: {warning}" if label else warning)
        frames.append(frame)
    return frames


def _checks(results: Mapping[str, Any], mask: np.ndarray | None) -> Any:
    """The geometry self-checks of one frame, where at least one can run (normals, or pose/pointmap with a
    person mask); None otherwise. Each task says which input of the checks its result is (`geometry_input`)."""
    inputs = {
        task.geometry_input: results[task.name]
        for task in tasks_registry.all_tasks()
        if task.geometry_input is not None and results.get(task.name) is not None
    }
    if not can_check(**inputs, mask=mask):
        return None
    with stage("checks"):
        return check_geometry(**inputs, mask=mask)
