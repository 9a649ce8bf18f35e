"""The garment-parsing task: a light heatmap head fine-tuned on the Sapiens2 backbone, with its own class list.

Everything Sapiens2 Studio needs to know about the task is declared here; nothing in the project names it. The
head is one of `core.arch`'s heads (the heatmap kind: transposed convs, convs, a 1x1 output conv) under its own
output conv name `conv_garment`, so the project's loader builds it from the checkpoint's shapes and loads it
strictly; pre- and post-processing are the project's segmentation steps (stretch to 1024x768, normalise, forward,
bilinear resize of the logits to the photo, argmax).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sapiens2_studio.core.tasks import Layer, PredictContext, Preview, StoreContext, Task

# Class ids of the fine-tuned head's output channels, in order (the checkpoint must have this many).
CLASSES: tuple[str, ...] = ("background", "top", "outerwear", "dress", "trousers", "skirt", "shoes")
PALETTE: tuple[tuple[int, int, int], ...] = (
    (0, 0, 0),
    (230, 80, 60),
    (240, 170, 40),
    (200, 60, 170),
    (60, 110, 220),
    (80, 190, 120),
    (120, 120, 120),
)
LAYER = "garment"  # the bundle's EXR channel is `garment.id`


@dataclass
class GarmentResult:
    """One image's garment classes: `labels` (H, W) int64 class ids into CLASSES at the photo's resolution, and
    how many NaN/inf values the network's logits held (the labels cannot show them)."""

    labels: Any
    nonfinite: int = 0

    def mask(self, name: str) -> Any:
        """Bool (H, W) mask of one class by name."""
        return self.labels == CLASSES.index(name)


def _draw(frame: Any, image: Any) -> Any:
    """The preview: the class colours over the photo, half and half (None when the frame has no garment layer)."""
    layer = (frame.extra or {}).get(LAYER)
    if layer is None:
        return None

    def make() -> Any:
        import numpy as np

        colours = np.asarray(PALETTE, dtype=np.uint8)[np.clip(layer["id"], 0, len(PALETTE) - 1)]
        if image is None:
            return colours
        photo = np.asarray(image)[..., :3].astype(np.uint16)
        return ((photo + colours) // 2).astype(np.uint8)

    return make


class GarmentTask(Task):
    name = "garment"
    label = f"garment parsing ({len(CLASSES)} classes)"
    batch_field = "garment"
    run_rank = 60  # after the built-in tasks; it needs none of them
    list_rank = 60
    output_conv = "conv_garment"
    head_kind = "heatmap"
    out_channels = len(CLASSES)
    # FLOAT class ids, as the built-in segmentation stores its own; bytes per pixel measured like seg's
    layers = (
        Layer(LAYER, (f"{LAYER}.id",), "float", {"none": 4, "zip": 0.9, "zips": 1.05}, "garment class id"),
    )
    previews = (Preview("garment", 0.7, draw=_draw),)

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[GarmentResult]:
        """One batch: the project's segmentation pre-processing, the forward pass, its post-processing."""
        import torch
        from sapiens2_studio.core.pipeline.errors import PredictionInterrupted
        from sapiens2_studio.core.pipeline.images import ImageSource
        from sapiens2_studio.core.pipeline.postprocess import count_nonfinite, seg_to_labels
        from sapiens2_studio.core.pipeline.preprocess import normalize, preprocess_seg

        source = ImageSource(images)
        prepared = [source.get(i, module.device) for i in range(len(source))]
        if ctx.should_stop is not None and ctx.should_stop():
            raise PredictionInterrupted("prediction stopped by request")
        with torch.inference_mode():
            batch = torch.stack([preprocess_seg(p.pixels, quantize=p.quantized) for p in prepared])
            logits = module(normalize(batch).to(dtype=module.dtype)).to(torch.float32)
            results = []
            for j, p in enumerate(prepared):
                labels, _ = seg_to_labels(logits[j : j + 1], p.size)
                results.append(GarmentResult(labels.to(ctx.output_device), count_nonfinite(logits[j])))
        return results

    def result_size(self, result: GarmentResult) -> tuple[int, int]:
        return int(result.labels.shape[1]), int(result.labels.shape[0])

    def nonfinite(self, result: GarmentResult) -> int:
        return int(result.nonfinite)

    def store(self, frame: Any, result: GarmentResult, ctx: StoreContext) -> None:
        """The class ids as the bundle's declared layer `garment.id` (readers that do not know the task skip it;
        the Blender import makes it an INT mesh attribute with the class names)."""
        import numpy as np
        from sapiens2_studio.core.formats.arrays import to_numpy
        from sapiens2_studio.core.formats.task_layers import TaskLayer

        frame.extra[LAYER] = {"id": to_numpy(result.labels).astype(np.int32)}
        frame.task_layers[LAYER] = TaskLayer(
            task=self.name,
            channels=("id",),
            pixel_type="float",
            meaning="class_id",
            classes=tuple(
                {"id": i, "name": n, "color_rgb": list(c)}
                for i, (n, c) in enumerate(zip(CLASSES, PALETTE, strict=True))
            ),
            description="garment class per pixel (sapiens2-garment-seg example)",
        )
