"""The one entry that runs a predict job on the engine its spec names (`JobSpec.engine`)."""

from __future__ import annotations

from ..host import Host
from ..job import ItemFn, JobReport, JobSpec, PredictJob


def run_prepared(job: PredictJob) -> JobReport:
    """Run a PredictJob (prepared or not) on its spec's engine."""
    if job.spec.engine == "ray" and job.member is None:
        from .ray_engine import run_on_ray

        if not hasattr(job, "jobs"):
            job.prepare()
        return run_on_ray(job)
    return job.run()


def run_job(spec: JobSpec, *, host: Host | None = None, on_item: ItemFn | None = None) -> JobReport:
    """Run a predict job; see JobSpec for the options (`engine` among them) and JobReport for the outcome."""
    return run_prepared(PredictJob(spec, host=host, on_item=on_item))
