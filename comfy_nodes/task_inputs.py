"""Task results wired into a node, named by the tasks' own input names.

Why: a node that takes several tasks' results (Save Capture Bundle, Export USD) names its inputs after the tasks'
`Task.field` ("pose", "seg", "normals", …); the engine wants task → batch. The registry says which input is whose,
so the nodes never spell that mapping out task by task.
"""

from __future__ import annotations

from typing import Any

from ..core.tasks import registry as tasks_registry


def batches_by_task(**inputs: Any) -> dict[str, Any]:
    """Task name → the batch given as the input named by its `Task.field`, in the registry's listing order (tasks
    whose input the node does not have are left out; an unconnected input stays None)."""
    return {task.name: inputs[task.field] for task in tasks_registry.all_tasks() if task.field in inputs}
