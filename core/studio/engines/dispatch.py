"""The one entry that runs a predict job on the engine its spec names (`JobSpec.engine`), and, for an output URL,
between hydrating its staging folder and publishing it (`remote.py`): the same for every engine."""

from __future__ import annotations

from ..jobs.job import ItemFn, JobReport, JobSpec, PredictJob
from ..runtime.host import Host


def run_prepared(job: PredictJob) -> JobReport:
    """Run a PredictJob (prepared or not) on its spec's engine; an output URL is published during and after.
    Every engine runs the job's one plan (`job.plan`, made here when `prepare` was not called)."""
    job.planned()
    # a distributed run's units write into the driver's staging folder; only the driver publishes
    if job.member is not None or job.store.remote is None:
        return _run_engine(job)
    with job.store.published(job.run_info.id, job.host, shared=job.spec.frames is not None):
        report = _run_engine(job)
    report.published = job.store.remote.url
    return report


def _run_engine(job: PredictJob) -> JobReport:
    if job.spec.engine == "ray" and job.member is None:
        from .ray_engine import run_on_ray

        return run_on_ray(job)
    return job.run()


def run_job(spec: JobSpec, *, host: Host | None = None, on_item: ItemFn | None = None) -> JobReport:
    """Run a predict job; see JobSpec for the options (`engine` among them) and JobReport for the outcome."""
    return run_prepared(PredictJob(spec, host=host, on_item=on_item))
