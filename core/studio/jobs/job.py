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

from functools import partial
from pathlib import Path

from ...tasks import registry as tasks_registry
from ...timing import listening, stage
from ..errors import StudioError
from ..runtime.host import Host
from ..runtime.models import LoadedModel, ModelCache
from ..sources.inputs import ImageJob, SequenceJob
from ..store.output_store import OutputStore
from ..store.remote import RemoteOutput
from ..store.resume import RunInfo
from .frame_run import FrameRun
from .job_checkpoints import (
    auto_batch_size,
    checkpoint_identities,
    first_task,
    load_models,
    resolve_checkpoints,
)
from .job_images import run_images
from .job_plan import Member, RunPlan, make_plan, recover_left_overs, unit_plan
from .job_sequences import run_sequence
from .job_spec import ItemFn, JobReport, JobSpec, record_stage
from .pipelining import OrderedWriter

__all__ = [
    "ItemFn",
    "JobReport",
    "JobSpec",
    "Member",
    "PredictJob",
    "RunPlan",
    "auto_batch_size",
    "checkpoint_identities",
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
        self.store = OutputStore(spec.out, staging=spec.staging, storage_options=spec.storage_options)
        self.out = self.store.folder  # where frames are written (an output URL's staging folder)
        self.member = member
        self.run_info = member.run if member is not None else RunInfo.new(spec.run_id)
        self.report = JobReport(self.out, run_id=self.run_info.id)
        self.plan: RunPlan | None = None  # set once by prepare / prepare_unit
        self.models: dict[str, LoadedModel] = {}
        self.cache = member.cache if member is not None else ModelCache()
        self.batch = 1 if spec.batch_size == "auto" else int(spec.batch_size)
        self.tasks = tuple(t for t in tasks_registry.run_order() if t in spec.tasks)

    # ------------------------------------------------------------------------------------------------ set-up

    def prepare(self) -> int | None:
        """Make the run's plan (`job_plan.make_plan`: everything cheap, before any model loads). Returns the
        number of images to process when known in advance (a video's frame count is not)."""
        self.plan = make_plan(self.spec, self.out, self.tasks, self.remote, self.cache)
        if self.plan.check is not None:
            self.report.orphaned = [f"{o.label} ({o.why})" for o in self.plan.check.orphans]
        return self.plan.total

    def prepare_unit(self, jobs: list[ImageJob | SequenceJob]) -> None:
        """A work unit's plan (`job_plan.unit_plan`): the driver checked the inputs and the folder already."""
        self.plan = unit_plan(self.spec, jobs, self.cache)

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
        recorder = partial(record_stage, self.report, self.host)
        with listening(recorder, synchronize=self.host.stage_sync()), stage("job.other"):
            return self._run()

    def _run(self) -> JobReport:
        plan = self.planned()
        if self.spec.engine != "local" and self.member is None:
            raise StudioError(
                f"PredictJob.run is the local engine; a job for the {self.spec.engine} engine runs through "
                "run_job(spec) or engines.dispatch.run_prepared(job)"
            )
        # a farm chunk or a distributed run's unit: other writers of the run may write beside it
        shared = self.spec.frames is not None or self.member is not None
        try:
            with self.store.opened(self.run_info.id, self.host, shared=shared):
                if self.spec.clean and self.member is None and plan.check is not None:
                    # asked for: the only way results of a missing input go
                    self.store.remove_orphans(plan.check.orphans)
                    self.report.removed, self.report.orphaned = self.report.orphaned, []
                with OrderedWriter(self.spec.writers) as writer:  # see pipelining.py
                    self._run_frames(plan, writer)
        finally:
            self.report.notes = list(dict.fromkeys(self.host.notes))
        return self.report

    def _run_frames(self, plan: RunPlan, writer: OrderedWriter) -> None:
        """Hand the runners this run's `FrameRun`: single images first, then each sequence in order."""
        shas = {}
        if self.spec.skip_existing or self._trusted_run:  # each identity's sha256, hashed at most once
            shas = {t: identity.sha256 for t, identity in plan.checkpoints.items()}
        running = FrameRun(
            spec=self.spec,
            plan=plan,
            out=self.out,
            tasks=self.tasks,
            run_info=self.run_info,
            report=self.report,
            host=self.host,
            writer=writer,
            store=self.store,
            models=self.models,
            cache=self.cache,
            batch=self.batch,
            checkpoint_shas=shas,
            trusted_run=self._trusted_run,
            on_item=self.on_item,
        )
        run_images(running, plan)
        for sequence in plan.sequences:
            count, error = run_sequence(running, plan.boxes, sequence)
            if error is not None:  # a broken frame stops its sequence (no index), not the whole batch
                marker = self.out / sequence.name / f"{sequence.name}.partial.json"
                state = "no index, marked partial" if marker.exists() else "nothing changed there"
                self.report.failures.append(
                    f"{error.message} (sequence {sequence.name!r} stopped after {count} frame(s); {state})"
                )

    @property
    def remote(self) -> RemoteOutput | None:
        """The output URL's staging and publishing (`store.remote`), None for a local folder."""
        return self.store.remote
