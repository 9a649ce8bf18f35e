"""Matting: soft alpha and the foreground colour at full resolution (runs last). Where only a matte says who is
there, alpha ≥ 0.5 is the frame's person mask; the soft alpha itself is stored as its own layer, never as the
mask."""

from __future__ import annotations

from typing import Any

from .base import Layer, PredictContext, Preview, StoreContext, Task
from .seg import MASK_LAYER
from .values import map_size, nonfinite_in

MATTE_MASK_THRESHOLD = 0.5  # alpha at or above it is "person" where only a matte says who is there


class MattingTask(Task):
    name = "matting"
    label = "matting (soft alpha + foreground)"
    batch_field = "matting"
    run_rank = 60
    list_rank = 60
    needs = ("seg",)
    released = ("1b",)
    builtin = True
    output_conv = "conv_matting"
    head_kind = "dense"
    layers = (
        Layer(
            "matting",
            ("matte.R", "matte.G", "matte.B", "matte.A"),
            "half",
            {"none": 8, "zip": 6.2, "zips": 6.4},
            "matte A + pre-multiplied foreground RGB",
        ),
        MASK_LAYER,
    )
    previews = (
        Preview("alpha", 0.85, kind="matte", source="alpha", rank=60),
        Preview("foreground", 3.05, kind="cutout", source="foreground", rank=61),
    )
    mask_rank = 20
    frame_arrays = ("alpha", "foreground")
    onnx_outputs = (("matting", "(B, 4, H, W) pre-multiplied foreground RGB then alpha, in (0, 1)"),)

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[Any]:
        """Masks are stored with the result; alpha itself is never masked (and never banded)."""
        from ..pipeline.matting_predictor import predict_matting
        from .values import dense_masks

        return predict_matting(
            module,
            images,
            batch_size=len(images),
            seg=dense_masks(ctx),
            output_device=ctx.output_device,
            should_stop=ctx.should_stop,
        )

    def result_size(self, result: Any) -> tuple[int, int] | None:
        return map_size(result.alpha)

    def nonfinite(self, result: Any) -> int:
        return nonfinite_in(result.alpha) + nonfinite_in(result.foreground_premultiplied)

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        import numpy as np

        from ..formats.arrays import to_numpy

        frame.alpha = to_numpy(result.alpha).astype(np.float32)
        frame.foreground = to_numpy(result.foreground).astype(np.float32)

    def person_mask(self, frame: Any) -> Any:
        import numpy as np

        return None if frame.alpha is None else (frame.alpha >= MATTE_MASK_THRESHOLD).astype(np.float32)

    def carry(self, frame: Any, old: Any) -> None:
        frame.alpha, frame.foreground = old.alpha, old.foreground
        if frame.mask is None and old.alpha is not None:  # capture's rule when only a matte gives a mask
            frame.mask = self.person_mask(old)

    def stored(self, frame: Any) -> bool:
        return frame.alpha is not None
