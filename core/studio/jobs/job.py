"""A predict job: input paths → models → capture bundles, previews and keypoint JSON in an output folder.

This is the CLI's main job as a Python call (the CLI only parses arguments and prints), and the unit a
distributed engine splits. A job is a descent, plan → compute → commit:

- plan (`job_plan.make_plan`, run by `prepare`): validate everything cheap first (inputs, boxes file,
  checkpoints, the output folder and its free space) so that a typo or a full disk fails in a second, not after
  a 5B model has loaded; the outcome is one immutable `RunPlan` that `run` consumes (and the Ray engine splits);
- compute: under the output folder's lock, the runners (`job_images.py`, `job_sequences.py`) plan each frame
  against what earlier runs left (`resume.py`), load only the models some frame needs and stream images through
  the tasks in chunks (`stages.compute_frames`);
- commit: every frame as one transaction (`stages.commit_frame`, `transaction.py`); a sequence's index is
  written only over one run's complete frames, and an unfinished sequence carries a `<name>.partial.json`
  marker instead.

The spec and report (`job_spec.py`), the checkpoints and models (`job_checkpoints.py`) and the plan
(`job_plan.py`) live in their own modules; their names are re-exported here, the job's public import path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from ...checkpoints import hub
from ...formats.bundle import CaptureFrame
from ...tasks import registry as tasks_registry
from ...timing import add_stage, in_context, listening, stage
from ..errors import NonFiniteOutputError, StudioError
from ..runtime.host import Host
from ..runtime.models import LoadedModel, ModelCache
from ..sources.inputs import ImageJob, SequenceJob
from ..store.lock import lock_output
from ..store.orphans import remove_orphans
from ..store.remote import RemoteOutput, is_remote, local_path
from ..store.resume import RunInfo
from ..store.transaction import output_error, pause_point
from .job_checkpoints import auto_batch_size, first_task, load_models, resolve_checkpoints
from .job_images import run_images
from .job_plan import Member, RunPlan, make_plan, recover_left_overs, unit_plan
from .job_sequences import run_sequence
from .job_spec import ItemFn, JobReport, JobSpec
from .pipelining import OrderedWriter
from .stages import FrameItem, commit_frame, compute_frames, job_expectation

__all__ = [
    "ItemFn",
    "JobReport",
    "JobSpec",
    "Member",
    "PredictJob",
    "RunPlan",
    "auto_batch_size",
    "first_task",
    "load_models",
    "make_plan",
    "recover_left_overs",
    "resolve_checkpoints",
    "unit_plan",
]


class PredictJob:
    """Runs a JobSpec on one machine (the local engine); with `member`, one work unit of a distributed run.
    `prepare` makes its `plan` (a `RunPlan`, None until then), `run` consumes it."""

    def __init__(
        self,
        spec: JobSpec,
        *,
        host: Host | None = None,
        on_item: ItemFn | None = None,
        member: Member | None = None,
    ) -> None:
        spec.validate()
        self.spec = spec
        self.host = host or Host()
        self.on_item = on_item
        self.remote = (
            RemoteOutput(os.fspath(spec.out), spec.staging, spec.storage_options)
            if is_remote(spec.out)
            else None
        )
        self.out = self.remote.staging if self.remote is not None else local_path(spec.out)
        self.member = member
        self.run_info = member.run if member is not None else RunInfo.new(spec.run_id)
        self.report = JobReport(self.out, run_id=self.run_info.id)
        self.plan: RunPlan | None = None  # set once by prepare / prepare_unit
        self.models: dict[str, LoadedModel] = {}
        self.cache = member.cache if member is not None else ModelCache()
        self.batch = 1 if spec.batch_size == "auto" else int(spec.batch_size)
        self.tasks = tuple(t for t in tasks_registry.run_order() if t in spec.tasks)
        self._created: list[Path] = []  # folders this run made (removed again if it commits nothing there)
        self._shas: dict[str, str | None] = {}
        self.frame_writer: OrderedWriter | None = None  # the frame writers, open while the job runs

    # ------------------------------------------------------------------------------------------------ set-up

    def prepare(self) -> int | None:
        """Make the run's plan (`job_plan.make_plan`: everything cheap, before any model loads). Returns the
        number of images to process when known in advance (a video's frame count is not)."""
        self.plan = make_plan(self.spec, self.out, self.tasks, self.remote)
        if self.plan.check is not None:
            self.report.orphaned = [f"{o.label} ({o.why})" for o in self.plan.check.orphans]
        return self.plan.total

    def prepare_unit(self, jobs: list[ImageJob | SequenceJob]) -> None:
        """A work unit's plan (`job_plan.unit_plan`): the driver checked the inputs and the folder already."""
        self.plan = unit_plan(self.spec, jobs)

    def planned(self) -> RunPlan:
        """The run's plan, made now if `prepare` was not called."""
        if self.plan is None:
            self.prepare()
        assert self.plan is not None
        return self.plan

    @property
    def jobs(self) -> tuple[ImageJob | SequenceJob, ...]:
        """The plan's inputs (`RunPlan.jobs`)."""
        return self.planned().jobs

    @property
    def paths(self) -> dict[str, Path]:
        """Task → checkpoint file, as a plain dict (it crosses process boundaries to a distributed run's workers)."""
        return dict(self.planned().paths)

    @property
    def _trusted_run(self) -> str | None:
        """The run whose committed frames a retried unit takes as done (`Member.retry`)."""
        return self.run_info.id if self.member is not None and self.member.retry else None

    def run(self) -> JobReport:
        """Run the job here; every stage it runs is timed into `report.stages` and told to the host."""
        with listening(self._stage_done, synchronize=self.host.stage_sync()), stage("job.other"):
            return self._run()

    def _stage_done(self, name: str, wall: float, cpu: float) -> None:
        add_stage(self.report.stages, name, wall, cpu)
        self.host.stage_done(name, wall, cpu)

    def _run(self) -> JobReport:
        plan = self.planned()
        if self.spec.engine != "local" and self.member is None:
            raise StudioError(
                f"PredictJob.run is the local engine; a job for the {self.spec.engine} engine runs through "
                "run_job(spec) or engines.dispatch.run_prepared(job)"
            )
        self.make_folder(self.out)
        lock = None
        try:
            # a farm chunk or a distributed run's unit: other writers of the run may write beside it
            shared = self.spec.frames is not None or self.member is not None
            lock = lock_output(self.out, self.run_info.id, self.host, shared=shared)
            pause_point("locked")
            if not shared:
                recover_left_overs(self.out, self.host)
            if self.spec.clean and self.member is None and plan.check is not None:
                remove_orphans(plan.check.orphans)  # asked for: the only way results of a missing input go
                self.report.removed, self.report.orphaned = self.report.orphaned, []
            if self.spec.skip_existing or self._trusted_run:
                self._shas = {t: hub.file_sha256(p, self.spec.checkpoint_dir) for t, p in plan.paths.items()}
            with OrderedWriter(self.spec.writers) as self.frame_writer:  # see pipelining.py
                run_images(self, plan)
                for sequence in plan.sequences:
                    count, error = run_sequence(self, plan.boxes, sequence)
                    if error is not None:  # a broken frame stops its sequence (no index), not the whole batch
                        marker = self.out / sequence.name / f"{sequence.name}.partial.json"
                        state = "no index, marked partial" if marker.exists() else "nothing changed there"
                        self.report.failures.append(
                            f"{error.message} (sequence {sequence.name!r} stopped after {count} frame(s); {state})"
                        )
        finally:
            if lock is not None:
                lock.release()
            self.frame_writer = None
            self.remove_unused_folders()
            self.report.notes = list(dict.fromkeys(self.host.notes))
        return self.report

    def make_folder(self, folder: Path) -> None:
        if folder.is_dir():
            return
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            return
        except OSError as exc:
            raise output_error(exc, folder) from None
        self._created.append(folder)

    def remove_unused_folders(self) -> None:
        for folder in reversed(self._created):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only succeeds when empty: nothing of this run (or anyone else's) is there

    def _ensure_models(self, tasks: Iterable[str]) -> dict[str, LoadedModel]:
        """The models of `tasks`, loading those not loaded yet (a resumed run may need none at all)."""
        missing = {t: self.planned().paths[t] for t in tasks if t not in self.models}
        if missing:
            with stage("load"):
                self.models.update(load_models(self.spec, missing, self.cache))
            for task in missing:  # a file that is not the size its official name promises: say so, once
                if self.models[task].extra.get("warning"):
                    self.host.note(self.models[task].extra["warning"])
            self.host.device = next(iter(self.models.values())).plan.device
            if self.spec.batch_size == "auto":
                self.batch = auto_batch_size(self.models)
        return {t: self.models[t] for t in tasks_registry.run_order() if t in tasks}

    def item_done(self, label: str) -> None:
        if self.on_item is not None:
            self.on_item(1, label)

    def expectation(self, source: dict[str, Any], boxes: Any, *, sequence: bool) -> Any:
        return job_expectation(
            self.spec, self.tasks, self._shas, source, boxes, sequence=sequence, trusted_run=self._trusted_run
        )

    def kept(self, plan: Any) -> None:
        """Count a frame not written now: kept from an earlier run, or committed by this run's worker that died
        (a retried unit), which this run did write."""
        committed_by = ((plan.doc or {}).get("run") or {}).get("id")
        if self._trusted_run is not None and committed_by == self._trusted_run:
            self.report.written += 1
        else:
            self.report.skipped += 1

    # ------------------------------------------------------------------------------------------------ frames

    def compute(self, items: list[FrameItem]) -> tuple[list[CaptureFrame], dict[int, NonFiniteOutputError]]:
        """The per-frame stage of a chunk (stages.compute_frames): raw canonical frames, refused ones apart."""
        return compute_frames(items, self.spec, self.host, self._ensure_models)

    def commit(
        self,
        item: FrameItem,
        frame: CaptureFrame,
        run: RunInfo,
        done: Callable[[], Any] | None = None,
        temporal: dict[str, Any] | None = None,
    ) -> None:
        """One frame's transaction: sidecars and EXR staged, JSON last (stages.commit_frame). It runs on a
        writer thread when `writers` > 0 while the models go on; `done()` follows on this thread, in frame
        order (pipelining.OrderedWriter), so what records a frame only sees committed ones."""
        self.make_folder(item.folder)
        work = in_context(partial(commit_frame, item, frame, run, self.spec, temporal=temporal))

        def committed(_: Any) -> None:
            self.report.written += 1
            if done is not None:
                done()

        assert self.frame_writer is not None, "frames are committed while the job runs"
        self.frame_writer.submit(work, committed)
