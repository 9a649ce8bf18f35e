"""Pose: 308 keypoints per person, top-down (person boxes first: given ones, else from the segmentation it needs,
else the whole image)."""

from __future__ import annotations

from typing import Any

from .base import PredictContext, Preview, StoreContext, Task
from .sizes import RELEASED_SIZES
from .values import nonfinite_in


class PoseTask(Task):
    name = "pose"
    geometry_input = "pose"  # its result in the cross-task self-checks
    label = "pose (308 keypoints)"
    batch_field = "pose"
    run_rank = 20
    list_rank = 10
    needs = ("seg",)
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_pose"
    head_kind = "heatmap"
    previews = (
        Preview("pose", 1.9, kind="skeleton", source="people", rank=10, over_image=True),
    )  # compresses as the photo
    json_fields = ("people",)
    temporal = True
    onnx_outputs = (
        ("heatmaps", "(B, 308, H/4, W/4) keypoint heatmaps (decode: argmax + DARK-UDP, docs/pipeline.md)"),
    )

    def onnx_props(self) -> dict[str, Any]:
        from ..pipeline.metadata import flip_indices, keypoint_names

        return {"keypoint_names": list(keypoint_names()), "flip_indices": list(flip_indices())}

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[Any]:
        """Frames whose given boxes are empty (a detector found nobody) have nobody, unless a segmentation can find
        people there."""
        from ..pipeline.predict import predict_pose
        from ..pipeline.results import PoseResult

        count = len(images)
        segs = ctx.needs.get("seg")
        boxes = None if ctx.boxes is None else [ctx.boxes[ctx.start + j] for j in range(count)]
        run = [j for j in range(count) if segs is not None or boxes is None or boxes[j] is None or boxes[j]]
        results: list[Any] = [PoseResult([], p.size) for p in images]
        if not run:
            return results
        found = predict_pose(
            module,
            [images[j] for j in run],
            boxes=None if boxes is None else [boxes[j] or None for j in run],
            seg=None if segs is None else [segs[j] for j in run],
            flip_test=ctx.flip_test,
            batch_size=len(run),
            if_no_person=ctx.if_no_person,
            should_stop=ctx.should_stop,
        )
        for j, result in zip(run, found):
            results[j] = result
        return results

    def result_size(self, result: Any) -> tuple[int, int] | None:
        return tuple(result.image_size)  # type: ignore[return-value]

    def nonfinite(self, result: Any) -> int:
        import numpy as np

        return sum(
            nonfinite_in(p.keypoints) + nonfinite_in(np.asarray(p.bbox, np.float64)) for p in result.people
        )

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        frame.people = list(result.people)

    def carry(self, frame: Any, old: Any) -> None:
        from ..formats.bundle import CapturePerson

        frame.people = [
            CapturePerson(p.bbox, p.keypoints, p.bbox_source, None, i, p.track_id)
            for i, p in enumerate(old.people)
        ]

    def run_settings(self, *, flip_test: bool, boxes: Any, smooth: Any) -> dict[str, Any] | None:
        return {"flip_test": flip_test, "boxes": boxes, **smooth}

    def held_settings(self, held: set[str], boxes_given: bool) -> dict[str, Any]:
        """Where the boxes came from: given, the segmentation it needs (when the frame holds one), or the image."""
        source = "given" if boxes_given else next((n for n in self.needs if n in held), "image")
        return {"box_source": source}

    def follows(self, computed: set[str], boxes_given: bool) -> bool:
        return not boxes_given and any(n in computed for n in self.needs)

    def check_stored(self, frame: Any) -> list[str]:
        """Someone's keypoints, each person with all 308 as (x, y, score)."""
        if not frame.people:
            return ["no person's keypoints"]
        if any(p.keypoints.shape != (308, 3) for p in frame.people):
            return ["keypoints are not 308 x (x, y, score)"]
        return []

    def stored(self, frame: Any) -> bool:
        """People, or a pose model that found nobody (the frame still gets its keypoint files and preview)."""
        return bool(frame.people) or any(m.get("task") == self.name for m in frame.models)
