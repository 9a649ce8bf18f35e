"""Task node logic: IMAGE batch + loaded model -> typed results, in chunks with out-of-memory back-off.

Each function checks its inputs (task of the model, empty batch, mask size), asks the runtime for the model on the
compute device, and calls the ``core.pipeline`` predictor one chunk at a time.  Results land on the runtime's
output device (ComfyUI's intermediate device).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from ..core.pipeline.predict import PREDICTORS
from ..core.pipeline.results import PoseResult
from .boxes import boxes_per_image
from .imaging import check_image, check_mask, colorize_labels, depth_preview
from .mask_logic import foreground_masks
from .pose_logic import NOBODY, NOBODY_KEYS
from .runtime import Runtime, run_chunked
from .types import LoadedModel, TaskBatch, require_batch, require_task

OptionsFn = Callable[[int, int], dict[str, Any]]


def predict_batch(
    loaded: LoadedModel,
    task: str,
    image: torch.Tensor,
    node: str,
    *,
    runtime: Runtime,
    chunk_size: int = 4,
    options: OptionsFn | None = None,
) -> TaskBatch:
    """Run the ``task`` predictor over an IMAGE batch, ``chunk_size`` images per forward pass."""
    loaded = require_task(loaded, task, node)
    image = check_image(image, node)
    module = runtime.activate(loaded)
    predictor = PREDICTORS[task]
    accepts_device = "output_device" in inspect.signature(predictor).parameters

    def work(start: int, stop: int) -> list[Any]:
        kwargs = dict(options(start, stop)) if options else {}
        if accepts_device:
            kwargs["output_device"] = runtime.output_device
        return predictor(module, image[start:stop], batch_size=stop - start, **kwargs)

    results = run_chunked(image.shape[0], chunk_size, work, runtime, what="images")
    return TaskBatch(task, results, loaded.model_record())


def _mask_options(mask: torch.Tensor | None) -> OptionsFn | None:
    if mask is None:
        return None
    return lambda start, stop: {"seg": [m > 0.5 for m in mask[start:stop]]}


def segment(loaded, image, *, runtime: Runtime, chunk_size: int = 4, node: str = "Sapiens2 Segment"):
    """Segmentation + colour preview IMAGE + foreground MASK."""
    seg = predict_batch(loaded, "seg", image, node, runtime=runtime, chunk_size=chunk_size)
    rgb = check_image(image, node)
    preview = torch.stack(
        [colorize_labels(r.labels.cpu(), rgb[i].cpu(), opacity=0.6) for i, r in enumerate(seg.results)]
    )
    return seg, preview.to(runtime.output_device), foreground_masks(seg).to(runtime.output_device)


def dense(
    loaded,
    task: str,
    image,
    *,
    mask: torch.Tensor | None = None,
    runtime: Runtime,
    chunk_size: int = 2,
    node: str,
) -> TaskBatch:
    """Normals / albedo / pointmap, with an optional MASK (1 = person) recorded in each result."""
    rgb = check_image(image, node)
    mask = check_mask(mask, rgb, node)
    return predict_batch(
        loaded, task, rgb, node, runtime=runtime, chunk_size=chunk_size, options=_mask_options(mask)
    )


def albedo_image(batch: TaskBatch, output_device) -> torch.Tensor:
    """Albedo results -> IMAGE (background black where a mask was given)."""
    out = []
    for r in batch.results:
        a = r.albedo.to(torch.float32)
        if r.mask is not None:
            a = a * r.mask.to(a.device)[..., None]
        out.append(a.clamp(0.0, 1.0))
    return torch.stack(out).to(output_device)


def pointmap_previews(batch: TaskBatch, *, near_bright: bool, per_image: bool, output_device):
    """Depth preview IMAGE and valid-depth MASK for a pointmap batch."""
    depths, valid = [], []
    for r in batch.results:
        d = r.points[..., 2].to(torch.float32).cpu()
        ok = torch.isfinite(d) & (d > 0)
        if r.mask is not None:
            ok &= r.mask.cpu().bool()
        depths.append(d)
        valid.append(ok)
    preview = depth_preview(depths, valid, near_bright=near_bright, per_image=per_image)
    return preview.to(output_device), torch.stack(valid).to(torch.float32).to(output_device)


def pose(
    loaded,
    image,
    *,
    bboxes: Any = None,
    seg_model: LoadedModel | None = None,
    seg: TaskBatch | None = None,
    flip_test: bool = True,
    when_nobody: str = NOBODY[0],
    runtime: Runtime,
    chunk_size: int = 4,
    node: str = "Sapiens2 Pose",
) -> TaskBatch:
    """Top-down pose: given boxes, else boxes from segmentation (a seg model or seg results), else whole image.

    ``when_nobody`` decides a frame where the segmentation finds no person: the whole image, or no people."""
    loaded = require_task(loaded, "pose", node)
    if when_nobody not in NOBODY_KEYS:
        raise ValueError(f"{node}: unknown when_nobody {when_nobody!r}; choose one of {', '.join(NOBODY)}")
    rgb = check_image(image, node)
    b, h, w = rgb.shape[:3]
    per_image = boxes_per_image(bboxes, b, w, h, node)
    seg_results = None
    if seg is not None:
        seg_results = require_batch(seg, "seg", node, "seg").results
        if len(seg_results) != b:
            raise ValueError(f"{node}: {len(seg_results)} segmentations for {b} images; give one per image")
    elif seg_model is not None and (per_image is None or any(not boxes for boxes in per_image)):
        seg_results = predict_batch(
            seg_model, "seg", rgb, node, runtime=runtime, chunk_size=chunk_size
        ).results

    # Frames whose connected boxes are empty (the detector found nobody) have no people: without segmentation
    # to fall back on, the predictor would otherwise take the whole image as one person.
    run = [i for i in range(b) if seg_results is not None or per_image is None or per_image[i]]

    def options(start: int, stop: int) -> dict[str, Any]:
        frames = run[start:stop]
        opts: dict[str, Any] = {"flip_test": flip_test, "if_no_person": NOBODY_KEYS[when_nobody]}
        if per_image is not None:
            opts["boxes"] = [per_image[i] for i in frames]
        if seg_results is not None:
            opts["seg"] = [seg_results[i] for i in frames]
        return opts

    results: list[Any] = [PoseResult([], (w, h)) for _ in range(b)]
    if run:
        frames = rgb if len(run) == b else rgb[run]  # no copy of a whole video batch
        found = predict_batch(
            loaded, "pose", frames, node, runtime=runtime, chunk_size=chunk_size, options=options
        )
        for i, result in zip(run, found.results):
            results[i] = result
    _report_warnings(results, runtime, node)
    return TaskBatch("pose", results, loaded.model_record())


def _report_warnings(results: list[Any], runtime: Runtime, node: str) -> None:
    """Show the pipeline's per-frame warnings (e.g. 'found no person; used the whole image') once per kind."""
    frames: dict[str, list[int]] = {}
    for i, result in enumerate(results):
        for warning in getattr(result, "warnings", None) or []:
            frames.setdefault(warning, []).append(i + 1)
    for warning, where in frames.items():
        listed = ", ".join(map(str, where[:10])) + (f" and {len(where) - 10} more" if len(where) > 10 else "")
        runtime.note(f"{node}: frame {listed}: {warning}")
