"""The temporal pass of a sequence: person tracks and (optional) smoothing, applied frame by frame in order.

Kept apart from the per-frame model work so that any engine can run it: the local engine streams frames through
it as they come (`finish_frame`, right before each commit); a distributed engine or a render farm runs it
afterwards over the per-frame results read back from their bundles, in frame order (`core/studio/finalize.py`),
and gets the same numbers. It works on capture frames, not on model results, for exactly that reason: its inputs
(person boxes and keypoints, the pointmap scale, the stored points, the camera) are held by a frame at the
precision the bundle stores them (`stages.canonical_frame`), so a frame read back from disk is the same input as
the frame in memory, and the same float operations in the same order give the same files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..formats.bundle import CaptureFrame
from ..pipeline.temporal import KeypointSmoother, rescale_pointmap
from .batches import TaskBatch

TEMPORAL_TASKS = ("pose", "pointmap")  # the tasks whose stored values the pass changes


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
            scale = self._next_scale(float(pointmap.scale))  # type: ignore[attr-defined]
            results["pointmap"] = rescale_pointmap(pointmap, scale)  # type: ignore[arg-type]
        return results

    def _next_scale(self, raw: float) -> float:
        """The exponential moving average of the scale after a frame of scale `raw`."""
        self.scale = raw if self.scale is None else self.scale + self.scale_alpha * (raw - self.scale)
        return self.scale

    def finish_frame(self, frame: CaptureFrame, computed: Sequence[str]) -> None:
        """The pass over one capture frame, in place, in frame order: track ids (and smoothed keypoints) for its
        people when pose was `computed` for it, the smoothed scale with its points and camera rescaled when the
        pointmap was. Tasks carried over from an earlier commit already went through a pass (see `prime`)."""
        if "pose" in computed:
            frame.people = self.keypoints.update_people(frame.people)
        scale = frame.pointmap_scale
        if self.smooth and "pointmap" in computed and scale is not None and scale > 0:
            smoothed = self._next_scale(float(scale))
            if frame.points is not None:
                rescale_frame(frame, smoothed)
            else:
                frame.pointmap_scale = smoothed

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


def rescale_frame(frame: CaptureFrame, new_scale: float) -> None:
    """`rescale_pointmap` on a capture frame, in place: depth and focal length × scale / new_scale, X and Y kept
    (the points stay on their pixels' rays). The same float32 product per point as the result-level version."""
    ratio = float(frame.pointmap_scale) / new_scale  # type: ignore[arg-type]
    factor = np.asarray([1.0, 1.0, ratio], dtype=np.float32)
    frame.points = np.asarray(frame.points, dtype=np.float32) * factor
    if frame.camera and frame.camera.get("source") == "pointmap":
        frame.camera = {**frame.camera, "fx": frame.camera["fx"] * ratio, "fy": frame.camera["fy"] * ratio}
    frame.pointmap_scale = float(new_scale)


class SequencePass:
    """The temporal pass of one sequence as a state machine over its frames in frame order; the local engine and
    `finalize` drive it the same way, so they make the same calls on the same values.

    `computed(frame, tasks)`: a frame whose `tasks` were just computed (raw values) goes through the pass in place.
    `kept(doc)`: a frame kept as committed (already through a pass, e.g. by an earlier run): the next computed frame
    continues from its people and scale (`SequenceSmoother.prime`; the filter's speed restarts there)."""

    def __init__(self, fps: float, *, smooth: bool) -> None:
        self.smoother = SequenceSmoother(fps, smooth=smooth)
        self.synced = True  # the smoother's state follows the last frame
        self.people: list[Any] = []
        self.scale: float | None = None
        self.max_track = -1

    def computed(self, frame: CaptureFrame, tasks: Sequence[str]) -> None:
        if not self.synced and any(t in TEMPORAL_TASKS for t in tasks):
            self.smoother.prime(self.people, self.scale, self.max_track + 1)
        self.smoother.finish_frame(frame, tasks)
        self._remember(frame.people, frame.pointmap_scale, "pose" in tasks)

    def kept(self, people: list[Any], scale: float | None) -> None:
        self._remember(people, scale, False)

    def _remember(self, people: list[Any], scale: float | None, synced: bool) -> None:
        self.people, self.scale, self.synced = list(people), scale, synced
        ids = [p.track_id for p in people if getattr(p, "track_id", None) is not None]
        self.max_track = max([self.max_track, *ids])
