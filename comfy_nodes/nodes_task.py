"""Sapiens2 Run Task: one node for every registered task, plug-in tasks included (docs/tasks.md).

The task combo is the registry's list, read when ComfyUI asks for the node's schema; plug-ins reach ComfyUI through
their entry points or SAPIENS2_TASK_MODULES and load only when SAPIENS2_TRUST_TASKS (in the server's environment)
trusts them. The node runs the task through the one engine (`run_tasks`) and shows what `core.studio.views.task_views`
makes of its results: a preview IMAGE, a MASK, and the raw results for nodes that know the task.
"""

from __future__ import annotations

import logging

from comfy_api.latest import io

from ..core.studio.compute.run_tasks import TaskOptions, run_tasks
from ..core.studio.errors import StudioError
from ..core.studio.sources.batches import check_image
from ..core.studio.views.task_views import task_views
from ..core.tasks import registry
from ..core.tasks.errors import TaskError
from .comfy_host import ComfyHost
from .compat import TaskResults, schema
from .errors import node_errors
from .inputs import chunk_size_input, image_input, model_input

log = logging.getLogger("sapiens2")

DISPLAY_NAME = "Sapiens2 Run Task"
AUTO = "auto (the model's task)"


def task_choices() -> list[str]:
    """`auto`, then every registered task: built-ins, and the plug-ins this server's environment trusts."""
    try:
        registry.load_plugins()
    except TaskError as exc:  # a broken plug-in costs its own task, not the node
        log.error("Sapiens2: a task plug-in failed to load: %s", exc)
    for name, why in registry.refused().items():
        log.warning("Sapiens2: task plug-in %s not loaded: %s", name, why)
    return [AUTO, *registry.names()]


class Sapiens2RunTask(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2RunTask",
            display_name=DISPLAY_NAME,
            search_aliases=["custom task", "fine-tuned head", "plugin task", "garment parsing"],
            description="Run any registered Sapiens2 task, including tasks installed as plug-ins (a fine-tuned "
            "head): a preview, a mask and the raw results. Plug-ins load when the server's environment trusts "
            "them (SAPIENS2_TRUST_TASKS).",
            inputs=[
                model_input("task", "any", purpose="its task runs (a plug-in task's checkpoint too)"),
                image_input("run the task on"),
                io.Combo.Input(
                    "task",
                    options=task_choices(),
                    default=AUTO,
                    tooltip="The task to run; 'auto' runs the model's own task. A plug-in task is listed once "
                    "SAPIENS2_TRUST_TASKS trusts it (restart ComfyUI after installing one).",
                ),
                chunk_size_input(4),
            ],
            outputs=[
                io.Image.Output(id="preview", display_name="preview", tooltip="The task's preview."),
                io.Mask.Output(
                    id="mask",
                    display_name="mask",
                    tooltip="Person mask, or the task's first layer: class ids other than 0, or values 0..1.",
                ),
                TaskResults.Output(
                    id="results", display_name="results", tooltip="The raw results, one per image."
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(DISPLAY_NAME)
    def execute(cls, model, image, task, chunk_size) -> io.NodeOutput:
        host = ComfyHost(cls.hidden.unique_id)
        rgb = check_image(image, "")
        name = getattr(model, "task", None) if task == AUTO else task
        if not isinstance(name, str) or not registry.has(name):
            registry.get(str(name))  # an untrusted plug-in: the refusal says how to trust it
            raise StudioError(f"the model's task {name!r} is not registered")
        batch = run_tasks({name: model}, rgb, host, TaskOptions(chunk_size=chunk_size))[name]
        preview, mask = task_views(name, batch.results, rgb)
        return io.NodeOutput(preview.to(host.output_device), mask.to(host.output_device), batch)


NODES = [Sapiens2RunTask]
