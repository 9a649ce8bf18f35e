"""The one catalogue of Sapiens2 sizes, tasks and official checkpoint files.

Every list of sizes the project shows (CLI choices, ComfyUI combos, download tables, error advice) and every
official file name or Hub URL comes from here; the task lists come from the task registry (`core.tasks`), where
each task's module declares its label, run order and released sizes.
Loading never uses it: the architecture and task of a file are read from its tensor shapes
(`core.checkpoints.infer`), so custom and future files load whatever they are called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import Sapiens2Error
from .tasks import registry as tasks_registry
from .tasks.sizes import RELEASED_SIZES

HUB_URL = "https://huggingface.co"

# The task lists below are read from the task registry (core/tasks: one module per task declares its label, run
# order, released sizes, ...), so a task is added in its own module; these names keep the catalogue's API. They are
# the built-in tasks; a plug-in task loaded later is known to the functions below through the registry.
TASKS: tuple[str, ...] = tasks_registry.names()
# The order a multi-task run executes them: seg first (pose takes its person boxes from it, the dense layers their
# mask), then pose, then the dense tasks; matting last, after the other dense tasks (`Task.run_rank`).
RUN_ORDER: tuple[str, ...] = tasks_registry.run_order()
PRETRAIN = "pretrain"
ALL_TASKS: tuple[str, ...] = (PRETRAIN, *TASKS)
DEFAULT_TASKS: tuple[str, ...] = tuple(t.name for t in tasks_registry.all_tasks() if t.default_in_cli)

SIZES: tuple[str, ...] = ("0.1b", "0.4b", "0.8b", "1b", "1b-4k", "5b")
TASK_SIZES_RELEASED: tuple[str, ...] = RELEASED_SIZES
DEFAULT_SIZE = "0.4b"

# Sizes with public weights, per task (facebookresearch/sapiens2 docs/MODEL_ZOO.md; `Task.released`). No albedo
# weights are public yet (GitHub issue #1), and there are no 0.1B or 4K task heads. Matting came later and only at
# 1B (facebook/sapiens2-matting-1b); other sizes load when they appear (the loader reads the architecture from
# shapes).
RELEASED: dict[str, tuple[str, ...]] = {
    PRETRAIN: SIZES,
    **{t.name: tuple(t.released) for t in tasks_registry.all_tasks()},
}

TASK_LABELS: dict[str, str] = {
    **{t.name: t.label for t in tasks_registry.all_tasks()},
    PRETRAIN: "pretrained backbone (no task head)",
}

# Why a task has no download (shown instead of a URL).
UNRELEASED_REASON: dict[str, str] = {
    t.name: t.unreleased_reason for t in tasks_registry.all_tasks() if t.unreleased_reason
}


def _released(task: str) -> tuple[str, ...]:
    """Sizes with official files of `task` (the registry's, so plug-ins loaded later count: none)."""
    if task == PRETRAIN:
        return SIZES
    return tuple(tasks_registry.get(task).released) if tasks_registry.has(task) else ()


class CatalogueError(Sapiens2Error, ValueError):
    """A task or size name that the catalogue does not know, or a file that was never released."""


@dataclass(frozen=True)
class OfficialFile:
    """One official checkpoint: task, size, Hub repository and file name."""

    task: str
    size: str
    repo_id: str
    filename: str

    @property
    def url(self) -> str:
        return f"{HUB_URL}/{self.repo_id}/resolve/main/{self.filename}"

    @property
    def page(self) -> str:
        return f"{HUB_URL}/{self.repo_id}"


def check_task(task: str, *, allow_pretrain: bool = True) -> str:
    """`task` if the catalogue knows it; a CatalogueError listing the choices otherwise."""
    choices = (PRETRAIN, *tasks_registry.names()) if allow_pretrain else tasks_registry.names()
    if task not in choices:
        raise CatalogueError(f"unknown task {task!r}; choose one of {', '.join(choices)}")
    return task


def check_size(size: str) -> str:
    if size not in SIZES:
        raise CatalogueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    return size


def file_name(task: str, size: str) -> str:
    """The official file name of `task` at `size` (also for files not released yet, e.g. albedo)."""
    check_task(task)
    check_size(size)
    if task == PRETRAIN:
        return (
            "sapiens2_1b_4k_pretrain.safetensors"
            if size == "1b-4k"
            else f"sapiens2_{size}_pretrain.safetensors"
        )
    return f"sapiens2_{size}_{task}.safetensors"


def is_released(task: str, size: str) -> bool:
    return size in _released(task)


def official_file(task: str, size: str) -> OfficialFile:
    """The Hub location of `task` at `size`; CatalogueError (saying what exists) where nothing was released."""
    name = file_name(task, size)
    released = _released(task)
    if not released:
        reason = tasks_registry.get(task).unreleased_reason if tasks_registry.has(task) else None
        raise CatalogueError(reason or f"no {task} checkpoints are public")
    if size not in released:
        raise CatalogueError(
            f"there is no official {task} checkpoint of size {size}; {task} is released in sizes "
            f"{', '.join(released)}"
        )
    repo = f"facebook/sapiens2-pretrain-{size}" if task == PRETRAIN else f"facebook/sapiens2-{task}-{size}"
    return OfficialFile(task, size, repo, name)


_OFFICIAL_NAME = re.compile(r"^sapiens2_(?P<size>[0-9.]+b(?:_4k)?)_(?P<task>[a-z]+)\.safetensors$")


def parse_official_name(name: str) -> tuple[str, str] | None:
    """(task, size) for a file named like an official one (`sapiens2_1b_pose.safetensors`), else None."""
    match = _OFFICIAL_NAME.match(name.rsplit("/", 1)[-1])
    if not match:
        return None
    size = match.group("size").replace("_4k", "-4k")
    task = match.group("task")
    if task not in (PRETRAIN, *tasks_registry.names()) or size not in SIZES:
        return None
    return task, size


def task_file_hint(task: str) -> str:
    """'a pose file such as sapiens2_0.4b_pose.safetensors' — for messages that ask for a file of `task`."""
    if task == PRETRAIN:
        return f"a backbone file such as {file_name(PRETRAIN, DEFAULT_SIZE)}"
    label = (tasks_registry.get(task).noun or task) if tasks_registry.has(task) else task
    if not _released(task):
        return f"{'an' if label[0] in 'aeiou' else 'a'} {label} file (sapiens2_<size>_{task}.safetensors; not yet published by Meta)"
    return (
        f"{'an' if label[0] in 'aeiou' else 'a'} {label} file such as {file_name(task, default_size(task))}"
    )


def default_size(task: str) -> str:
    """The size offered first for `task`: DEFAULT_SIZE where it is released, else the task's first released size
    (matting exists only at 1B), else DEFAULT_SIZE."""
    released = _released(check_task(task))
    return DEFAULT_SIZE if DEFAULT_SIZE in released or not released else released[0]
