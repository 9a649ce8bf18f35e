"""Predictors: a loaded model + images → one typed result per image.

Every predictor runs under `torch.inference_mode()`, on the model's device and dtype, calls `should_stop()` before
each forward pass (ComfyUI interrupts: return True, or raise your own exception, to stop), and refuses a model of
another task. Each has a batch kernel (`_seg_batch`, `_dense_batch`, `_pose_batch`) that runs the images it is
given as they come and never splits them; the public functions cut a long list into `batch_size` chunks with the
project's one chunker (`core.chunks.in_chunks`, which the engine's `run_chunked` also uses) and call
`progress(done, total)` after each chunk.
Images: a list of H×W×3 arrays (uint8 / uint16 / float 0..1) or PIL images, or a (B, H, W, 3) float tensor in
0..1 (ComfyUI IMAGE). Results live on `output_device` (CPU by default). `bands_above` (normal, albedo,
pointmap; bytes): a CPU map larger than that comes back read in row bands (`results.DenseMap`), made band by
band when read and bit-identical to the whole map (the engine's job asks for it, so a 9000×6000 photo never holds its maps whole).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..chunks import in_chunks
from ..timing import stage
from .boxes import boxes_for_image
from .errors import PipelineError, PredictionInterrupted, TaskMismatchError
from .images import AlphaMode, ImageSource, PreparedImage
from .matting_predictor import predict_matting
from .metadata import flip_indices
from .pose_decode import average_flip, crop_to_image, decode_heatmaps
from .postprocess import (
    albedo_banded,
    albedo_to_image,
    can_band,
    count_nonfinite,
    default_intrinsics,
    normals_banded,
    normals_to_image,
    pointmap_banded,
    pointmap_intrinsics,
    pointmap_to_image,
    seg_to_labels,
)
from .preprocess import (
    NET_H,
    NET_W,
    DenseLayout,
    normalize,
    pose_crop,
    preprocess_dense,
    preprocess_pose_crop,
    preprocess_seg,
)
from .results import (
    AlbedoResult,
    NormalResult,
    PersonPose,
    PointmapResult,
    PoseResult,
    SegResult,
)

ProgressFn = Callable[[int, int], Any]
StopFn = Callable[[], Any]


def _check_task(model: Any, task: str) -> None:
    got = getattr(model, "task", None)
    if got != task:
        raise TaskMismatchError(
            f"this is a {task} predictor but the model is a {got!r} model; load a Sapiens2 {task} checkpoint "
            f"(e.g. sapiens2_1b_{task}.safetensors) or call predict_{got}()"
        )


def _forward(model: Any, batch: Tensor, should_stop: StopFn | None) -> Any:
    if should_stop is not None and should_stop():
        raise PredictionInterrupted("prediction stopped by request")
    task = getattr(model, "task", "?")
    with stage(f"{task}.normalize"):
        inputs = normalize(batch).to(dtype=model.dtype)
    with stage(f"{task}.forward"):
        return model(inputs)


def _check_batch_size(size: int) -> None:
    if size < 1:
        raise PipelineError(f"batch_size must be ≥ 1, got {size}")


def _masks(seg: Sequence[Any] | None, count: int) -> list[Tensor | None]:
    if seg is None:
        return [None] * count
    if len(seg) != count:
        raise PipelineError(f"got {len(seg)} segmentation results for {count} images; pass one per image")
    return [s.foreground() if isinstance(s, SegResult) else torch.as_tensor(s).bool() for s in seg]


def predict_seg(
    model: Any,
    images: Any,
    *,
    batch_size: int = 4,
    keep_logits: bool = False,
    output_device: str | torch.device = "cpu",
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    alpha: AlphaMode = "composite",
) -> list[SegResult]:
    """29-class body-part segmentation at the original resolution."""
    _check_task(model, "seg")
    source = ImageSource(images, alpha=alpha)
    _check_batch_size(batch_size)

    def work(start: int, stop: int) -> list[SegResult]:
        prepared = [source.get(i, model.device) for i in range(start, stop)]
        return _seg_batch(model, prepared, keep_logits, output_device, should_stop)

    with torch.inference_mode():
        return in_chunks(len(source), batch_size, work, progress=progress)


def _seg_batch(
    model: Any,
    prepared: Sequence[PreparedImage],
    keep_logits: bool,
    output_device: str | torch.device,
    should_stop: StopFn | None,
) -> list[SegResult]:
    """One forward pass over all of `prepared` (never split: the caller chose the batch)."""
    with stage("seg.preprocess"):
        batch = torch.stack([preprocess_seg(p.pixels, quantize=p.quantized) for p in prepared])
    logits = _forward(model, batch, should_stop).to(torch.float32)
    results: list[SegResult] = []
    for j, p in enumerate(prepared):
        with stage("seg.post"):
            labels, full = seg_to_labels(logits[j : j + 1], p.size, keep_logits=keep_logits)
        bad = count_nonfinite(logits[j])
        results.append(
            SegResult(labels.to(output_device), None if full is None else full.to(output_device), bad)
        )
    return results


def _dense_input(prepared: PreparedImage, task: str) -> tuple[Tensor, DenseLayout]:
    """The dense tasks' network input and layout of one image. Normal, albedo and pointmap pre-process an image
    identically, so it is computed once (timed as the first dense `task`'s) and kept with the prepared image for
    the other dense tasks."""
    if "dense" not in prepared.derived:
        with stage(f"{task}.preprocess"):
            prepared.derived["dense"] = preprocess_dense(prepared.pixels, quantize=prepared.quantized)
    return prepared.derived["dense"]


def _bands(model: Any, layout: DenseLayout, output_device: str | torch.device, above: int | None) -> bool:
    """Whether one image's dense map is made band by band when read instead of whole: asked for (`above`:
    bytes of a float32 (H, W, 3) map), larger than that, post-processed on the CPU, and exact there
    (`can_band`)."""
    if above is None or torch.device(str(model.device)).type != "cpu":
        return False
    width, height = layout.image_size
    cpu_result = torch.device(str(output_device)).type == "cpu"
    return cpu_result and width * height * 12 > above and can_band(layout)


def _dense_options(
    batch_size: int,
    progress: ProgressFn | None,
    should_stop: StopFn | None,
    alpha: AlphaMode,
    bands_above: int | None,
) -> dict[str, Any]:
    """The keyword options every dense predictor hands `_predict_dense`."""
    return {
        "batch_size": batch_size,
        "progress": progress,
        "should_stop": should_stop,
        "alpha": alpha,
        "bands_above": bands_above,
    }


def _predict_dense(
    model: Any,
    images: Any,
    task: str,
    options: dict[str, Any],
    seg: Sequence[Any] | None,
    output_device: str | torch.device,
    build: Callable[[Any, int, Any, bool], Any],
) -> list[Any]:
    """Shared loop of the dense tasks: `build(raw output, index in batch, layout, banded)` makes one result (on
    the model's device, or read in row bands where `_bands` says so); results move to `output_device` and get the
    seg foreground as `mask` when given."""
    _check_task(model, task)
    source = ImageSource(images, alpha=options["alpha"])
    _check_batch_size(options["batch_size"])

    def work(start: int, stop: int) -> list[Any]:
        prepared = [source.get(i, model.device) for i in range(start, stop)]
        return _dense_batch(model, prepared, options, output_device, build)

    with torch.inference_mode():
        results = in_chunks(len(source), options["batch_size"], work, progress=options["progress"])
    with stage(f"{task}.post"):
        masks = _masks(seg, len(results))
    for result, mask in zip(results, masks):
        result.mask = None if mask is None else mask.to(output_device)
    return results


def _dense_batch(
    model: Any,
    prepared: Sequence[PreparedImage],
    options: dict[str, Any],
    output_device: str | torch.device,
    build: Callable[[Any, int, Any, bool], Any],
) -> list[Any]:
    """One forward pass of a dense task over all of `prepared` (never split: the caller chose the batch)."""
    task = getattr(model, "task", "?")
    staged = [_dense_input(p, task) for p in prepared]
    out = _forward(model, torch.stack([s[0] for s in staged]), options["should_stop"])
    results: list[Any] = []
    for j, (_, layout) in enumerate(staged):
        banded = _bands(model, layout, output_device, options.get("bands_above"))
        with stage(f"{task}.post"):
            result = build(out, j, layout, banded)
        if not banded:
            field = next(f for f in ("normals", "albedo", "points") if hasattr(result, f))
            setattr(result, field, getattr(result, field).to(output_device))  # free device memory now
        results.append(result)
    return results


def predict_normal(
    model: Any,
    images: Any,
    *,
    batch_size: int = 2,
    seg: Sequence[Any] | None = None,
    output_device: str | torch.device = "cpu",
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    alpha: AlphaMode = "composite",
    bands_above: int | None = None,
) -> list[NormalResult]:
    """Unit surface normals (H, W, 3) in the canonical OpenCV camera frame (x right, y down, z forward; converted
    from the model's OpenGL frame in post-processing, see `normals_to_image`); `seg` (one SegResult per image)
    adds a mask."""

    def build(raw: Tensor, j: int, layout: Any, banded: bool) -> NormalResult:
        if banded:
            return NormalResult(normals_banded(raw[j : j + 1], layout), None)  # type: ignore[arg-type]
        return NormalResult(normals_to_image(raw[j : j + 1], layout)[0].permute(1, 2, 0), None)

    options = _dense_options(batch_size, progress, should_stop, alpha, bands_above)
    return _predict_dense(model, images, "normal", options, seg, output_device, build)


def predict_albedo(
    model: Any,
    images: Any,
    *,
    batch_size: int = 2,
    seg: Sequence[Any] | None = None,
    output_device: str | torch.device = "cpu",
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    alpha: AlphaMode = "composite",
    bands_above: int | None = None,
) -> list[AlbedoResult]:
    """Albedo (H, W, 3) in [0, 1], sRGB-encoded as the model predicts it."""

    def build(raw: Tensor, j: int, layout: Any, banded: bool) -> AlbedoResult:
        if banded:
            return AlbedoResult(albedo_banded(raw[j : j + 1], layout), None)  # type: ignore[arg-type]
        return AlbedoResult(albedo_to_image(raw[j : j + 1], layout)[0].permute(1, 2, 0), None)

    options = _dense_options(batch_size, progress, should_stop, alpha, bands_above)
    return _predict_dense(model, images, "albedo", options, seg, output_device, build)


def predict_pointmap(
    model: Any,
    images: Any,
    *,
    batch_size: int = 2,
    seg: Sequence[Any] | None = None,
    output_device: str | torch.device = "cpu",
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    alpha: AlphaMode = "composite",
    bands_above: int | None = None,
) -> list[PointmapResult]:
    """Metric XYZ (H, W, 3) in the OpenCV camera frame, the predicted scale and the implied intrinsics."""

    def build(raw: Any, j: int, layout: Any, banded: bool) -> PointmapResult:
        points, scale = raw
        s = scale[j : j + 1].to(torch.float32)
        if banded:
            xyz: Any = pointmap_banded(points[j : j + 1], s, layout)
        else:
            xyz = pointmap_to_image(points[j : j + 1], s, layout)[0].permute(1, 2, 0)
        value = float(s.reshape(-1)[0])
        if value > 0 and math.isfinite(value):
            return PointmapResult(xyz, value, pointmap_intrinsics(value, layout).as_tuple(), None)  # type: ignore[arg-type]
        reason = "pointmap scale ≤ 0" if value <= 0 else "pointmap scale not finite"
        intr = default_intrinsics(*layout.image_size).as_tuple()
        return PointmapResult(xyz, value, intr, None, f"default ({reason})")  # type: ignore[arg-type]

    options = _dense_options(batch_size, progress, should_stop, alpha, bands_above)
    return _predict_dense(model, images, "pointmap", options, seg, output_device, build)


def predict_pose(
    model: Any,
    images: Any,
    *,
    boxes: Sequence[Sequence[Any] | None] | None = None,
    seg: Sequence[SegResult] | Any | None = None,
    flip_test: bool = True,
    batch_size: int = 4,
    if_no_person: str = "image",
    max_refine_step: float | None = None,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    alpha: AlphaMode = "composite",
    **seg_box_options: Any,
) -> list[PoseResult]:
    """Top-down 308-keypoint pose.

    boxes: per image, a list of person boxes (x1, y1, x2, y2 corner-origin pixels, or {x, y, width, height});
        None/empty for an image → boxes from `seg` if given (a list of SegResult, or a seg model, run chunk by chunk),
        else the whole image. `if_no_person` ("image" | "empty" | "error") applies when seg finds nobody.
    batch_size: person crops per forward pass (the flip test doubles the pass to 2× batch_size inputs).
    """
    _check_task(model, "pose")
    source = ImageSource(images, alpha=alpha)
    total = len(source)
    if boxes is not None and len(boxes) != total:
        raise PipelineError(
            f"got box lists for {len(boxes)} images but {total} images; pass one list per image"
        )
    seg_model = None
    if seg is not None and not isinstance(seg, (list, tuple)):
        seg_model, seg = seg, None  # run per chunk below: a long batch never holds every label map at once
        _check_task(seg_model, "seg")
    if seg is not None and len(seg) != total:
        raise PipelineError(f"got {len(seg)} segmentation results for {total} images; pass one per image")
    _check_batch_size(batch_size)
    batch = _PoseBatch(
        model, source, boxes, flip_test, batch_size, if_no_person, max_refine_step, should_stop
    )

    def work(start: int, stop: int) -> list[PoseResult]:
        chunk = range(start, stop)
        chunk_seg: dict[int, Any] = {}
        if seg_model is not None:  # one seg pass over the chunk's images (a batch of them, not split)
            subset = source.subset(start, stop)
            segs = predict_seg(seg_model, subset, batch_size=len(chunk), alpha=alpha, should_stop=should_stop)
            chunk_seg = dict(zip(chunk, segs))
        elif seg is not None:
            chunk_seg = {i: seg[i] for i in chunk}
        return batch.run(chunk, chunk_seg, seg_box_options)

    return in_chunks(total, batch_size, work, progress=progress)


class _PoseBatch:
    """Pose over one batch of images: person boxes, then their crops `crops_per_pass` at a time (the crop passes
    are cut by the one chunker too, so their sizes, and with them the bits of the forward passes, are those of
    every earlier release)."""

    def __init__(
        self,
        model: Any,
        source: ImageSource,
        boxes: Sequence[Sequence[Any] | None] | None,
        flip_test: bool,
        crops_per_pass: int,
        if_no_person: str,
        max_refine_step: float | None,
        should_stop: StopFn | None,
    ) -> None:
        self.model, self.source, self.boxes, self.flip_test = model, source, boxes, flip_test
        self.crops_per_pass, self.if_no_person = crops_per_pass, if_no_person
        self.max_refine_step, self.should_stop = max_refine_step, should_stop
        self.flips = flip_indices()

    def run(
        self, chunk: range, chunk_seg: dict[int, Any], seg_box_options: dict[str, Any]
    ) -> list[PoseResult]:
        """The results of images `chunk` (indices of the source); `chunk_seg`: image index → its segmentation."""
        plans = []  # (image index, box (corner), source, PoseCrop)
        results: dict[int, PoseResult] = {}
        for i in chunk:
            size = self.source.size(i)
            labels = chunk_seg[i].labels if i in chunk_seg else None
            with stage("pose.boxes"):
                chosen, box_source, notes = boxes_for_image(
                    size,
                    None if self.boxes is None else self.boxes[i],
                    labels,
                    if_no_person=self.if_no_person,
                    **seg_box_options,
                )
            results[i] = PoseResult([], size, list(notes))
            for b in chosen:
                ref_box = (b[0] - 0.5, b[1] - 0.5, b[2] - 0.5, b[3] - 0.5)  # → pixel-centre convention
                plans.append((i, b, box_source, pose_crop(ref_box)))
        with torch.inference_mode():
            prepared = {i: self.source.get(i, self.model.device) for i in {p[0] for p in plans}}

            def crops(start: int, stop: int) -> list[PersonPose]:
                people = self._people(plans[start:stop], prepared)
                for (i, *_), person in zip(plans[start:stop], people):
                    results[i].people.append(person)
                return people

            in_chunks(len(plans), self.crops_per_pass, crops)  # `prepared` goes with this call
        return [results[i] for i in chunk]

    def _people(self, items: list[Any], prepared: dict[int, PreparedImage]) -> list[PersonPose]:
        """One forward pass (two images per crop with the flip test) over all of `items`' crops."""
        with stage("pose.preprocess"):
            crops = torch.stack(
                [
                    preprocess_pose_crop(prepared[i].pixels, c, quantize=prepared[i].quantized)
                    for i, _, _, c in items
                ]
            )
            inputs = torch.cat([crops, crops.flip(-1)]) if self.flip_test else crops
        heatmaps = _forward(self.model, inputs, self.should_stop).to(torch.float32)
        with stage("pose.decode"):
            if self.flip_test:
                n = len(items)
                heatmaps = average_flip(heatmaps[:n], heatmaps[n:], self.flips)
            kp, scores = decode_heatmaps(heatmaps, (NET_W, NET_H), max_refine_step=self.max_refine_step)
        people = []
        for k, (_, box, box_source, crop) in enumerate(items):
            with stage("pose.decode"):
                xy = crop_to_image(kp[k], crop.center, crop.scale, (NET_W, NET_H)) + 0.5
            sc = scores[k].detach().cpu().numpy().astype("float32")
            kps = np.empty((xy.shape[0], 3), dtype=np.float32)
            kps[:, :2], kps[:, 2] = xy, sc
            people.append(PersonPose(tuple(box), kps, box_source))  # type: ignore[arg-type]
        return people


PREDICTORS: dict[str, Callable[..., list[Any]]] = {
    "pose": predict_pose,
    "seg": predict_seg,
    "normal": predict_normal,
    "albedo": predict_albedo,
    "pointmap": predict_pointmap,
    "matting": predict_matting,
}


def predict(model: Any, images: Any, **options: Any) -> list[Any]:
    """Run the predictor that matches `model.task`."""
    task = getattr(model, "task", None)
    if task not in PREDICTORS:
        raise TaskMismatchError(
            f"no predictor for a {task!r} model; task checkpoints are {', '.join(PREDICTORS)} "
            "(a pretrain checkpoint only gives backbone features)"
        )
    return PREDICTORS[task](model, images, **options)
