"""Work units: how a distributed run splits a predict job, and what one worker does with a unit.

A unit is a few single images or a frame range of a sequence: numbered image files, or a video (its exact frame
count comes from the driver's index of it, and a worker decodes only its range, from a keyframe before it:
`video.py`). A video that cannot be indexed (unreadable, no PyAV) goes whole to one worker, which reports why as
the local engine does. A worker runs a unit as a `PredictJob` member of the driver's run (`job_plan.Member`),
under a plan of the unit's own jobs (`job_plan.unit_plan`): it joins the run's shared lock and commits each
frame in one transaction, and a sequence's frames raw with their temporal pass pending, exactly as a
render-farm chunk does; the driver then finalizes (`finalize.py`), so results equal the local engine's.

Nothing here imports ray: the units and `run_unit` are plain Python, tested without a cluster, and any engine
(Ray today) only schedules them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...timing import StageTime
from ..errors import InputError, StudioError
from ..sources.inputs import ImageJob, SequenceJob

UNITS_PER_WORKER = 4  # enough units for the workers to even out, few enough that per-unit set-up stays small
MIN_UNIT_FRAMES = 4  # below this a unit's set-up (lock, plan, writer threads) weighs against its frames
MAX_UNIT_FRAMES = 64  # a worker that dies loses at most this much work in progress


@dataclass(frozen=True)
class WorkUnit:
    """One worker's piece of a job. `frames`: the (first, last) frame numbers of a sequence chunk (a video's are
    1-based); `count`: the frames it holds (None for a whole video that could not be indexed)."""

    index: int
    jobs: tuple[ImageJob | SequenceJob, ...]
    label: str
    frames: tuple[int, int] | None = None
    count: int | None = None

    @property
    def sequence(self) -> str | None:
        """The name of the sequence a chunk belongs to (finalized by the driver), else None."""
        job = self.jobs[0]
        return job.name if isinstance(job, SequenceJob) and self.frames is not None else None


@dataclass
class UnitResult:
    """What a worker did with a unit (plain data: it crosses process boundaries). `fatal`: an error that stops
    the whole job (e.g. a full disk), as (error class name, message, hints)."""

    index: int
    written: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fatal: tuple[str, str, dict[str, str]] | None = None
    worker: str = ""
    stages: dict[str, StageTime] = field(default_factory=dict)  # the unit's run record of stage times


def unit_size(total: int, workers: int, batch: int) -> int:
    """Frames per unit: about UNITS_PER_WORKER units per worker, at least MIN_UNIT_FRAMES unless that would leave
    a worker idle, at most MAX_UNIT_FRAMES, whole batches."""
    workers = max(1, workers)
    size = math.ceil(total / (workers * UNITS_PER_WORKER)) if total else 1
    size = max(size, min(MIN_UNIT_FRAMES, math.ceil(total / workers)), 1)
    size = min(size, MAX_UNIT_FRAMES)
    return max(batch, math.ceil(size / batch) * batch)


def split_work(jobs: Sequence[ImageJob | SequenceJob], workers: int, batch: int = 1) -> list[WorkUnit]:
    """The units of a job, images first (in input order), then each sequence's chunks in frame order."""
    images = [j for j in jobs if isinstance(j, ImageJob)]
    sequences = [j for j in jobs if isinstance(j, SequenceJob)]
    numbered = {id(s): _numbers(s) for s in sequences}
    total = len(images) + sum(len(n or ()) for n in numbered.values())
    size = unit_size(total, workers, batch)
    units: list[WorkUnit] = []

    def add(unit_jobs: tuple, label: str, frames: tuple[int, int] | None = None, count: int | None = None):
        units.append(WorkUnit(len(units), unit_jobs, label, frames, count))

    for start in range(0, len(images), size):
        group = tuple(images[start : start + size])
        label = group[0].name if len(group) == 1 else f"{group[0].name} … {group[-1].name}"
        add(group, label, count=len(group))
    for sequence in sequences:
        numbers = numbered[id(sequence)]
        if numbers is None:
            add((sequence,), f"{sequence.name} (video)")
            continue
        for start in range(0, len(numbers), size):
            part = numbers[start : start + size]
            add((sequence,), f"{sequence.name} #{part[0]}-{part[-1]}", (part[0], part[-1]), len(part))
    return units


def _numbers(sequence: SequenceJob) -> list[int] | None:
    """A sequence's frame numbers; None for a video that cannot be indexed (its worker says why)."""
    try:
        return sequence.frame_numbers()
    except InputError:
        return None


def unit_spec(spec: Any, unit: WorkUnit, run_id: str, checkpoints: dict[str, Path]) -> Any:
    """The JobSpec a worker runs for `unit`: the local engine on the unit's frames, into the run's folder, with the
    driver's resolved checkpoint files (no downloads on workers)."""
    return dataclasses.replace(
        spec,
        inputs=[],
        engine="local",
        ray_address=None,
        workers=None,
        gpus_per_worker=None,
        frames=unit.frames,
        run_id=run_id,
        checkpoints={task: str(path) for task, path in checkpoints.items()},
        allow_download=False,
    )


def run_unit(
    spec: Any, unit: WorkUnit, member: Any, checkpoints: dict[str, Path], *, worker: str = ""
) -> UnitResult:
    """Run `unit` as a member of the driver's run (`job_plan.Member`) in this process; errors that stop the job
    are returned, not raised, so that they cross to the driver as plain data."""
    from ..jobs.job import PredictJob
    from ..runtime.host import Host

    result = UnitResult(unit.index, worker=worker)
    host = Host(on_note=None)
    try:
        job = PredictJob(unit_spec(spec, unit, member.run.id, checkpoints), host=host, member=member)
        job.prepare_unit(list(unit.jobs))
        report = job.run()
    except StudioError as exc:
        result.fatal = (type(exc).__name__, exc.message, dict(exc.hints))
        result.notes = list(dict.fromkeys(host.notes))
        return result
    result.written, result.skipped = report.written, report.skipped
    result.failures, result.notes = list(report.failures), list(report.notes)
    result.stages = dict(report.stages)
    return result
