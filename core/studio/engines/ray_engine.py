"""The Ray engine: a predict job's work units (`units.py`) on a pool of Ray actors, one model set per actor.

Why actors (Ray Core) and not a Ray Data pipeline: every frame here is an output transaction in a shared folder
(`transaction.py`), resumable and verifiable (`resume.py`), and a sequence's temporal pass must run in frame
order after the per-frame work. An actor that holds the models (loaded once per worker) and runs whole units
keeps all of that in the one engine the local run uses; Ray schedules the actors on the cluster's GPUs and CPUs,
and the driver hands out units as actors become free (the faster worker takes more).

The driver, in order: takes the output folder's lock exclusively and recovers what earlier runs left, then opens
it to its workers (shared lock, same run id); starts or joins Ray; runs every unit, replacing a worker that dies
and giving its unit to another as a *retry* (frames the dead worker already committed for this run are verified
and kept, the rest are computed: no frame is lost or written twice); takes the lock exclusively again, completes
commits a killed worker left half done, and finalizes the sequences (temporal pass in frame order, index). The
report lists what was written, kept, retried (with the reason) and failed.

Only this module imports ray, and only when a job asks for it (`pip install "sapiens2-studio[ray]"`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...timing import merge_stages
from .. import errors
from ..errors import EngineError, FinalizeError, OutputError
from ..jobs.finalize import chunk_markers, finalize
from ..store.output_store import recover_left_overs
from ..store.resume import RunInfo
from . import INSTALL_HINTS
from .units import UnitResult, WorkUnit, run_unit, split_work

if TYPE_CHECKING:
    from ..jobs.job import JobReport, PredictJob

MAX_ATTEMPTS = 3  # a unit whose workers die this often is reported failed (it may be what kills them)


def require_ray() -> Any:
    """The ray module, or an EngineError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise EngineError("the Ray engine needs Ray, which is not installed", hints=INSTALL_HINTS) from None
    return ray


class UnitWorker:
    """One Ray actor: a worker process holding the job's models (loaded on first use, kept across units)."""

    def __init__(self, spec: Any, checkpoints: dict[str, Path], threads: int | None) -> None:
        from ..runtime.models import ModelCache

        if threads:
            import torch

            torch.set_num_threads(threads)  # this worker's share of the cores, not every core of the node
        self.spec = spec
        self.checkpoints = checkpoints
        self.cache = ModelCache()
        self.name = f"{socket.gethostname()}:{os.getpid()}"

    def run(self, unit: WorkUnit, run: RunInfo, retry: bool) -> UnitResult:
        from ..jobs.job_plan import Member

        return run_unit(self.spec, unit, Member(run, self.cache, retry), self.checkpoints, worker=self.name)


def run_on_ray(job: PredictJob) -> JobReport:
    """Run a PredictJob (`spec.engine == "ray"`) on Ray from its plan (`job.planned()`: the same `RunPlan` the
    local engine runs; its jobs are split into work units); see the module docstring."""
    ray = require_ray()
    host, report, out, plan = job.host, job.report, job.out, job.planned()
    # workers write where the driver stages (an output URL is published by the driver: dispatch.py)
    spec = dataclasses.replace(job.spec, out=str(out), staging=None, storage_options={})
    with job.store.opened(job.run_info.id, host) as lock:
        started_ray = False
        try:
            if job.spec.clean and plan.check is not None:  # as the local engine: asked for
                job.store.remove_orphans(plan.check.orphans)
                report.removed, report.orphaned = report.orphaned, []
            run = _resumed_run(job) or job.run_info
            if run.id != job.run_info.id:  # the lock names the run every frame will carry
                lock.run_id = run.id
                report.run_id = run.id
            lock.share()
            started_ray = _connect(ray, spec)
            pool = WorkerPool(ray, spec, dict(plan.paths))  # a plain dict: it is sent to the actors
            units = split_work(plan.jobs, pool.workers, job.batch)
            host.note(pool.describe(len(units)))
            try:
                results = pool.run(units, run, on_unit=lambda unit, result: _progress(job, unit, result))
            except BaseException:
                with contextlib.suppress(OutputError):  # return only once no worker writes here any more
                    lock.exclusive(wait=30)
                raise
            lock.exclusive()  # every worker has let go: complete what killed ones left, then the temporal pass
            recover_left_overs(out, host)
            _collect(report, results, pool.retried, pool.failed)
            _finalize(job, units, results, report)
        finally:
            if started_ray:
                ray.shutdown()
            report.notes = list(dict.fromkeys(host.notes + report.notes))
    return report


def _resumed_run(job: PredictJob) -> RunInfo | None:
    """With --skip-existing (and no run id given): the run of this job's unfinished sequences, so that the frames
    an interrupted distributed run committed raw count as done. None when they name none, or several, runs."""
    if not job.spec.skip_existing or job.spec.run_id is not None:
        return None
    names = {j.name for j in job.planned().sequences}
    runs = {
        str((m.get("run") or {}).get("id")): m.get("run")
        for _, m in chunk_markers(job.out)
        if m.get("name") in names and (m.get("run") or {}).get("id")
    }
    return RunInfo.from_record(next(iter(runs.values()))) if len(runs) == 1 else None


def _connect(ray: Any, spec: Any) -> bool:
    """Join the cluster at `ray_address`, or start Ray on this machine; True when this call started it."""
    if ray.is_initialized():
        return False  # a script that runs Ray already: use its cluster, leave it running
    try:
        ray.init(
            address=spec.ray_address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            configure_logging=True,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {spec.ray_address}" if spec.ray_address else "a local Ray instance"
        raise EngineError(
            f"could not connect to {where}: {exc}",
            hints={
                "cli": "check --ray-address (auto, or HOST:PORT of `ray start --head`), or leave it out to start "
                "Ray on this machine"
            },
        ) from None
    return True


class WorkerPool:
    """The job's actors, and the loop that gives each free one the next unit (module docstring)."""

    def __init__(self, ray: Any, spec: Any, checkpoints: dict[str, Path]) -> None:
        self.ray = ray
        resources = ray.cluster_resources()
        cpus, gpus = float(resources.get("CPU", 1.0)), float(resources.get("GPU", 0.0))
        per_gpu = spec.gpus_per_worker if spec.gpus_per_worker is not None else (1.0 if gpus >= 1 else 0.0)
        workers = spec.workers or (max(1, int(gpus // per_gpu)) if per_gpu else 1)
        if per_gpu * workers > gpus + 1e-9:
            raise EngineError(
                f"{workers} worker(s) with {per_gpu:g} GPU(s) each need {per_gpu * workers:g} GPUs; the Ray "
                f"cluster has {gpus:g}",
                hints={"cli": "lower --workers or --gpus-per-worker (0 runs the workers on CPU)"},
            )
        self.workers, self.gpus_per_worker = workers, per_gpu
        self.cpus_per_worker = min(1.0, cpus / workers) if per_gpu else cpus / workers
        threads = max(1, int(cpus / workers))  # torch threads: an equal share of the cores, GPU workers too
        options = {"num_cpus": self.cpus_per_worker, "num_gpus": per_gpu, "max_restarts": 0}
        self._actor_class = ray.remote(**options)(UnitWorker)
        self._args = (spec, checkpoints, threads)
        self.retried: list[str] = []
        self.failed: list[str] = []

    def describe(self, units: int) -> str:
        each = f"{self.gpus_per_worker:g} GPU" if self.gpus_per_worker else f"{self.cpus_per_worker:g} CPU"
        return f"Ray: {units} unit(s) on {self.workers} worker(s), {each} each"

    def _new_actor(self) -> Any:
        return self._actor_class.remote(*self._args)

    def run(self, units: list[WorkUnit], run: RunInfo, on_unit: Any) -> list[UnitResult]:
        ray = self.ray
        dead = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError)
        pending = collections.deque(units)
        attempts: collections.Counter[int] = collections.Counter()
        idle = [self._new_actor() for _ in range(min(self.workers, len(units)))]
        flying: dict[Any, tuple[WorkUnit, Any]] = {}
        results: list[UnitResult] = []
        fatal: UnitResult | None = None
        try:
            while flying or (pending and fatal is None):
                while pending and idle and fatal is None:
                    unit, actor = pending.popleft(), idle.pop()
                    flying[actor.run.remote(unit, run, attempts[unit.index] > 0)] = (unit, actor)
                [ref], _ = ray.wait(list(flying), num_returns=1)
                unit, actor = flying.pop(ref)
                try:
                    result = ray.get(ref)
                except dead as exc:
                    attempts[unit.index] += 1
                    why = _death_reason(exc)
                    ray.kill(actor, no_restart=True)
                    if attempts[unit.index] >= MAX_ATTEMPTS:
                        self.failed.append(
                            f"{unit.label}: its worker died {MAX_ATTEMPTS} times (last: {why})"
                        )
                    else:
                        self.retried.append(
                            f"{unit.label}: its worker died ({why}); retried on another worker"
                        )
                        pending.appendleft(unit)
                    idle.append(self._new_actor())
                    continue
                results.append(result)
                idle.append(actor)
                on_unit(unit, result)
                if result.fatal is not None and fatal is None:
                    fatal = result  # let the units in flight finish their frames, start no more
        except BaseException:
            for _, actor in flying.values():  # Ctrl-C or a bug: stop the workers; a half commit is rolled
                ray.kill(actor, no_restart=True)  # forward by the next run (transaction.recover_commits)
            raise
        if fatal is not None:
            name, message, hints = fatal.fatal  # type: ignore[misc]
            raise getattr(errors, name, errors.StudioError)(message, hints=hints)
        return results


def _death_reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    for marker in ("SIGKILL", "killed", "OOM", "out of memory", "exited", "crashed"):
        if marker.lower() in text.lower():
            return {"OOM": "out of memory", "SIGKILL": "killed"}.get(marker, marker)
    return type(exc).__name__


def _progress(job: PredictJob, unit: WorkUnit, result: UnitResult) -> None:
    if job.on_item is not None:
        job.on_item(result.written + result.skipped + len(result.failures), unit.label)


def _collect(report: Any, results: list[UnitResult], retried: list[str], failed: list[str]) -> None:
    for result in sorted(results, key=lambda r: r.index):
        report.written += result.written
        report.skipped += result.skipped
        report.failures.extend(result.failures)
        report.notes.extend(result.notes)
        merge_stages(report.stages, result.stages)  # the run record: every worker's stage totals
    report.retried.extend(retried)
    report.failures.extend(failed)


def _finalize(job: PredictJob, units: list[WorkUnit], results: list[UnitResult], report: Any) -> None:
    """The temporal pass and index of each chunked sequence whose every unit finished (module docstring)."""
    done = {r.index for r in results if not r.failures}
    sequences: dict[str, bool] = {}
    for unit in units:
        if unit.sequence is not None:
            sequences[unit.sequence] = sequences.get(unit.sequence, True) and unit.index in done
    for name, complete in sequences.items():
        if not complete:
            report.failures.append(
                f"sequence {name!r}: not indexed, some of its frames failed (see above); run the same command "
                "again with --skip-existing to redo only those"
            )
            continue
        try:
            finalize(job.out, smooth=job.spec.smooth, host=job.host, sequences={name}, locked=True)
        except FinalizeError as exc:
            report.failures.append(exc.message)
