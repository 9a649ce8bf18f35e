"""Matting predictor: a matting model + images → one `MattingResult` (soft alpha, foreground) per image.

Pipeline, as the reference's matting test pipeline and demo (`MattingResize(keep_ratio=False)`, `vis_matting.py`):
stretch to 1024×768 (cv2 INTER_AREA when the width shrinks, else INTER_LINEAR), normalise, forward (the head ends
in a sigmoid), bilinear resize of all four channels back to the image, clip to [0, 1]. The straight foreground is
derived here (the reference only gives the pre-multiplied one). Same conventions as the other predictors in
`predict.py` (chunks of `batch_size`, cut by the one chunker `core.chunks.in_chunks`, on the model's device under
`inference_mode`, `progress`, `should_stop`, results on `output_device`; `_matting_batch` runs what it is given and
never splits it); self-contained so it does not depend on that module's internals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ..chunks import in_chunks
from .errors import PipelineError, PredictionInterrupted, TaskMismatchError
from .images import AlphaMode, ImageSource, PreparedImage
from .postprocess import MATTE_EPS, matting_to_image, unpremultiply
from .preprocess import normalize, preprocess_matting
from .results import MattingResult, SegResult

TASK = "matting"


def _seg_masks(seg: Sequence[Any] | None, count: int) -> list[Tensor | None]:
    if seg is None:
        return [None] * count
    if len(seg) != count:
        raise PipelineError(f"got {len(seg)} segmentation results for {count} images; pass one per image")
    return [s.foreground() if isinstance(s, SegResult) else torch.as_tensor(s).bool() for s in seg]


def predict_matting(
    model: Any,
    images: Any,
    *,
    batch_size: int = 2,
    seg: Sequence[Any] | None = None,
    eps: float = MATTE_EPS,
    output_device: str | torch.device = "cpu",
    progress: Callable[[int, int], Any] | None = None,
    should_stop: Callable[[], Any] | None = None,
    alpha: AlphaMode = "composite",
) -> list[MattingResult]:
    """Alpha (H, W) and foreground (H, W, 3), pre-multiplied and straight, at each image's resolution.

    eps: alpha at or below it counts as transparent when un-premultiplying (straight colour 0 there).
    seg: one SegResult (or bool mask) per image, stored as the result's `mask`; alpha itself is never masked.
    alpha: how an input image's own alpha channel is handled ("composite" over black, or "drop").
    """
    if getattr(model, "task", None) != TASK:
        got = getattr(model, "task", None)
        raise TaskMismatchError(
            f"this is a matting predictor but the model is a {got!r} model; load a Sapiens2 matting checkpoint "
            f"(sapiens2_1b_matting.safetensors) or call predict_{got}()"
        )
    if batch_size < 1:
        raise PipelineError(f"batch_size must be ≥ 1, got {batch_size}")
    if not 0.0 <= eps < 1.0:
        raise PipelineError(f"the un-premultiply threshold eps must be in [0, 1), got {eps}")
    source = ImageSource(images, alpha=alpha)
    masks = _seg_masks(seg, len(source))

    def work(start: int, stop: int) -> list[MattingResult]:
        prepared = [source.get(i, model.device) for i in range(start, stop)]
        return _matting_batch(model, prepared, masks[start:stop], eps, output_device, should_stop)

    with torch.inference_mode():
        return in_chunks(len(source), batch_size, work, progress=progress)


def _matting_batch(
    model: Any,
    prepared: Sequence[PreparedImage],
    masks: Sequence[Tensor | None],
    eps: float,
    output_device: str | torch.device,
    should_stop: Callable[[], Any] | None,
) -> list[MattingResult]:
    """One forward pass over all of `prepared` (never split: the caller chose the batch)."""
    batch = torch.stack([preprocess_matting(p.pixels, quantize=p.quantized) for p in prepared])
    if should_stop is not None and should_stop():
        raise PredictionInterrupted("prediction stopped by request")
    out = model(normalize(batch).to(dtype=model.dtype))
    results: list[MattingResult] = []
    for j, p in enumerate(prepared):
        matte, premultiplied = matting_to_image(out[j : j + 1], p.size)
        straight = unpremultiply(premultiplied, matte, eps)
        mask = masks[j]
        results.append(
            MattingResult(
                alpha=matte[0, 0].to(output_device),
                foreground_premultiplied=premultiplied[0].permute(1, 2, 0).to(output_device),
                foreground=straight[0].permute(1, 2, 0).to(output_device),
                eps=eps,
                mask=None if mask is None else mask.to(output_device),
            )
        )
    return results
