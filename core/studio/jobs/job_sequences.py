"""The sequence runner of a predict job: a sequence frame by frame, in order, each frame planned against what
earlier runs left (`resume.plan_frame`), computed in chunks (`stages.compute_frames`), passed through the
temporal pass and committed (`stages.commit_frame`); the index is written only over one run's complete frames,
and an unfinished sequence carries a `<name>.partial.json` marker instead.

`running` is the job's `FrameRun` (`frame_run.py`: the per-frame stages, below this module; `job.py` hands it
over and is never called back); the runner reads the plan's boxes file (`RunPlan.boxes`) and reports into
`running.report`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ...formats.documents import load_json
from ...formats.errors import BundleError
from ...formats.sequence import SequenceWriter
from ...timing import stage
from ..compute.sequence_pass import SequencePass
from ..errors import InputError, NonFiniteOutputError, StudioError
from ..sources.given_boxes import BoxesFile, boxes_for
from ..sources.inputs import SequenceJob, load_image
from ..store.outputs import remove_stale_frames, stale_frames
from ..store.resume import (
    ShotError,
    frame_ranges,
    image_source,
    partial_marker,
    plan_frame,
    relabelled,
    sequence_run,
    shot_numbers,
    video_source,
)
from ..store.transaction import commit_document, pause_point, write_document
from .frame_run import FrameRun
from .pipelining import prefetch
from .stages import FrameItem, temporal_record


def _sequence_sources(
    running: FrameRun, sequence: SequenceJob
) -> Iterator[tuple[int, str, Callable[[], np.ndarray], Callable[[], dict]]]:
    """(frame number, source name, image loader, source identity) per frame; image files are hashed and
    decoded only when a frame needs them (a chunk passes over the frames outside its range), a video is
    decoded in order: all of it, or in a chunk only its range (from a keyframe before it, `video.py`)."""
    if sequence.video is None:
        numbers = sequence.frame_numbers() or []
        for path, number in zip(sequence.frames, numbers):
            yield number, path.name, (lambda p=path: load_image(p)), (lambda p=path: _file_source(p))
        return
    ahead = running.batch if running.spec.writers else 0  # decode the next chunk while the models run
    video, frames = sequence.video, sequence.video_frames(*(running.spec.frames or (None, None)))
    for number, image in prefetch(frames, ahead):
        yield number, video.name, (lambda im=image: im), partial(video_source, video, number)


def run_sequence(
    running: FrameRun, boxes_file: BoxesFile | None, sequence: SequenceJob
) -> tuple[int, StudioError | None]:
    """A sequence frame by frame, in order; the index is written only when every frame is committed, over
    frames that all carry this sequence's run (`sequence_run`). Each computed frame goes through the temporal
    pass (`SequencePass`) right before its commit; in a chunk (`spec.frames`) it is committed with the pass
    pending instead, and `finalize` writes the index.

    Returns (frames done, the error that stopped the sequence or None)."""
    try:
        sequence.probe()  # a video's frame rate, before the writer and smoother use it
        if running.spec.frames is not None and sequence.video is not None:
            sequence.video_index()  # a chunk's marker lists every frame of the video (finalize checks them)
    except InputError as exc:
        return 0, exc
    folder = running.out / sequence.name
    shot: list[int] | None = None
    if running.spec.frames is not None:  # a farm chunk: the shot's frame list, fixed when first planned
        try:
            shot = shot_numbers(
                folder,
                sequence.name,
                running.run_info.id,
                sequence.frame_numbers(),
                explicit=running.spec.shot_frames,
                take_over=running.spec.take_over,
            )
        except InputError as exc:
            return 0, exc
    # An explicit run id (a farm job's) wins; otherwise a resume continues the run it finds there.
    adopt = running.spec.skip_existing and running.spec.run_id is None
    run = sequence_run(folder, sequence.name, running.run_info, skip_existing=adopt)
    fps = running.spec.fps or sequence.fps
    writer = SequenceWriter(folder, sequence.name, fps, run=run.record())
    temporal = SequencePass(fps, smooth=running.spec.smooth)  # track ids always; smoothing on request
    deferred = running.spec.frames is not None
    index_path = folder / f"{sequence.name}.sequence.json"
    marker = folder / f"{sequence.name}.partial.json"
    state: dict[str, Any] = {"started": False, "done": 0}  # marker written / frames committed or verified
    numbers: set[int] = set()
    buffer: list[FrameItem] = []

    def begin() -> None:
        """Before the first change in the folder: mark the sequence partial, then drop its old index."""
        if state["started"]:
            return
        running.store.make_folder(folder)
        expected = shot if deferred else None
        if expected is not None:
            frames: int | None = len(expected)
        else:  # a whole video: its count is not needed (nor read) to decode it in order
            frames = None if sequence.video is not None else len(sequence.frames)
        doc = partial_marker(sequence.name, run, running.tasks, frames, numbers=expected, fps=fps)
        write_document(marker, doc)
        with contextlib.suppress(FileNotFoundError):
            index_path.unlink()
        state["started"] = True

    def flush() -> None:
        if not buffer:
            return
        frames, refused = running.compute(buffer)
        begin()  # only now: until the first commit the previous complete state stays as it was
        for index, (item, frame) in enumerate(zip(buffer, frames)):
            if index in refused:
                raise refused[index]  # a refused frame stops its sequence, like an unreadable one
            if deferred:
                record = temporal_record(running.spec, fps, item.plan)
            else:
                with stage("temporal"):  # in frame order, before the commit
                    record = temporal.computed(frame, item.plan.compute)

            def recorded(item: FrameItem = item) -> None:
                writer.record(item.number, f"{item.name}.json")
                running.item_done(item.label)
                state["done"] += 1

            running.commit(item, frame, run, recorded, record)
        buffer.clear()

    try:
        for number, source_name, load, source_of in _sequence_sources(running, sequence):
            if deferred and number > running.spec.frames[1]:  # type: ignore[index]
                break  # frames come in ascending order: the chunk is done
            numbers.add(number)
            if deferred and number < running.spec.frames[0]:  # type: ignore[index]
                continue
            name = f"{sequence.name}_{number:04d}"
            label = f"{sequence.name} #{number}"
            source = source_of()
            boxes = boxes_for(boxes_file, source_name, number)
            expect = running.expectation(source, boxes, sequence=True)
            plan = plan_frame(folder, name, expect, run.id, accept_pending=deferred)
            if plan.action != "write":
                flush()
                running.writer.drain()  # the index records frames in order
                if plan.action == "relabel":
                    begin()
                    commit_document(folder, name, relabelled(plan.doc or {}, run))
                writer.record(number, f"{name}.json")
                temporal.kept(plan.doc or {})  # replayed through the pass where it can be (temporal.py)
                running.kept(plan)
                running.item_done(label)
                state["done"] += 1
                continue
            with stage("decode"):
                image = load()
            size = (int(image.shape[1]), int(image.shape[0]))
            boxes = boxes_for(boxes_file, source_name, number, size=size)
            if buffer and buffer[0].plan.compute != plan.compute:
                flush()
            buffer.append(FrameItem(folder, name, label, source_name, plan, source, image, boxes, number))
            if len(buffer) >= running.batch:
                flush()
        flush()
    except (InputError, NonFiniteOutputError) as exc:
        running.writer.drain()  # the frames before the broken one are complete: commit them
        return state["done"], exc
    running.writer.drain()
    count = state["done"]
    if count == 0:
        what = "no frames in the range" if deferred else "no frames could be read"
        if deferred and sequence.video is not None:
            what += f" (the video has frames 1-{sequence.video_index().count})"
        return 0, InputError(f"{sequence.video or sequence.name}: {what}")
    if deferred:
        begin()  # the chunk's frames are committed; finalize writes the index once every chunk is done
        first, last = running.spec.frames  # type: ignore[misc]
        unseen = [n for n in shot or [] if first <= n <= last and n not in numbers]
        if unseen:  # frames of the shot this machine cannot see: an error for them, not a shorter shot
            return count, ShotError(
                f"{sequence.video or sequence.name}: {len(unseen)} frame(s) of the shot in this chunk's range "
                f"are not among the inputs here: {frame_ranges(unseen)}; they stay pending and finalize refuses "
                "until a chunk that sees them writes them"
            )
        return count, None
    # a video's length is known only now: frames past its end (a shorter take) are its orphans (a folder's
    # were found before the run: orphans.py)
    stale = stale_frames(folder, sequence.name, numbers) if sequence.video is not None else []
    if stale and not running.spec.clean:
        running.report.orphaned += [
            f"{folder.name}/{sequence.name}_{n:04d} (frame {n} is beyond the video's {len(numbers)} frames)"
            for n in stale
        ]
    unchanged = not state["started"] and _index_lists(index_path, run.id, numbers) and not marker.exists()
    if unchanged and not (stale and running.spec.clean):
        return count, None  # every frame verified under the index's own run: nothing to change
    begin()
    if running.spec.clean:  # frames whose input is gone stay (reported as orphaned) unless asked
        remove_stale_frames(folder, sequence.name, numbers)
        running.report.removed += [f"{folder.name}/{sequence.name}_{n:04d}" for n in stale]
    pause_point("index")
    writer.close()
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()
    return count, None


def _file_source(path: Path) -> dict[str, Any]:
    try:
        return image_source(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _index_lists(index: Path, run_id: str, numbers: set[int]) -> bool:
    """True when `index` exists, names `run_id` and lists exactly the frames `numbers`."""
    try:
        doc = load_json(index, "sequence index")
    except BundleError:
        return False
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    listed = {e.get("frame") for e in doc.get("frames") or [] if isinstance(e, dict)}
    return run.get("id") == run_id and listed == numbers
