"""One run's per-frame stages: what the runners (`job_images.py`, `job_sequences.py`) call, and nothing above.

Why apart from `job.py`: a job is a descent. `PredictJob` plans, takes the folder's lock and opens the writers,
then hands a `FrameRun` to the runners; the runners call down into it (plan a frame against what earlier runs
left, compute a chunk, commit a frame, count a kept one), and it calls down into the stages (`stages.py`), the
output store and the models. Nothing the job runs calls back up into the job (`scripts/job_walk.py` counts it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ...formats.bundle import CaptureFrame
from ...tasks import registry as tasks_registry
from ...timing import in_context, stage
from ..errors import NonFiniteOutputError
from ..runtime.host import Host
from ..runtime.models import LoadedModel, ModelCache
from ..store.output_store import OutputStore
from ..store.resume import RunInfo
from .job_checkpoints import auto_batch_size, load_models
from .job_plan import RunPlan
from .job_spec import ItemFn, JobReport, JobSpec
from .pipelining import OrderedWriter
from .stages import FrameItem, commit_frame, compute_frames, job_expectation


@dataclass
class FrameRun:
    """The running job as its runners see it: the spec, plan and run its frames carry, and the per-frame stages.
    `models` is the job's own dict (filled as frames need them), `report` the job's report."""

    spec: JobSpec
    plan: RunPlan
    out: Path
    tasks: tuple[str, ...]
    run_info: RunInfo
    report: JobReport
    host: Host
    writer: OrderedWriter
    store: OutputStore
    models: dict[str, LoadedModel]
    cache: ModelCache
    batch: int
    checkpoint_shas: dict[str, str | None]
    trusted_run: str | None = None
    on_item: ItemFn | None = None

    def expectation(self, source: dict[str, Any], boxes: Any, *, sequence: bool) -> Any:
        """What this run produces for one frame (`resume.plan_frame` compares it with what the folder holds)."""
        return job_expectation(
            self.spec,
            self.tasks,
            self.checkpoint_shas,
            source,
            boxes,
            sequence=sequence,
            trusted_run=self.trusted_run,
        )

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
        self.store.make_folder(item.folder)
        work = in_context(partial(commit_frame, item, frame, run, self.spec, temporal=temporal))
        self.writer.submit(work, partial(self._committed, done))

    def kept(self, plan: Any) -> None:
        """Count a frame not written now: kept from an earlier run, or committed by this run's worker that died
        (a retried unit), which this run did write."""
        committed_by = ((plan.doc or {}).get("run") or {}).get("id")
        if self.trusted_run is not None and committed_by == self.trusted_run:
            self.report.written += 1
        else:
            self.report.skipped += 1

    def item_done(self, label: str) -> None:
        if self.on_item is not None:
            self.on_item(1, label)

    def _committed(self, done: Callable[[], Any] | None, _: Any) -> None:
        self.report.written += 1
        if done is not None:
            done()

    def _ensure_models(self, tasks: Iterable[str]) -> dict[str, LoadedModel]:
        """The models of `tasks`, loading those not loaded yet (a resumed run may need none at all)."""
        missing = {t: self.plan.checkpoints[t] for t in tasks if t not in self.models}
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
