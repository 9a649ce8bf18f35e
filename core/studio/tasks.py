"""Run Sapiens2 tasks over a batch of images: the one loop every front-end uses.

One call runs any set of tasks in the catalogue's order (seg first, so pose takes its person boxes from it and the
dense layers their mask), chunk by chunk with out-of-memory back-off, progress and cancel; each image is converted
and uploaded to the device once per chunk and shared by every task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import catalogue
from ..pipeline.boxes import Box
from ..pipeline.images import ImageSource
from ..pipeline.predict import PREDICTORS
from ..pipeline.results import PoseResult
from .batches import TaskBatch, place, require_batch
from .chunking import run_chunked
from .errors import StudioError
from .finite import report_nonfinite
from .host import Host
from .models import LoadedModel

NOBODY_CHOICES = (
    "image",
    "empty",
)  # a frame where seg finds nobody: the whole image is one person, or nobody


@dataclass
class TaskOptions:
    """How the tasks run; the defaults are the official test settings.

    boxes: per image a list of person boxes (x1, y1, x2, y2); an empty list means the detector found nobody there.
    if_no_person: "image" takes the whole image as one person where segmentation finds nobody, "empty" gives nobody.
    """

    chunk_size: int = 4
    flip_test: bool = True
    if_no_person: str = "image"
    boxes: Sequence[Sequence[Box] | None] | None = None
    keep_logits: bool = False
    # normal / albedo / pointmap maps larger than this many bytes come back as BandedArrays (made when read,
    # bit-identical); None: whole tensors, as ComfyUI and the Python API's results need
    bands_above: int | None = None

    def __post_init__(self) -> None:
        if self.if_no_person not in NOBODY_CHOICES:
            raise StudioError(
                f"if_no_person must be one of {', '.join(NOBODY_CHOICES)}, got {self.if_no_person!r}"
            )
        if self.chunk_size < 1:
            raise StudioError(f"the chunk size must be at least 1, got {self.chunk_size}")


def _ordered(models: Mapping[str, LoadedModel]) -> list[str]:
    unknown = sorted(set(models) - set(catalogue.RUN_ORDER))
    if unknown:
        raise StudioError(f"no predictor for task {unknown[0]!r}; tasks are {', '.join(catalogue.TASKS)}")
    for task, loaded in models.items():
        if not isinstance(loaded, LoadedModel):
            raise StudioError(
                f"the {task} model input holds a {type(loaded).__name__}, not a loaded Sapiens2 model",
                hints={"comfyui": "connect the output of 'Load Sapiens2 Model'"},
            )
        if loaded.task != task:
            raise StudioError(
                f"this needs a Sapiens2 {catalogue.TASK_LABELS[task]} model, but the model given is "
                f"{catalogue.TASK_LABELS.get(loaded.task, loaded.task)} ({loaded.checkpoint}); load "
                f"{catalogue.task_file_hint(task)}",
                hints={"comfyui": f"pick a *_{task} checkpoint in 'Load Sapiens2 Model'"},
            )
    return [t for t in catalogue.RUN_ORDER if t in models]


def run_tasks(
    models: Mapping[str, LoadedModel],
    images: Any,
    host: Host | None = None,
    options: TaskOptions | None = None,
    *,
    seg: TaskBatch | None = None,
    masks: torch.Tensor | None = None,
    labels: Sequence[str] | None = None,
    where: str = "",
) -> dict[str, TaskBatch]:
    """Task → results for every image.

    images: a list of H×W×3 arrays / PIL images, or a (B, H, W, C) tensor in [0, 1].
    seg: segmentation computed elsewhere (one per image), used for pose boxes and dense masks when no seg model
        runs here. masks: (B, H, W) person masks for the dense tasks' `mask` (they override the seg foreground).
    labels: a name per image for the notes (e.g. file names); frame numbers otherwise.
    """
    host = host or Host()
    options = options or TaskOptions()
    order = _ordered(models)
    source = ImageSource(images)
    total = len(source)
    if options.boxes is not None and len(options.boxes) != total:
        raise StudioError(f"{place(where)}got box lists for {len(options.boxes)} images but {total} images")
    if seg is not None:
        seg = require_batch(seg, "seg", where, "seg")
        if len(seg) != total:
            raise StudioError(
                f"{place(where)}{len(seg)} segmentations for {total} images; give one per image"
            )
    modules = host.activate_all({task: models[task] for task in order})

    def work(start: int, stop: int) -> list[dict[str, Any]]:
        prepared = [source.get(i, host.device) for i in range(start, stop)]
        count = stop - start
        common = {"should_stop": host.should_stop}
        out: dict[str, list[Any]] = {}
        segs = [seg[i] for i in range(start, stop)] if seg is not None and "seg" not in modules else None
        for task in order:
            module = modules[task]
            if task == "seg":
                out[task] = PREDICTORS[task](
                    module,
                    prepared,
                    batch_size=count,
                    keep_logits=options.keep_logits,
                    output_device=host.output_device,
                    **common,
                )
                segs = out[task]
            elif task == "pose":
                out[task] = _pose(module, prepared, start, segs, options, common)
            else:
                dense_masks = None
                if masks is not None:
                    dense_masks = [m > 0.5 for m in masks[start:stop]]
                elif segs is not None:
                    dense_masks = segs
                banding = {} if task == "matting" else {"bands_above": options.bands_above}
                out[task] = PREDICTORS[task](
                    module,
                    prepared,
                    batch_size=count,
                    seg=dense_masks,
                    output_device=host.output_device,
                    **banding,
                    **common,
                )
        return [{task: out[task][j] for task in order} for j in range(count)]

    per_image = run_chunked(total, options.chunk_size, work, host, what="images")
    batches = {task: TaskBatch(task, [r[task] for r in per_image], models[task].record()) for task in order}
    if "pose" in batches:
        report_pose_warnings(batches["pose"], host, where, labels)
    report_nonfinite(batches, host, where, labels)
    return batches


def _pose(
    module: Any,
    prepared: list[Any],
    start: int,
    segs: list[Any] | None,
    options: TaskOptions,
    common: dict[str, Any],
) -> list[PoseResult]:
    """Pose for one chunk: frames whose given boxes are empty (a detector found nobody) have nobody, unless a
    segmentation can find people there."""
    count = len(prepared)
    boxes = None if options.boxes is None else [options.boxes[start + j] for j in range(count)]
    run = [j for j in range(count) if segs is not None or boxes is None or boxes[j] is None or boxes[j]]
    results: list[PoseResult] = [PoseResult([], p.size) for p in prepared]
    if not run:
        return results
    found = PREDICTORS["pose"](
        module,
        [prepared[j] for j in run],
        boxes=None if boxes is None else [boxes[j] or None for j in run],
        seg=None if segs is None else [segs[j] for j in run],
        flip_test=options.flip_test,
        batch_size=len(run),
        if_no_person=options.if_no_person,
        **common,
    )
    for j, result in zip(run, found):
        results[j] = result
    return results


def report_pose_warnings(
    batch: TaskBatch, host: Host, where: str, labels: Sequence[str] | None = None
) -> None:
    """The predictor's per-frame warnings (e.g. 'found no person; used the whole image'), once per kind, with the
    frames (or image names) they concern."""
    frames: dict[str, list[str]] = {}
    for i, result in enumerate(batch.results):
        for warning in getattr(result, "warnings", None) or []:
            frames.setdefault(warning, []).append(labels[i] if labels else str(i + 1))
    for warning, which in frames.items():
        listed = ", ".join(which[:10]) + (f" and {len(which) - 10} more" if len(which) > 10 else "")
        noun = "" if labels else ("frame " if len(which) == 1 else "frames ")
        host.note(f"{place(where)}{noun}{listed}: {warning}")
