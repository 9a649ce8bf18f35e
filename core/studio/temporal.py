"""The temporal pass of a sequence: person tracks and (optional) smoothing, applied frame by frame in order.

Kept apart from the per-frame model work so that any engine can run it: the local engine streams frames through
it as they come; a distributed engine or a render farm runs it afterwards over the per-frame results, in frame
order, and gets the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..pipeline.temporal import KeypointSmoother, rescale_pointmap
from .batches import TaskBatch


class SequenceSmoother:
    """Causal tracking and smoothing of one sequence.

    People are always matched across frames by box IoU, so every person of a sequence has a `track_id` (the
    per-frame order is by area and changes as people move). With `smooth`: keypoints go through the pipeline's
    One-Euro `KeypointSmoother`, and the pointmap scale through an exponential moving average (causal, so frames
    can be written as they come), with points and intrinsics rescaled to the smoothed scale.
    """

    def __init__(self, fps: float, scale_alpha: float = 0.2, *, smooth: bool = True) -> None:
        self.keypoints = KeypointSmoother(fps, smooth=smooth)
        self.smooth = smooth
        self.scale_alpha = scale_alpha
        self.scale: float | None = None

    def update(self, results: dict[str, object]) -> dict[str, object]:
        """One frame's task → result mapping, in frame order; returns it with pose and pointmap replaced."""
        if results.get("pose") is not None:
            results["pose"] = self.keypoints.update(results["pose"])  # type: ignore[arg-type]
        pointmap = results.get("pointmap")
        if self.smooth and pointmap is not None and pointmap.scale > 0:  # type: ignore[attr-defined]
            raw = float(pointmap.scale)  # type: ignore[attr-defined]
            self.scale = raw if self.scale is None else self.scale + self.scale_alpha * (raw - self.scale)
            results["pointmap"] = rescale_pointmap(pointmap, self.scale)  # type: ignore[arg-type]
        return results

    def prime(self, people: Sequence[Any], scale: float | None, next_id: int = 0) -> None:
        """Continue after frames that were not computed by this smoother (verified frames a resumed run kept):
        tracking starts from the last committed frame's people, the scale average from its scale."""
        self.keypoints.prime(people, next_id)
        if scale is not None and scale > 0:
            self.scale = float(scale)

    def apply(self, batches: Mapping[str, TaskBatch]) -> None:
        """Run every image of a chunk of consecutive frames through the pass, in place."""
        count = max((len(b) for b in batches.values()), default=0)
        for i in range(count):
            frame = {
                task: batch.results[i] for task, batch in batches.items() if task in ("pose", "pointmap")
            }
            for task, result in self.update(frame).items():
                batches[task].results[i] = result
