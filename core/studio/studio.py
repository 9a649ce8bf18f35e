"""`Studio`: the application engine as one object, for scripts and notebooks (docs/pipeline.md)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .. import catalogue
from ..checkpoints import hub
from ..checkpoints.loader import refuse_size_contradiction
from ..formats.bundle import CaptureFrame
from .compute.capture import capture_frames
from .compute.run_tasks import TaskOptions, run_tasks
from .runtime.host import Host
from .runtime.models import LoadedModel, ModelCache
from .sources.batches import TaskBatch


class Studio:
    """Models cached by file and execution plan, tasks over image batches, capture frames — what the CLI and the
    ComfyUI nodes run, without either.

    >>> studio = Studio(device="cpu")
    >>> batches = studio.predict(images, tasks=("seg", "pose", "matting"))  # each task at its default size
    >>> frames = studio.capture(images, batches)
    """

    def __init__(
        self,
        device: str = "auto",
        dtype: str = "auto",
        attention: str = "auto",
        compile: bool = False,
        runtime: str = "torch",
        *,
        checkpoint_dir: str | os.PathLike | None = None,
        allow_download: bool = True,
        host: Host | None = None,
        trust_task_code: bool | str | Iterable[str] | None = None,
    ) -> None:
        """trust_task_code: run installed task plug-ins' code (True, or their names; None: as
        $SAPIENS2_TRUST_TASKS says; docs/tasks.md); an untrusted plug-in's task is refused when asked for."""
        from ..tasks import registry

        registry.load_plugins(trust=trust_task_code)
        self.options = {
            "device": device,
            "dtype": dtype,
            "attention": attention,
            "compile": compile,
            "runtime": runtime,  # "onnxruntime": forward passes on exported files (docs/deploy.md)
        }
        self.checkpoint_dir = checkpoint_dir
        self.allow_download = allow_download
        self.host = host or Host()
        self.cache = ModelCache()

    def model(
        self, task: str, checkpoint: str | os.PathLike | None = None, *, size: str | None = None
    ) -> LoadedModel:
        """The model for `task`: the given file, else the official file of `size` (downloaded, hash-verified);
        no size means the task's own default (`catalogue.default_size`: 0.4b, matting 1b)."""
        from ..tasks import registry
        from ..tasks.errors import TaskError

        if task in catalogue.TASKS or not registry.has(task):
            registry.get(task)  # unknown, or an untrusted plug-in: the error names the choices or the opt-in
            catalogue.check_task(task, allow_pretrain=False)
        elif checkpoint is None:  # a plug-in task has no official files
            raise TaskError(
                f"the {task} task is a plug-in without official files: give its checkpoint",
                hints={"python": f"pass checkpoints={{{task!r}: PATH}} (or studio.model({task!r}, PATH))"},
            )
        path = (
            checkpoint
            if checkpoint is not None
            else hub.ensure_checkpoint(
                task,
                size or catalogue.default_size(task),
                self.checkpoint_dir,
                allow_download=self.allow_download,
            )
        )
        if checkpoint is None and size is not None:  # an asked size must be that size (another is refused)
            refuse_size_contradiction(path, size)
        loaded = self.cache.get(path, task=task, hash_cache_dir=self.checkpoint_dir, **self.options)
        self.host.device = loaded.plan.device
        return loaded

    def predict(
        self,
        images: Any,
        tasks: Iterable[str] = catalogue.DEFAULT_TASKS,
        *,
        size: str | None = None,
        checkpoints: Mapping[str, str | os.PathLike] | None = None,
        options: TaskOptions | None = None,
    ) -> dict[str, TaskBatch]:
        """Task → results for every image (see `run_tasks`), e.g. `predict(images, ("seg", "matting"))`.

        size: one official size for every task; None gives each task its own default (matting 1b, others 0.4b).
        """
        checkpoints = checkpoints or {}
        models = {task: self.model(task, checkpoints.get(task), size=size) for task in tasks}
        return run_tasks(models, images, self.host, options)

    def capture(self, images: Any, batches: Mapping[str, TaskBatch], **options: Any) -> list[CaptureFrame]:
        """Capture frames (what a bundle stores) from `predict`'s results (see `capture_frames`)."""
        options.setdefault("host", self.host)
        return capture_frames(images, batches, **options)
