"""A batch that is a sequence: the CLI's temporal pass for front-ends that hold results in memory (ComfyUI).

Why a module of its own: the pass (`temporal.SequencePass`) works on canonical capture frames, as the CLI's
engine runs it right before each commit. A node has pose results (or capture frames built from a node's inputs)
and may get the sequence in windows; this module puts those values into exactly the form the CLI gives the pass
(`stages.canonical_frame`), drives the same `SequencePass` in frame order and hands the values back, so the same
frames give the same keypoints, scores, track ids and scales through every front-end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from ...formats.bundle import CaptureFrame
from ...pipeline.results import PersonPose, PoseResult
from ..compute.sequence_pass import PEOPLE_TASK, SCALE_TASK, TEMPORAL_TASKS, SequencePass
from ..errors import StudioError
from ..runtime.half_cast import torch_half
from ..sources.batches import TaskBatch
from .stages import canonical_frame

DEFAULT_FPS = 24.0  # as the CLI: the frame rate of a sequence that does not say its own


def sequence_fps(fps: float | None, source_fps: float | None = None) -> float:
    """The frame rate a pass runs at: the one asked for, else the source's (a video's), else 24 (the CLI's rule,
    `--fps` default "24 or the video's"). 0 or None means "not asked"."""
    for value in (fps, source_fps):
        if value is not None and value > 0:
            return float(value)
    return DEFAULT_FPS


class BatchSequence:
    """The temporal pass over one sequence given in consecutive windows (a node's chunks), in frame order.

    `pose(results)`: tracked (and, with `smooth`, smoothed) copies of the next frames' pose results.
    `frames(frames, tasks)`: the pass over the next capture frames in place, for the `tasks` whose raw results
    they hold (those a pose node already passed are left out)."""

    def __init__(self, fps: float, *, smooth: bool) -> None:
        if not fps > 0:
            raise StudioError(f"the frame rate must be positive, got {fps}")
        self.fps = float(fps)
        self.smooth = bool(smooth)
        self.passer = SequencePass(self.fps, smooth=self.smooth)

    @property
    def record(self) -> dict[str, Any]:
        """What a batch that went through this pass says about it (`TaskBatch.temporal`)."""
        return {"fps": self.fps, "smooth": self.smooth}

    def pose(self, results: Sequence[PoseResult]) -> list[PoseResult]:
        out = []
        for result in results:
            width, height = (int(v) for v in result.image_size)
            frame = CaptureFrame(width=width, height=height, people=list(result.people))
            canonical_frame(frame)  # float32 boxes and keypoints, as the CLI's raw frames hold them
            self.passer.computed(frame, ["pose"])
            people = [
                PersonPose(
                    bbox=tuple(person.bbox),  # type: ignore[arg-type]
                    keypoints=person.keypoints,
                    bbox_source=getattr(original, "bbox_source", "given"),
                    track_id=person.track_id,
                )
                for original, person in zip(result.people, frame.people)
            ]
            out.append(dataclasses.replace(result, people=people))
        return out

    def frames(self, frames: Sequence[CaptureFrame], tasks: Sequence[str]) -> None:
        tasks = [t for t in tasks if t in TEMPORAL_TASKS]
        for frame in frames:
            if tasks:
                canonical_frame(frame, consumed=True)
                self.passer.computed(frame, tasks)


def passed(batch: TaskBatch | None) -> dict[str, Any] | None:
    """The pass a batch went through (`BatchSequence.record`), or None for raw results."""
    return None if batch is None else getattr(batch, "temporal", None)


def pass_pose_batch(batch: TaskBatch, fps: float, *, smooth: bool) -> TaskBatch:
    """A pose batch that is a sequence through the temporal pass at once (a new batch; the input is kept)."""
    sequence = BatchSequence(fps, smooth=smooth)
    return TaskBatch(batch.task, sequence.pose(batch.results), batch.model, temporal=sequence.record)


# frames captured and written at a time: a long clip's bundle holds this many frames, not all of them
WINDOW = 8


def _rows(value: Any, start: int, stop: int) -> Any:
    """Entries start..stop of a per-frame batch where entry i serves frame min(i, len - 1), as `capture_frames`
    reads it (a batch of one serves every frame)."""
    if value is None:
        return None
    if isinstance(value, TaskBatch):
        if len(value) <= 1:
            return value
        picked = [value.results[min(i, len(value) - 1)] for i in range(start, stop)]
        return dataclasses.replace(value, results=picked)
    if getattr(value, "ndim", 0) == 2 or len(value) <= 1:  # one (H, W) mask or a batch of one
        return value
    last = len(value) - 1
    if stop - 1 <= last:
        return value[start:stop]
    return value[[min(i, last) for i in range(start, stop)]]


def sequence_tasks(batches: dict[str, TaskBatch | None], smooth: bool) -> list[str]:
    """The temporal tasks a bundle of a sequence still has to pass: the task whose people are tracked (pose) unless
    a pose node already did (with smoothing, when smoothing is asked), the task whose scale is smoothed (pointmap)
    when smoothing is asked (the temporal pass's own declarations, `temporal.PEOPLE_TASK` / `SCALE_TASK`)."""
    tasks = []
    people = batches.get(PEOPLE_TASK)
    if people is not None:
        done = passed(people)
        if done is None or (smooth and not done.get("smooth")):
            tasks.append(PEOPLE_TASK)
    scale = batches.get(SCALE_TASK)
    if smooth and scale is not None and passed(scale) is None:
        tasks.append(SCALE_TASK)
    return tasks


def sequence_frames(
    images: Any,
    batches: dict[str, TaskBatch | None],
    *,
    fps: float,
    smooth: bool = False,
    albedo_image: Any = None,
    mask: Any = None,
    host: Any = None,
    window: int = WINDOW,
) -> Iterator[CaptureFrame]:
    """The capture frames of a batch in order (one frame: as captured; more: through the temporal pass), built
    `window` frames at a time with progress and cancel per frame; each frame is dropped here once yielded, so a
    consumer that writes and releases it holds one window at most. The one path from a node's batch to frames,
    for every writer of a sequence (Save Capture Bundle, Save USD)."""
    from ..compute.capture import BATCH_FIELDS
    from ..runtime.host import Host

    host = host or Host()
    total = int(images.shape[0]) if hasattr(images, "shape") and len(images.shape) == 4 else len(images)
    for task, batch in batches.items():  # checked now, before the caller writes anything
        if batch is not None and isinstance(batch, TaskBatch) and len(batch) not in (1, total):
            raise StudioError(f"'{BATCH_FIELDS[task]}' has {len(batch)} results for {total} images")
    return _windows(images, batches, total, fps, smooth, albedo_image, mask, host, window)


def _windows(
    images: Any,
    batches: dict[str, TaskBatch | None],
    total: int,
    fps: float,
    smooth: bool,
    albedo_image: Any,
    mask: Any,
    host: Any,
    window: int,
) -> Iterator[CaptureFrame]:
    from ..compute.capture import capture_frames

    if total == 1:
        yield from capture_frames(images, batches, albedo_image=albedo_image, mask=mask, host=host)
        return
    sequence = BatchSequence(fps, smooth=smooth)
    tasks = sequence_tasks(batches, smooth)
    host.progress(0, total)
    for start in range(0, total, max(1, window)):
        stop = min(total, start + max(1, window))
        host.check_cancel()
        frames = capture_frames(
            images[start:stop],
            {task: _rows(batch, start, stop) for task, batch in batches.items()},
            albedo_image=_rows(albedo_image, start, stop),
            mask=_rows(mask, start, stop),
            host=host,
            consume=False,
            first=start,
            total=total,
        )
        sequence.frames(frames, tasks)
        for offset in range(len(frames)):
            host.check_cancel()
            frame, frames[offset] = frames[offset], None  # type: ignore[call-overload]  # the consumer's now
            yield frame
            del frame
            host.progress(start + offset + 1, total)


def save_sequence_bundle(
    folder: Any,
    name: str,
    images: Any,
    batches: dict[str, TaskBatch | None],
    *,
    fps: float,
    smooth: bool = False,
    albedo_image: Any = None,
    mask: Any = None,
    host: Any = None,
    compression: str | None = None,
    window: int = WINDOW,
) -> tuple[Any, int]:
    """Capture bundle of a batch (one frame: a plain bundle; more: a numbered sequence through the temporal
    pass), built and written `window` frames at a time with progress and cancel per frame (`sequence_frames`).
    Returns (the JSON to open, the frame count)."""
    from ...formats.bundle import write_bundle
    from ...formats.sequence import SequenceWriter

    frames = sequence_frames(
        images,
        batches,
        fps=fps,
        smooth=smooth,
        albedo_image=albedo_image,
        mask=mask,
        host=host,
        window=window,
    )
    total = int(images.shape[0]) if hasattr(images, "shape") and len(images.shape) == 4 else len(images)
    if total == 1:
        return write_bundle(folder, name, next(frames), compression=compression, half=torch_half), 1
    writer = SequenceWriter(folder, name, fps, compression=compression, half=torch_half)
    for frame in frames:
        writer.add(frame)
        del frame  # written: let its arrays go
    return writer.close(), total
