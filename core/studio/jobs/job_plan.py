"""A predict job's plan: what `PredictJob.prepare` works out before any model loads, fixed for the whole run.

A job is a descent, plan → compute → commit: `make_plan` (here) validates everything cheap (inputs, boxes file,
checkpoint headers, the output folder and its free space) and returns one immutable `RunPlan`; the runners
(`job_images.py`, `job_sequences.py`) consume it, planning each frame against what earlier runs left
(`resume.plan_frame`), computing it (`stages.compute_frames`) and committing it (`stages.commit_frame`). The
local engine and the Ray engine run from the same plan: the Ray driver splits `RunPlan.jobs` into work units,
and each unit runs under a `unit_plan` of its own jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ...checkpoints.identity import CheckpointIdentity
from ...formats.exr import require_openexr
from ..runtime.models import ModelCache
from ..sources.given_boxes import BoxesFile, read_boxes_file
from ..sources.inputs import ImageJob, SequenceJob, collect_inputs
from ..store.output_store import recover_left_overs as recover_left_overs  # its old import path
from ..store.remote import RemoteOutput
from ..store.resume import RunInfo
from .job_checkpoints import checkpoint_identities
from .job_spec import JobSpec
from .preflight import OutputCheck, check_output_folder


@dataclass(frozen=True)
class RunPlan:
    """What a run does, decided once before it starts. `jobs`: the inputs in order (single images and
    sequences); `boxes`: the person boxes file, if any; `checkpoints`: task → the identity of its checkpoint
    file (header-checked once; the loader and the run records read it); `check`: the output folder's preflight
    (free space, orphans), None for a work unit (its driver checked)."""

    jobs: tuple[ImageJob | SequenceJob, ...]
    boxes: BoxesFile | None
    checkpoints: Mapping[str, CheckpointIdentity]
    check: OutputCheck | None = None

    @property
    def paths(self) -> dict[str, Path]:
        """Task → checkpoint file."""
        return {task: identity.path for task, identity in self.checkpoints.items()}

    @property
    def images(self) -> list[ImageJob]:
        """The single images, in input order (they run first)."""
        return [j for j in self.jobs if isinstance(j, ImageJob)]

    @property
    def sequences(self) -> list[SequenceJob]:
        """The sequences, in input order (after the single images)."""
        return [j for j in self.jobs if isinstance(j, SequenceJob)]

    @property
    def total(self) -> int | None:
        """The number of images to process when known in advance (a video's frame count is not)."""
        if any(j.video is not None for j in self.sequences):
            return None
        return sum(1 if isinstance(j, ImageJob) else len(j.frames) for j in self.jobs)


def _frozen(
    jobs: Sequence[ImageJob | SequenceJob],
    boxes: BoxesFile | None,
    checkpoints: dict[str, CheckpointIdentity],
    check: OutputCheck | None = None,
) -> RunPlan:
    return RunPlan(tuple(jobs), boxes, MappingProxyType(dict(checkpoints)), check)


def make_plan(
    spec: JobSpec,
    out: Path,
    tasks: tuple[str, ...],
    remote: RemoteOutput | None = None,
    cache: ModelCache | None = None,
) -> RunPlan:
    """Everything cheap, before any model loads: inputs, boxes file, checkpoints (each file's identity: its
    header read once, task and keys checked), the output folder and its free space; a typo or a full disk fails
    in a second, not after a model loaded. `cache`: the job's models, which keep identities per file version."""
    require_openexr()  # bundles need it
    jobs = collect_inputs([str(p) for p in spec.inputs])
    boxes = read_boxes_file(spec.boxes_file)
    checkpoints = checkpoint_identities(spec, cache)  # wrong task or a damaged file: before any folder work
    if remote is not None:
        remote.check()  # reachable, before the staging folder is looked at
    check = check_output_folder(
        out,
        jobs,
        tasks,
        previews=spec.previews,
        mesh=spec.mesh,
        compression=spec.exr_compression,
        space_check=spec.space_check,
    )
    return _frozen(jobs, boxes, checkpoints, check)


def unit_plan(
    spec: JobSpec, jobs: Sequence[ImageJob | SequenceJob], cache: ModelCache | None = None
) -> RunPlan:
    """A work unit's plan: the driver collected and checked the inputs and the output folder already; the
    checkpoints are the driver's resolved files (`spec.checkpoints`), identified once per worker (`cache`, the
    worker's models, keeps the identities across its units)."""
    require_openexr()
    return _frozen(jobs, read_boxes_file(spec.boxes_file), checkpoint_identities(spec, cache))


@dataclass
class Member:
    """A predict job run as one work unit of a distributed run (`engines/`): it joins the run's shared lock and
    leaves recovery, the temporal pass and the indexes to the driver. `run`: the run its frames carry; `cache`:
    the worker's models, kept across units (weights load once per worker); `retry`: the unit runs again after
    its worker died, so frames this run already committed count as done (verified) and are not written twice,
    while frames of other runs are treated as in the first attempt."""

    run: RunInfo
    cache: ModelCache
    retry: bool = False
