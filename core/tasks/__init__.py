"""Tasks as units: one `Task` per task (core/tasks/<name>.py) and the registry every consumer reads.

Nothing outside a task module asks "which task is this?" by name; see docs/tasks.md for writing a task.
"""

from .base import Layer, PredictContext, Preview, StoreContext, Task
from .errors import TaskError, UntrustedTaskError
from .registry import (
    ENTRY_POINT_GROUP,
    all_tasks,
    by_output_conv,
    for_head,
    get,
    has,
    load_plugins,
    names,
    refused,
    register,
    run_order,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Layer",
    "PredictContext",
    "Preview",
    "StoreContext",
    "Task",
    "TaskError",
    "UntrustedTaskError",
    "all_tasks",
    "by_output_conv",
    "for_head",
    "get",
    "has",
    "load_plugins",
    "names",
    "refused",
    "register",
    "run_order",
]
