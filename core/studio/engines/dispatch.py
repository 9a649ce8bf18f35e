"""The one entry that runs a predict job on the engine its spec names (`JobSpec.engine`), and, for an output URL,
between hydrating its staging folder and publishing it (`remote.py`): the same for every engine."""

from __future__ import annotations

from ..host import Host
from ..job import ItemFn, JobReport, JobSpec, PredictJob


def run_prepared(job: PredictJob) -> JobReport:
    """Run a PredictJob (prepared or not) on its spec's engine; an output URL is published during and after."""
    if not hasattr(job, "jobs"):
        job.prepare()
    remote = (
        job.remote if job.member is None else None
    )  # a distributed run's units write the driver's staging
    if remote is None:
        return _run_engine(job)
    with remote.session(job.run_info.id, shared=job.spec.frames is not None):
        fetched = remote.hydrate()
        if fetched:
            job.host.note(
                f"fetched {fetched} frame(s) already published at {remote.url} into {remote.staging}"
            )
        with remote.publishing():
            report = _run_engine(job)
    report.published = remote.url
    return report


def _run_engine(job: PredictJob) -> JobReport:
    if job.spec.engine == "ray" and job.member is None:
        from .ray_engine import run_on_ray

        return run_on_ray(job)
    return job.run()


def run_job(spec: JobSpec, *, host: Host | None = None, on_item: ItemFn | None = None) -> JobReport:
    """Run a predict job; see JobSpec for the options (`engine` among them) and JobReport for the outcome."""
    return run_prepared(PredictJob(spec, host=host, on_item=on_item))
