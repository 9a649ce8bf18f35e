"""The application engine every front-end (CLI, ComfyUI, Python, distributed workers) runs on.

Layers and rules: docs/architecture.md. The pieces a script needs are importable from here::

    from sapiens2_studio.core.studio import JobSpec, Studio, run_job

They are loaded on first use (PEP 562), so the light modules here (`engines`, `runtime.pipelining`, `errors`) can be
imported without torch — the CLI's parser does, and `sapiens2 --help` stays instant.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "TaskBatch": ".sources.batches",
    "capture_frames": ".compute.capture",
    "InputError": ".errors",
    "OutOfMemoryError": ".errors",
    "OutputError": ".errors",
    "StudioError": ".errors",
    "ExecutionPlan": ".runtime.execution",
    "plan_execution": ".runtime.execution",
    "Host": ".runtime.host",
    "JobReport": ".jobs.job",
    "JobSpec": ".jobs.job",
    "PredictJob": ".jobs.job",
    "run_job": ".engines.dispatch",
    "LoadedModel": ".runtime.models",
    "ModelCache": ".runtime.models",
    "Studio": ".studio",
    "TaskOptions": ".compute.run_tasks",
    "run_tasks": ".compute.run_tasks",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
