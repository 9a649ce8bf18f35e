"""Run Sapiens2 tasks over a batch of images: the one loop every front-end uses.

One call runs any set of registered tasks in the registry's run order (seg first, so pose takes its person boxes
from it and the dense layers their mask: each task gets the results it `needs`), chunk by chunk with out-of-memory back-off, progress and cancel; each image is converted
and uploaded to the device once per chunk and shared by every task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ... import catalogue
from ...pipeline.boxes import Box
from ...pipeline.images import ImageSource
from ...tasks import registry as tasks_registry
from ...tasks.base import PredictContext
from ...timing import stage
from ..errors import StudioError
from ..runtime.chunking import run_chunked
from ..runtime.host import Host
from ..runtime.models import LoadedModel
from ..sources.batches import TaskBatch, place, require_batch
from .finite import report_nonfinite

NOBODY_CHOICES = (
    "image",
    "empty",
)  # a frame where seg finds nobody: the whole image is one person, or nobody


# The task whose results `run_tasks(seg=…)` takes instead of computing them (other tasks `need` it).
GIVEN_INPUT = "seg"


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
    # normal / albedo / pointmap maps larger than this many bytes come back read in row bands (made when read,
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
    for task, loaded in models.items():
        if not tasks_registry.has(task):
            raise StudioError(
                f"no predictor for task {task!r}; tasks are {', '.join(tasks_registry.names())}"
            )
        if not isinstance(loaded, LoadedModel):
            raise StudioError(
                f"the {task} model input holds a {type(loaded).__name__}, not a loaded Sapiens2 model",
                hints={"comfyui": "connect the output of 'Load Sapiens2 Model'"},
            )
        if loaded.task != task:
            other = tasks_registry.get(loaded.task).label if tasks_registry.has(loaded.task) else loaded.task
            raise StudioError(
                f"this needs a Sapiens2 {tasks_registry.get(task).label} model, but the model given is "
                f"{other} ({loaded.checkpoint}); load {catalogue.task_file_hint(task)}",
                hints={"comfyui": f"pick a *_{task} checkpoint in 'Load Sapiens2 Model'"},
            )
    return list(tasks_registry.run_order(models))


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
        runs here (a result another task `needs`, given instead of computed). masks: (B, H, W) person masks for the
        dense tasks' `mask` (they override the seg foreground).
    labels: a name per image for the notes (e.g. file names); frame numbers otherwise.
    """
    host = host or Host()
    options = options or TaskOptions()
    order = _ordered(models)
    source = ImageSource(images)
    total = len(source)
    if options.boxes is not None and len(options.boxes) != total:
        raise StudioError(f"{place(where)}got box lists for {len(options.boxes)} images but {total} images")
    given: dict[str, TaskBatch] = {}
    if seg is not None:
        seg = require_batch(seg, GIVEN_INPUT, where, tasks_registry.get(GIVEN_INPUT).field)
        if len(seg) != total:
            raise StudioError(
                f"{place(where)}{len(seg)} segmentations for {total} images; give one per image"
            )
        given[seg.task] = seg
    modules = host.activate_all({task: models[task] for task in order})

    def work(start: int, stop: int) -> list[dict[str, Any]]:
        with stage("prepare"):
            prepared = [source.get(i, host.device) for i in range(start, stop)]
        count = stop - start
        out: dict[str, list[Any]] = {}
        for name in order:
            task = tasks_registry.get(name)
            needs: dict[str, list[Any]] = {}
            for need in task.needs:
                if need in out:
                    needs[need] = out[need]
                elif need in given and need not in modules:
                    needs[need] = [given[need][i] for i in range(start, stop)]
            ctx = PredictContext(
                device=host.device,
                output_device=host.output_device,
                should_stop=host.should_stop,
                needs=needs,
                masks=None if masks is None else masks[start:stop],
                boxes=options.boxes,
                flip_test=options.flip_test,
                if_no_person=options.if_no_person,
                keep_logits=options.keep_logits,
                bands_above=options.bands_above,
                start=start,
            )
            with stage(f"{name}.other"):  # the predictor's own loop; its steps report their stages
                out[name] = task.predict(modules[name], prepared, ctx)
        return [{task: out[task][j] for task in order} for j in range(count)]

    per_image = run_chunked(total, options.chunk_size, work, host, what="images")
    batches = {task: TaskBatch(task, [r[task] for r in per_image], models[task].record()) for task in order}
    for batch in batches.values():
        report_warnings(batch, host, where, labels)
    report_nonfinite(batches, host, where, labels)
    return batches


def report_warnings(batch: TaskBatch, host: Host, where: str, labels: Sequence[str] | None = None) -> None:
    """The predictor's per-frame warnings (e.g. pose's 'found no person; used the whole image'), once per kind,
    with the frames (or image names) they concern."""
    task = tasks_registry.get(batch.task)
    frames: dict[str, list[str]] = {}
    for i, result in enumerate(batch.results):
        for warning in task.warnings(result):
            frames.setdefault(warning, []).append(labels[i] if labels else str(i + 1))
    for warning, which in frames.items():
        listed = ", ".join(which[:10]) + (f" and {len(which) - 10} more" if len(which) > 10 else "")
        noun = "" if labels else ("frame " if len(which) == 1 else "frames ")
        host.note(f"{place(where)}{noun}{listed}: {warning}")
