"""The shared shape of the per-pixel map tasks (normal, albedo, pointmap): one map per image, predicted with the
person masks of the segmentation they need, possibly banded, stored whole in one field of the capture frame.

Why a base: the three differed only in the pipeline predictor they call and the names of their result and frame
fields; a new map task of this kind declares those three names and its layers, nothing else."""

from __future__ import annotations

from typing import Any

from .base import PredictContext, StoreContext, Task
from .values import dense_masks, map_size, nonfinite_in


class DenseMapTask(Task):
    """A task whose result holds one (H, W, C) map in `result_field`, stored as `frame_field` of the frame."""

    head_kind = "dense"
    needs = ("seg",)
    predictor = ""  # the function of core.pipeline.predict that runs it (e.g. "predict_normal")
    result_field = ""
    frame_field = ""

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[Any]:
        import importlib

        # the module core.pipeline.predict, not the function of that name the package exports
        predictors = importlib.import_module("..pipeline.predict", __package__)
        return getattr(predictors, self.predictor)(
            module,
            images,
            batch_size=len(images),
            seg=dense_masks(ctx),
            output_device=ctx.output_device,
            bands_above=ctx.bands_above,
            should_stop=ctx.should_stop,
        )

    def result_size(self, result: Any) -> tuple[int, int] | None:
        return map_size(getattr(result, self.result_field))

    def nonfinite(self, result: Any) -> int:
        return nonfinite_in(getattr(result, self.result_field))

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        from ..formats.arrays import float32_map

        setattr(frame, self.frame_field, float32_map(getattr(result, self.result_field)))

    def carry(self, frame: Any, old: Any) -> None:
        setattr(frame, self.frame_field, getattr(old, self.frame_field))

    def stored(self, frame: Any) -> bool:
        return getattr(frame, self.frame_field) is not None
