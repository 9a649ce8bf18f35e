"""The application engine every front-end (CLI, ComfyUI, Python, distributed workers) runs on.

Layers and rules: docs/architecture.md. The pieces a script needs are importable from here::

    from sapiens2_studio.core.studio import JobSpec, Studio, run_job

They are loaded on first use (PEP 562), so the light modules here (`engines`, `pipelining`, `errors`) can be
imported without torch — the CLI's parser does, and `sapiens2 --help` stays instant.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "TaskBatch": ".batches",
    "capture_frames": ".capture",
    "InputError": ".errors",
    "OutOfMemoryError": ".errors",
    "OutputError": ".errors",
    "StudioError": ".errors",
    "ExecutionPlan": ".execution",
    "plan_execution": ".execution",
    "Host": ".host",
    "JobReport": ".job",
    "JobSpec": ".job",
    "PredictJob": ".job",
    "run_job": ".engines.dispatch",
    "LoadedModel": ".models",
    "ModelCache": ".models",
    "Studio": ".studio",
    "TaskOptions": ".tasks",
    "run_tasks": ".tasks",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
