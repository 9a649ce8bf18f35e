"""The temporal pass of a sequence: person tracks and (optional) smoothing, applied frame by frame in order.

Kept apart from the per-frame model work so that any engine can run it: the local engine streams frames through
it as they come (`finish_frame`, right before each commit); a distributed engine or a render farm runs it
afterwards over the per-frame results read back from their bundles, in frame order (`core/studio/jobs/finalize.py`),
and gets the same numbers. It works on capture frames, not on model results, for exactly that reason: its inputs
(person boxes and keypoints, the pointmap scale, the stored points, the camera) are held by a frame at the
precision the bundle stores them (`stages.canonical_frame`), so a frame read back from disk is the same input as
the frame in memory, and the same float operations in the same order give the same files.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...formats.bundle import CaptureFrame
from ...pipeline.temporal import KeypointSmoother, rescale_pointmap
from ...tasks import registry as tasks_registry
from ...tasks.errors import TaskError
from ..sources.batches import TaskBatch
from .carry import people_from_doc


def _holder(field: str) -> str:
    """The temporal task (`Task.temporal`) whose stored data holds the frame field `field` (`Task.json_fields`).

    Why ask: the pass works on two fields of a capture frame, its people and its pointmap scale; which task
    stores each is the task's own declaration, not a name this module knows."""
    for task in tasks_registry.all_tasks():
        if task.temporal and field in task.json_fields:
            return task.name
    raise TaskError(f"no temporal task declares the frame field {field!r}; the temporal pass needs one")


PEOPLE_TASK = _holder("people")  # its people are tracked across frames (and their keypoints smoothed)
SCALE_TASK = _holder("pointmap_scale")  # its scale is smoothed (points and camera rescaled to it)
TEMPORAL_TASKS = (PEOPLE_TASK, SCALE_TASK)  # the tasks whose stored values the pass changes, in record order


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
        """One frame's task → result mapping, in frame order; returns it with the people (pose) and scale
        (pointmap) tasks' results replaced."""
        if results.get(PEOPLE_TASK) is not None:
            results[PEOPLE_TASK] = self.keypoints.update(results[PEOPLE_TASK])  # type: ignore[arg-type]
        pointmap = results.get(SCALE_TASK)
        if self.smooth and pointmap is not None and pointmap.scale > 0:  # type: ignore[attr-defined]
            scale = self._next_scale(float(pointmap.scale))  # type: ignore[attr-defined]
            results[SCALE_TASK] = rescale_pointmap(pointmap, scale)  # type: ignore[arg-type]
        return results

    def _next_scale(self, raw: float) -> float:
        """The exponential moving average of the scale after a frame of scale `raw`."""
        self.scale = raw if self.scale is None else self.scale + self.scale_alpha * (raw - self.scale)
        return self.scale

    def finish_frame(self, frame: CaptureFrame, computed: Sequence[str]) -> None:
        """The pass over one capture frame, in place, in frame order: track ids (and smoothed keypoints) for its
        people when pose was `computed` for it, the smoothed scale with its points and camera rescaled when the
        pointmap was. Tasks carried over from an earlier commit already went through a pass (see `prime`)."""
        if PEOPLE_TASK in computed:
            frame.people = self.keypoints.update_people(frame.people)
        scale = frame.pointmap_scale
        if self.smooth and SCALE_TASK in computed and scale is not None and scale > 0:
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
            frame = {task: batch.results[i] for task, batch in batches.items() if task in TEMPORAL_TASKS}
            for task, result in self.update(frame).items():
                batches[task].results[i] = result


def rescale_frame(frame: CaptureFrame, new_scale: float) -> None:
    """`rescale_pointmap` on a capture frame, in place: depth and focal length × scale / new_scale, X and Y kept
    (the points stay on their pixels' rays). The same float32 product per point as the result-level version."""
    ratio = float(frame.pointmap_scale) / new_scale  # type: ignore[arg-type]
    factor = np.asarray([1.0, 1.0, ratio], dtype=np.float32)
    frame.points = np.asarray(frame.points, dtype=np.float32) * factor
    if (
        frame.camera and frame.camera.get("source") == SCALE_TASK
    ):  # intrinsics the scaled task gave (its name)
        frame.camera = {**frame.camera, "fx": frame.camera["fx"] * ratio, "fy": frame.camera["fy"] * ratio}
    frame.pointmap_scale = float(new_scale)


class SequencePass:
    """The temporal pass of one sequence as a state machine over its frames in frame order; the local engine and
    `finalize` drive it the same way, so they make the same calls on the same values.

    `computed(frame, tasks)`: a frame whose `tasks` were just computed (raw values) goes through the pass in place;
    it returns the frame's `run.temporal` record, which keeps the pass's raw inputs (the keypoints before
    smoothing, the raw scale). `kept(doc)`: a frame kept as committed (by an earlier run, e.g. one that was
    interrupted). While every frame so far went through this pass, a kept frame is *replayed*: its raw inputs go
    through the pass again and must give exactly its stored values, so the filters' state is the uninterrupted
    run's and a resumed sequence equals one run. Otherwise (no raw inputs: an older file, a carried-over task, other
    settings) the next computed frame continues from the kept frame's people and scale
    (`SequenceSmoother.prime`; the filter's speed restarts there)."""

    def __init__(self, fps: float, *, smooth: bool) -> None:
        self.smoother = SequenceSmoother(fps, smooth=smooth)
        self.synced = True  # the smoother's state follows the last frame
        self.replayable = True  # every frame so far went through this pass (computed or replayed)
        self.people: list[Any] = []
        self.scale: float | None = None
        self.max_track = -1

    def computed(self, frame: CaptureFrame, tasks: Sequence[str]) -> dict[str, Any] | None:
        record = passed_record(frame, tasks, self.smoother.smooth)
        if not self.synced and any(t in TEMPORAL_TASKS for t in tasks):
            self.smoother.prime(self.people, self.scale, self.max_track + 1)
        self.smoother.finish_frame(frame, tasks)
        self._remember(frame.people, frame.pointmap_scale, PEOPLE_TASK in tasks)
        return record

    def kept(self, doc: Mapping[str, Any]) -> None:
        people = people_from_doc(doc)
        scale = doc.get("pointmap_scale")
        if self.replayable and self.synced and self._replay(doc, people, scale):
            return
        self.replayable = False
        self._remember(people, scale, False)

    def _replay(self, doc: Mapping[str, Any], people: list[Any], scale: Any) -> bool:
        """Run a kept frame's raw inputs through the pass; True (state advanced) only if that gives exactly the
        frame's stored people and scale, else the state is left as it was."""
        record = (doc.get("run") or {}).get("temporal")
        if not isinstance(record, Mapping) or record.get("state") != "passed":
            return False
        tasks = [t for t in record.get("tasks") or [] if t in TEMPORAL_TASKS]
        held = set(((doc.get("run") or {}).get("tasks")) or ())
        if not tasks or set(tasks) != held & set(TEMPORAL_TASKS):
            return False  # a temporal task of this frame was carried over: its raw inputs are not here
        raw_people = _raw_people(people, record, self.smoother.smooth and PEOPLE_TASK in tasks)
        if raw_people is None:
            return False
        raw_scale = record.get("scale", scale) if self.smoother.smooth and SCALE_TASK in tasks else scale
        frame = CaptureFrame(width=1, height=1, people=raw_people, pointmap_scale=_as_stored(raw_scale))
        saved = copy.deepcopy(self.smoother)
        self.smoother.finish_frame(frame, tasks)
        if not _same_people(frame.people, people) or _as_stored(frame.pointmap_scale) != _as_stored(scale):
            self.smoother = saved
            return False
        self._remember(frame.people, frame.pointmap_scale, PEOPLE_TASK in tasks)
        return True

    def _remember(self, people: list[Any], scale: float | None, synced: bool) -> None:
        self.people, self.scale, self.synced = list(people), scale, synced
        ids = [p.track_id for p in people if getattr(p, "track_id", None) is not None]
        self.max_track = max([self.max_track, *ids])


def passed_record(frame: CaptureFrame, tasks: Sequence[str], smooth: bool) -> dict[str, Any] | None:
    """`run.temporal` of a frame the pass is about to change: the temporal tasks computed for it and, with
    smoothing, their raw inputs as the bundle stores them (x, y of every keypoint before smoothing; the raw
    scale). None when no temporal task was computed."""
    computed = [t for t in TEMPORAL_TASKS if t in tasks]
    if not computed:
        return None
    record: dict[str, Any] = {"state": "passed", "tasks": computed}
    if smooth and PEOPLE_TASK in computed:
        record["keypoints"] = [
            [[_short(v) for v in row[:2]] for row in np.asarray(p.keypoints, dtype=np.float32)]
            for p in frame.people
        ]
    if smooth and SCALE_TASK in computed:
        record["scale"] = None if frame.pointmap_scale is None else _short(frame.pointmap_scale)
    return record


def _short(value: Any) -> float | None:
    """A float32 value as the shortest JSON float that reads back to it (as the bundle writes numbers)."""
    v = np.float32(value)
    return float(str(v)) if math.isfinite(v) else None


def _as_stored(value: Any) -> float | None:
    """A value at the precision a frame holds it for the pass (`stages.canonical_frame`: float32)."""
    return None if value is None else float(np.float32(value))


def _raw_people(people: list[Any], record: Mapping[str, Any], smoothed: bool) -> list[Any] | None:
    """The kept frame's people as the pass first saw them: stored keypoints, with the raw x, y when smoothed."""
    people = [
        dataclasses.replace(p, bbox=tuple(_as_stored(v) for v in p.bbox), track_id=None) for p in people
    ]
    if not smoothed:
        return people
    raw = record.get("keypoints")
    if not isinstance(raw, list) or len(raw) != len(people):
        return None
    out = []
    for person, rows in zip(people, raw):
        try:
            xy = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float32)
        except (TypeError, ValueError):
            return None
        if xy.shape != (len(person.keypoints), 2):
            return None
        keypoints = np.array(person.keypoints, dtype=np.float32, copy=True)
        keypoints[:, :2] = xy
        out.append(dataclasses.replace(person, keypoints=keypoints))
    return out


def _same_people(replayed: list[Any], stored: list[Any]) -> bool:
    if len(replayed) != len(stored):
        return False
    for a, b in zip(replayed, stored):
        if a.track_id != b.track_id or not np.array_equal(np.float32(a.bbox), np.float32(b.bbox)):
            return False
        if not np.array_equal(
            np.asarray(a.keypoints, np.float32), np.asarray(b.keypoints, np.float32), equal_nan=True
        ):
            return False
    return True
