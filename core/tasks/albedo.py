"""Albedo: RGB in [0, 1], sRGB-encoded as the model predicts it (no official weights yet)."""

from __future__ import annotations

from typing import Any

from .base import Layer, PredictContext, Preview, StoreContext, Task
from .values import dense_masks, map_size, nonfinite_in


class AlbedoTask(Task):
    name = "albedo"
    label = "albedo"
    batch_field = "albedo"
    run_rank = 40
    list_rank = 40
    needs = ("seg",)
    released = ()
    unreleased_reason = "no albedo checkpoints are public yet (facebookresearch/sapiens2 issue #1)"
    builtin = True
    output_conv = "conv_albedo"
    head_kind = "dense"
    layers = (
        Layer(
            "albedo",
            ("albedo.R", "albedo.G", "albedo.B"),
            "half",
            {"none": 6, "zip": 5.8, "zips": 6.0},
            "RGB",
        ),
    )
    previews = (Preview("albedo", 2.6, kind="colour", source="albedo", rank=50),)

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[Any]:
        from ..pipeline.predict import predict_albedo

        return predict_albedo(
            module,
            images,
            batch_size=len(images),
            seg=dense_masks(ctx),
            output_device=ctx.output_device,
            bands_above=ctx.bands_above,
            should_stop=ctx.should_stop,
        )

    def result_size(self, result: Any) -> tuple[int, int] | None:
        return map_size(result.albedo)

    def nonfinite(self, result: Any) -> int:
        return nonfinite_in(result.albedo)

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        from ..formats.arrays import float32_map

        frame.albedo = float32_map(result.albedo)

    def carry(self, frame: Any, old: Any) -> None:
        frame.albedo = old.albedo

    def stored(self, frame: Any) -> bool:
        return frame.albedo is not None
