"""A predict job's spec (what to do, with the CLI's defaults, and the cheap checks of it) and its report.

Split from `job.py` so that the CLI's parser and the engines can name a job's options and outcome without the
runner; `job.py` re-exports both names."""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import catalogue
from ...formats.compressions import DEFAULT_EXR_COMPRESSION, EXR_COMPRESSIONS
from ...formats.mesh import MESH_FORMATS
from ...tasks import registry as tasks_registry
from ...timing import StageTime, add_stage
from ..compute.finite import NONFINITE_POLICIES
from ..engines import ENGINES, INSTALL_HINTS
from ..errors import EngineError, StudioError
from ..runtime.host import Host
from ..runtime.models import RUNTIMES
from ..store.remote import is_remote
from .pipelining import DEFAULT_WRITERS

ItemFn = Callable[[int, str], Any]  # (items done now, label) after each written image

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


@dataclass
class JobSpec:
    """Everything a predict job needs; the defaults are the CLI's.

    size: the official size of every task's checkpoint; None (the default) gives each task its own
    `catalogue.default_size` (0.4b, and 1b for matting, which exists only at 1b), so adding matting to the
    tasks never needs a size. checkpoints: task → file overriding the official file; batch_size: images per
    forward pass, or "auto" (as many as fit in free GPU memory). skip_existing: keep verified frames and tasks,
    do the rest (resume); clean: a frame holds only this run's tasks (otherwise tasks not run now are carried
    over), and results whose input is gone are removed (otherwise kept and reported: orphans.py).
    exr_compression: the bundle EXRs' (`bundle.EXR_COMPRESSIONS`: zip, zips or none, all lossless).
    nonfinite: "warn" (note and store NaN as invalid) or "error" (refuse such frames). run_id: the run's
    id (e.g. a render-farm job's, shared by its chunks); new when None. writers: frames written concurrently
    on writer threads while the models run on the next ones (and a video's next frames are decoded ahead);
    0 = all on one thread. frames: (first, last) frame numbers of the sequences to do now (a video's from 1), a
    render-farm chunk (a video decodes only that range, `video.py`): its frames are committed with their
    temporal pass pending and no index, for `finalize` once every chunk is done (needs `run_id`). engine:
    "local" (this process) or "ray" (`engines/ray_engine.py`: `ray_address` None starts Ray here, else joins
    that cluster; `workers` model actors with `gpus_per_worker` GPUs each).
    out: a folder, or a filesystem URL (`s3://bucket/shot`, any fsspec protocol: `remote.py`) whose outputs are
    staged in the folder `staging` (default: one per URL under ~/.cache/sapiens2/staging) and published there;
    `storage_options`: the fsspec filesystem's own options (endpoint, credentials), else its environment.
    """

    inputs: list[str | os.PathLike]
    out: str | os.PathLike
    tasks: tuple[str, ...] = catalogue.DEFAULT_TASKS
    size: str | None = None
    checkpoints: dict[str, str | os.PathLike] = field(default_factory=dict)
    checkpoint_dir: str | os.PathLike | None = None
    allow_download: bool = True
    device: str = "auto"
    dtype: str = "auto"
    attention: str = "auto"
    compile: bool = False
    runtime: str = "torch"  # or "onnxruntime": the forward pass on an exported file (docs/deploy.md)
    batch_size: int | str = 1
    flip_test: bool = True
    boxes_file: str | os.PathLike | None = None
    smooth: bool = False
    fps: float | None = None
    previews: bool = True
    mesh: str | None = None
    exr_compression: str = DEFAULT_EXR_COMPRESSION
    skip_existing: bool = False
    clean: bool = False
    nonfinite: str = "warn"
    run_id: str | None = None
    writers: int = DEFAULT_WRITERS
    frames: tuple[int, int] | None = None
    engine: str = "local"
    ray_address: str | None = None
    workers: int | None = None
    gpus_per_worker: float | None = None
    staging: str | os.PathLike | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)
    shot_frames: tuple[int, int] | None = None  # a farm shot: every frame (FIRST-LAST); else planned once
    take_over: bool = False  # a chunk may replace a shot planned by another run id
    space_check: bool = True  # refuse before any model loads when the estimate exceeds the free space

    def size_for(self, task: str) -> str:
        """The official size used for `task`: the forced `size`, else the task's default size."""
        return self.size or catalogue.default_size(task)

    def validate(self) -> None:
        """Cheap checks of the spec itself, before anything is read or loaded."""
        if not self.tasks:
            raise StudioError(
                "no tasks given; choose from " + ", ".join(catalogue.TASKS), hints={"cli": "see --tasks"}
            )
        from ...tasks import registry

        for task in self.tasks:
            if task not in catalogue.TASKS and not registry.has(task):  # built-ins, and plug-ins once trusted
                registry.get(task)  # an untrusted plug-in: the refusal that says how to trust it
                raise StudioError(
                    f"unknown task {task!r}; choose from {', '.join(catalogue.TASKS)}",
                    hints={"cli": "see --tasks"},
                )
        unused = sorted(set(self.checkpoints) - set(self.tasks))
        if unused:
            raise StudioError(
                f"a checkpoint is given for {', '.join(unused)}, which is not among the tasks {','.join(self.tasks)}"
            )
        if self.mesh is not None:
            if self.mesh not in MESH_FORMATS:
                raise StudioError(
                    f"unknown mesh format {self.mesh!r}; choose one of {', '.join(MESH_FORMATS)}"
                )
            # the tasks whose data a mesh is made of
            meshed = [t.name for t in tasks_registry.all_tasks() if t.mesh]
            if not any(t in meshed for t in self.tasks):
                raise StudioError(f"a mesh needs the {meshed[0]} task; add {meshed[0]} to the tasks")
        if self.runtime not in RUNTIMES:
            raise StudioError(
                f"unknown runtime {self.runtime!r}; choose one of {', '.join(RUNTIMES)}",
                hints={"cli": "see --runtime"},
            )
        if self.exr_compression not in EXR_COMPRESSIONS:
            raise StudioError(
                f"unknown EXR compression {self.exr_compression!r}; choose one of {', '.join(EXR_COMPRESSIONS)}",
                hints={"cli": "see --exr-compression"},
            )
        if self.batch_size != "auto" and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise StudioError(f"the batch size must be at least 1 (or 'auto'), got {self.batch_size!r}")
        if self.fps is not None and not self.fps > 0:
            raise StudioError(f"the frame rate must be positive, got {self.fps}")
        if self.nonfinite not in NONFINITE_POLICIES:
            raise StudioError(
                f"nonfinite must be one of {', '.join(NONFINITE_POLICIES)}, got {self.nonfinite!r}"
            )
        if self.frames is not None:
            first, last = self.frames
            if first < 0 or last < first:
                raise StudioError(
                    f"the frame range {first}-{last} is empty; give FIRST-LAST with FIRST ≤ LAST",
                    hints={"cli": "e.g. --frames 1001-1100"},
                )
            if self.run_id is None:
                raise StudioError(
                    "a frame range (a render-farm chunk) needs the run id its job's chunks share, so that "
                    "finalize can join their frames into one sequence",
                    hints={"cli": "add --run-id JOBID (the same for every chunk of the shot)"},
                )
        if self.engine not in ENGINES:
            raise StudioError(f"unknown engine {self.engine!r}; choose one of {', '.join(ENGINES)}")
        if self.engine != "ray" and (
            self.ray_address is not None or self.workers is not None or self.gpus_per_worker is not None
        ):
            raise StudioError(
                "Ray address, workers and GPUs per worker only apply to the Ray engine",
                hints={"cli": "add --engine ray"},
            )
        if self.engine == "ray" and importlib.util.find_spec("ray") is None:
            raise EngineError("the Ray engine needs Ray, which is not installed", hints=INSTALL_HINTS)
        if self.engine == "ray" and self.frames is not None:
            raise StudioError(
                "a frame range is a render-farm chunk of the local engine; the Ray engine splits the frames "
                "across its workers itself",
                hints={"cli": "drop --frames (Ray does every frame) or drop --engine ray (one chunk here)"},
            )
        if self.workers is not None and self.workers < 1:
            raise StudioError(f"the number of workers must be at least 1, got {self.workers}")
        if self.gpus_per_worker is not None and not self.gpus_per_worker >= 0:
            raise StudioError(f"GPUs per worker must be 0 or more, got {self.gpus_per_worker}")
        if self.run_id is not None and not _RUN_ID.match(self.run_id):
            raise StudioError(
                f"run id {self.run_id!r}: use 1–80 letters, digits, '_', '-' or '.', starting with a letter or digit"
            )
        if not isinstance(self.writers, int) or self.writers < 0:
            raise StudioError(f"the number of writers must be 0 or more, got {self.writers!r}")
        if (self.shot_frames is not None or self.take_over) and self.frames is None:
            raise StudioError(
                "a shot's frame list and taking a shot over apply to a render-farm chunk only",
                hints={"cli": "add --frames FIRST-LAST (and --run-id), or drop --shot-frames/--take-over"},
            )
        if self.shot_frames is not None and not (
            self.shot_frames[0] <= self.frames[0] <= self.frames[1] <= self.shot_frames[1]  # type: ignore[index]
        ):
            raise StudioError(
                f"the chunk's frames {self.frames[0]}-{self.frames[1]} lie outside the shot's "  # type: ignore[index]
                f"{self.shot_frames[0]}-{self.shot_frames[1]}"
            )
        if (self.staging is not None or self.storage_options) and not is_remote(self.out):
            raise StudioError(
                f"a staging folder and storage options only apply to an output URL (s3://…), not {self.out}",
                hints={"cli": "drop --staging, or give --out as a URL"},
            )


@dataclass
class JobReport:
    """What a job did: results written, verified results kept, inputs that failed (with reasons), notes."""

    out: Path
    written: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)  # frames computed again after a worker died, with why
    notes: list[str] = field(default_factory=list)
    run_id: str = ""
    published: str | None = None  # the URL the outputs were published to (`out` is then the staging folder)
    orphaned: list[str] = field(default_factory=list)  # kept although their input is gone (orphans.py)
    removed: list[str] = field(default_factory=list)  # orphaned results removed because `clean` asked for it
    # the run record's per-stage totals: stage name → exclusive wall and CPU seconds and calls (`core/timing.py`)
    stages: dict[str, StageTime] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures


def record_stage(report: JobReport, host: Host, name: str, wall: float, cpu: float) -> None:
    """The job's stage listener (`timing.listening`): the run record keeps the totals, the host hears each stage."""
    add_stage(report.stages, name, wall, cpu)
    host.stage_done(name, wall, cpu)
