"""The one catalogue of Sapiens2 sizes, tasks and official checkpoint files.

Every list of tasks or sizes the project shows (CLI choices, ComfyUI combos, download tables, error advice) and
every official file name or Hub URL comes from here, so adding a task or a released size is a one-line change.
Loading never uses it: the architecture and task of a file are read from its tensor shapes
(`core.checkpoints.infer`), so custom and future files load whatever they are called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import Sapiens2Error

HUB_URL = "https://huggingface.co"

# Tasks with a prediction head, in the order users see them listed.
TASKS: tuple[str, ...] = ("pose", "seg", "normal", "albedo", "pointmap", "matting")
# The order a multi-task run executes them: seg first (pose takes its person boxes from it, the dense layers their
# mask), then pose, then the dense tasks; matting last, after the other dense tasks.
RUN_ORDER: tuple[str, ...] = ("seg", "pose", "normal", "albedo", "pointmap", "matting")
PRETRAIN = "pretrain"
ALL_TASKS: tuple[str, ...] = (PRETRAIN, *TASKS)
DEFAULT_TASKS: tuple[str, ...] = ("pose", "seg", "normal", "pointmap")

SIZES: tuple[str, ...] = ("0.1b", "0.4b", "0.8b", "1b", "1b-4k", "5b")
TASK_SIZES_RELEASED: tuple[str, ...] = ("0.4b", "0.8b", "1b", "5b")
DEFAULT_SIZE = "0.4b"

# Sizes with public weights, per task (facebookresearch/sapiens2 docs/MODEL_ZOO.md). No albedo weights are public
# yet (GitHub issue #1), and there are no 0.1B or 4K task heads. Matting came later and only at 1B
# (facebook/sapiens2-matting-1b); other sizes load when they appear (the loader reads the architecture from shapes).
RELEASED: dict[str, tuple[str, ...]] = {
    PRETRAIN: SIZES,
    "pose": TASK_SIZES_RELEASED,
    "seg": TASK_SIZES_RELEASED,
    "normal": TASK_SIZES_RELEASED,
    "pointmap": TASK_SIZES_RELEASED,
    "albedo": (),
    "matting": ("1b",),
}

TASK_LABELS: dict[str, str] = {
    "pose": "pose (308 keypoints)",
    "seg": "segmentation (29 body parts)",
    "normal": "surface normals",
    "albedo": "albedo",
    "pointmap": "pointmap / depth",
    "matting": "matting (soft alpha + foreground)",
    PRETRAIN: "pretrained backbone (no task head)",
}

# Why a task has no download (shown instead of a URL).
UNRELEASED_REASON: dict[str, str] = {
    "albedo": "no albedo checkpoints are public yet (facebookresearch/sapiens2 issue #1)",
}


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
    choices = ALL_TASKS if allow_pretrain else TASKS
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
    return size in RELEASED.get(task, ())


def official_file(task: str, size: str) -> OfficialFile:
    """The Hub location of `task` at `size`; CatalogueError (saying what exists) where nothing was released."""
    name = file_name(task, size)
    if not RELEASED.get(task):
        raise CatalogueError(UNRELEASED_REASON.get(task, f"no {task} checkpoints are public"))
    if not is_released(task, size):
        raise CatalogueError(
            f"there is no official {task} checkpoint of size {size}; {task} is released in sizes "
            f"{', '.join(RELEASED[task])}"
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
    if task not in ALL_TASKS or size not in SIZES:
        return None
    return task, size


def task_file_hint(task: str) -> str:
    """'a pose file such as sapiens2_0.4b_pose.safetensors' — for messages that ask for a file of `task`."""
    if task == PRETRAIN:
        return f"a backbone file such as {file_name(PRETRAIN, DEFAULT_SIZE)}"
    label = "segmentation" if task == "seg" else task
    if not RELEASED.get(task):
        return f"{'an' if label[0] in 'aeiou' else 'a'} {label} file (sapiens2_<size>_{task}.safetensors; not yet published by Meta)"
    return (
        f"{'an' if label[0] in 'aeiou' else 'a'} {label} file such as {file_name(task, default_size(task))}"
    )


def default_size(task: str) -> str:
    """The size offered first for `task`: DEFAULT_SIZE where it is released, else the task's first released size
    (matting exists only at 1B), else DEFAULT_SIZE."""
    released = RELEASED.get(check_task(task), ())
    return DEFAULT_SIZE if DEFAULT_SIZE in released or not released else released[0]
