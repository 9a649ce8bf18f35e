"""The application engine every front-end (CLI, ComfyUI, Python, distributed workers) runs on.

Layers and rules: docs/architecture.md. The pieces a script needs are importable from here::

    from sapiens2_studio.core.studio import JobSpec, Studio, run_job
"""

from .batches import TaskBatch
from .capture import capture_frames
from .errors import InputError, OutOfMemoryError, OutputError, StudioError
from .execution import ExecutionPlan, plan_execution
from .host import Host
from .job import JobReport, JobSpec, PredictJob, run_job
from .models import LoadedModel, ModelCache
from .studio import Studio
from .tasks import TaskOptions, run_tasks

__all__ = [
    "ExecutionPlan",
    "Host",
    "InputError",
    "JobReport",
    "JobSpec",
    "LoadedModel",
    "ModelCache",
    "OutOfMemoryError",
    "OutputError",
    "PredictJob",
    "Studio",
    "StudioError",
    "TaskBatch",
    "TaskOptions",
    "capture_frames",
    "plan_execution",
    "run_job",
    "run_tasks",
]
