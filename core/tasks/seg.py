"""Segmentation: 29 body-part class ids; its foreground (label > 0) is the frame's person mask, and pose takes its
person boxes from it, so it runs first."""

from __future__ import annotations

from typing import Any

from .base import Layer, PredictContext, Preview, StoreContext, Task
from .sizes import RELEASED_SIZES
from .values import map_size

MASK_LAYER = Layer("mask", ("mask.A",), "half", {"none": 2, "zip": 0.1, "zips": 0.25}, "person mask 0..1")


class SegTask(Task):
    name = "seg"
    label = "segmentation (29 body parts)"
    noun = "segmentation"
    batch_field = "seg"
    run_rank = 10
    list_rank = 20
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_seg"
    head_kind = "heatmap"
    layers = (
        Layer("seg", ("seg.id",), "float", {"none": 4, "zip": 0.9, "zips": 1.05}, "class id"),  # flat regions
        MASK_LAYER,
    )
    previews = (Preview("seg", 0.7, kind="classes", source="seg", rank=20),)
    mask_rank = 10
    frame_arrays = ("seg", "mask")
    onnx_outputs = (("logits", "(B, 29, H, W) class logits (argmax = class id, names in class_names)"),)

    def onnx_props(self) -> dict[str, Any]:
        from ..pipeline.metadata import seg_class_names

        return {"class_names": list(seg_class_names())}

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[Any]:
        from ..pipeline.predict import predict_seg

        return predict_seg(
            module,
            images,
            batch_size=len(images),
            keep_logits=ctx.keep_logits,
            output_device=ctx.output_device,
            should_stop=ctx.should_stop,
        )

    def result_size(self, result: Any) -> tuple[int, int] | None:
        return map_size(result.labels)

    def nonfinite(self, result: Any) -> int:
        """NaN/inf in the network's logits, which the labels cannot show."""
        return int(getattr(result, "nonfinite", 0))

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        """The frame's int32 labels; consumed, the result's int64 labels are replaced by them at once (432 MB
        freed on a 9000×6000 photo before the mask is made)."""
        import numpy as np
        import torch

        from ..formats.arrays import to_numpy

        labels = to_numpy(result.labels).astype(np.int32)
        if ctx.consume and isinstance(result.labels, torch.Tensor):
            result.labels = torch.from_numpy(labels)
        frame.seg = labels

    def person_mask(self, frame: Any) -> Any:
        import numpy as np

        return None if frame.seg is None else (frame.seg > 0).astype(np.float32)

    def carry(self, frame: Any, old: Any) -> None:
        import numpy as np

        frame.seg = None if old.seg is None else np.asarray(old.seg, dtype=np.int32)
        frame.mask = old.mask

    def stored(self, frame: Any) -> bool:
        return frame.seg is not None

    def from_frame(self, frame: Any) -> Any:
        """The stored segmentation as a result (pose's boxes and the dense masks when seg is carried over)."""
        import numpy as np
        import torch

        from ..pipeline.results import SegResult

        if frame is None or frame.seg is None:
            return None
        return SegResult(torch.from_numpy(np.asarray(frame.seg, dtype=np.int64)))
