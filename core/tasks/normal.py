"""Surface normals: unit vectors in the OpenCV camera frame (converted from the model's frame once, in the
pipeline's post-processing), masked by the segmentation it needs when that runs."""

from __future__ import annotations

from typing import Any

from .base import Layer, PredictContext, Preview, StoreContext, Task
from .sizes import RELEASED_SIZES
from .values import dense_masks, map_size, nonfinite_in


class NormalTask(Task):
    name = "normal"
    label = "surface normals"
    batch_field = "normals"
    run_rank = 30
    list_rank = 30
    needs = ("seg",)
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_normal"
    head_kind = "dense"
    layers = (
        Layer("normal", ("N.X", "N.Y", "N.Z"), "half", {"none": 6, "zip": 5.9, "zips": 6.0}, "unit normal"),
    )
    mesh_normals = True  # the mesh's vertex normals
    previews = (Preview("normal", 3.05, kind="normals", source="normals", rank=30),)

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[Any]:
        from ..pipeline.predict import predict_normal

        return predict_normal(
            module,
            images,
            batch_size=len(images),
            seg=dense_masks(ctx),
            output_device=ctx.output_device,
            bands_above=ctx.bands_above,
            should_stop=ctx.should_stop,
        )

    def result_size(self, result: Any) -> tuple[int, int] | None:
        return map_size(result.normals)

    def nonfinite(self, result: Any) -> int:
        return nonfinite_in(result.normals)

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        from ..formats.arrays import float32_map

        frame.normals = float32_map(result.normals)

    def carry(self, frame: Any, old: Any) -> None:
        frame.normals = old.normals

    def stored(self, frame: Any) -> bool:
        return frame.normals is not None
