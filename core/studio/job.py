"""A predict job: input paths → models → capture bundles, previews and keypoint JSON in an output folder.

This is the CLI's main job as a Python call (the CLI only parses arguments and prints), and the unit a
distributed engine splits. Order of work: validate everything cheap first (tasks, inputs, boxes file, checkpoints,
the output folder and its free space) so that a typo or a full disk fails in a second, not after a 5B model has
loaded; then take the output folder's lock, plan each frame against what earlier runs left (`resume.py`), load
only the models some frame needs, and stream images through the tasks in chunks. Every frame is committed as one
transaction (`transaction.py`); a sequence's index is written only over one run's complete frames, and an
unfinished sequence carries a `<name>.partial.json` marker instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .. import catalogue
from ..checkpoints import hub
from ..checkpoints.loader import refuse_size_contradiction
from ..formats.bundle import CaptureFrame
from ..formats.compressions import DEFAULT_EXR_COMPRESSION, EXR_COMPRESSIONS
from ..formats.documents import load_json
from ..formats.errors import BundleError
from ..formats.exr import require_openexr
from ..formats.mesh import MESH_FORMATS
from ..formats.sequence import SequenceWriter
from ..tasks import registry as tasks_registry
from ..timing import StageTime, add_stage, in_context, listening, stage
from .boxes import BoxesFile, boxes_for, read_boxes_file
from .engines import ENGINES, INSTALL_HINTS
from .errors import EngineError, InputError, NonFiniteOutputError, StudioError
from .finite import NONFINITE_POLICIES
from .host import Host
from .inputs import ImageJob, SequenceJob, collect_inputs, load_image
from .lock import lock_output
from .models import RUNTIMES, LoadedModel, ModelCache, check_checkpoint
from .orphans import remove_orphans
from .outputs import remove_stale_frames, stale_frames
from .pipelining import DEFAULT_WRITERS, OrderedWriter, prefetch
from .preflight import OutputCheck, check_output_folder
from .remote import RemoteOutput, is_remote, local_path
from .resume import (
    RunInfo,
    ShotError,
    frame_ranges,
    image_source,
    partial_marker,
    plan_frame,
    relabelled,
    sequence_run,
    shot_numbers,
    video_source,
)
from .stages import FrameItem, commit_frame, compute_frames, job_expectation, temporal_record
from .temporal import SequencePass
from .transaction import (
    clean_stale_temporaries,
    commit_document,
    output_error,
    pause_point,
    recover_commits,
    write_document,
)

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
        from ..tasks import registry

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


def resolve_checkpoints(spec: JobSpec) -> dict[str, Path]:
    """Task → checkpoint file: the given file first, else the official one (downloaded unless forbidden). Every
    missing file is reported at once."""
    paths: dict[str, Path] = {}
    problems: list[hub.HubError] = []
    for task in spec.tasks:
        if task in spec.checkpoints:
            path = Path(spec.checkpoints[task]).expanduser()
            if not path.is_file():
                raise InputError(f"checkpoint for {task} not found: {path}")
            paths[task] = path
            continue
        try:
            paths[task] = hub.ensure_checkpoint(
                task, spec.size_for(task), spec.checkpoint_dir, allow_download=spec.allow_download
            )
        except hub.HubError as exc:  # keep going: the user should learn about every missing file at once
            problems.append(_forced_size_advice(exc, task, spec.size))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        first = problems[0]
        raise hub.HubError(
            f"{len(problems)} checkpoints are missing:\n  " + "\n  ".join(p.message for p in problems),
            hints={k: v.replace(f"{first_task(first)}=", "TASK=") for k, v in first.hints.items()},
        )
    if spec.size is not None:  # an asked size must be that size: an official file of another is refused
        for task, path in paths.items():
            if task not in spec.checkpoints:
                refuse_size_contradiction(path, spec.size)
    return paths


def _forced_size_advice(error: hub.HubError, task: str, size: str | None) -> hub.HubError:
    """A forced size at which `task` was never released: say how to get the task's own size instead."""
    released = catalogue.RELEASED.get(task, ())
    if size is None or not released or size in released:
        return error
    return hub.HubError(
        error.message,
        hints={
            "cli": f"leave out --size (each task then uses its own default: {task} "
            f"{catalogue.default_size(task)}) or pass --checkpoint {task}=PATH",
            "python": f"leave size=None (each task then uses its own default size) or give a {task} checkpoint",
        },
    )


def first_task(error: hub.HubError) -> str:
    """The task a download error's CLI hint names (`--checkpoint seg=PATH` → 'seg')."""
    hint = error.hints.get("cli", "")
    return hint.split("--checkpoint ", 1)[-1].split("=", 1)[0] if "--checkpoint " in hint else ""


def load_models(
    spec: JobSpec, paths: dict[str, Path], cache: ModelCache | None = None
) -> dict[str, LoadedModel]:
    """Each task's model under the one execution rule, in run order."""
    cache = cache if cache is not None else ModelCache()  # an empty cache is falsy (__len__)
    return {
        task: cache.get(
            paths[task],
            task=task,
            device=spec.device,
            dtype=spec.dtype,
            attention=spec.attention,
            compile=spec.compile,
            runtime=spec.runtime,
            hash_cache_dir=spec.checkpoint_dir,
        )
        for task in tasks_registry.run_order()
        if task in paths
    }


def auto_batch_size(models: dict[str, LoadedModel]) -> int:
    """The smallest batch that every loaded model fits in free GPU memory (1 on CPU)."""
    from ..arch.batching import auto_batch_size as measure

    sizes = [measure(m.model) for m in models.values()]
    return min(sizes) if sizes else 1


@dataclass
class Member:
    """A predict job run as one work unit of a distributed run (`engines/`): it joins the run's shared lock and
    leaves recovery, the temporal pass and the indexes to the driver. `run`: the run its frames carry; `cache`:
    the worker's models, kept across units (weights load once per worker); `retry`: the unit runs again after
    its worker died, so frames this run already committed count as done (verified) and are not written twice,
    while frames of other runs are treated as in the first attempt."""

    run: RunInfo
    cache: ModelCache
    retry: bool = False


class PredictJob:
    """Runs a JobSpec on one machine (the local engine); with `member`, one work unit of a distributed run."""

    def __init__(
        self,
        spec: JobSpec,
        *,
        host: Host | None = None,
        on_item: ItemFn | None = None,
        member: Member | None = None,
    ) -> None:
        spec.validate()
        self.spec = spec
        self.host = host or Host()
        self.on_item = on_item
        self.remote = (
            RemoteOutput(os.fspath(spec.out), spec.staging, spec.storage_options)
            if is_remote(spec.out)
            else None
        )
        self.out = self.remote.staging if self.remote is not None else local_path(spec.out)
        self.member = member
        self.run_info = member.run if member is not None else RunInfo.new(spec.run_id)
        self.report = JobReport(self.out, run_id=self.run_info.id)
        self.models: dict[str, LoadedModel] = {}
        self.cache = member.cache if member is not None else ModelCache()
        self.batch = 1 if spec.batch_size == "auto" else int(spec.batch_size)
        self.tasks = tuple(t for t in tasks_registry.run_order() if t in spec.tasks)
        self._created: list[Path] = []  # folders this run made (removed again if it commits nothing there)
        self._shas: dict[str, str | None] = {}

    # ------------------------------------------------------------------------------------------------ set-up

    def prepare(self) -> int | None:
        """Everything cheap, before any model loads: inputs, boxes file, checkpoints (header only: task and keys),
        the output folder and its free space. Returns the number of images to process when known in advance (a
        video's frame count is not)."""
        require_openexr()  # bundles need it
        self.jobs = collect_inputs([str(p) for p in self.spec.inputs])
        self.boxes: BoxesFile | None = read_boxes_file(self.spec.boxes_file)
        self.paths = resolve_checkpoints(self.spec)
        for task, path in self.paths.items():  # wrong task or a damaged file: fail before any folder work
            check_checkpoint(path, task=task, runtime=self.spec.runtime)
        if self.remote is not None:
            self.remote.check()  # reachable, before the staging folder is looked at
        self.check: OutputCheck = check_output_folder(
            self.out,
            self.jobs,
            self.tasks,
            previews=self.spec.previews,
            mesh=self.spec.mesh,
            compression=self.spec.exr_compression,
            space_check=self.spec.space_check,
        )
        self.report.orphaned = [f"{o.label} ({o.why})" for o in self.check.orphans]
        if any(isinstance(j, SequenceJob) and j.video is not None for j in self.jobs):
            return None
        return sum(1 if isinstance(j, ImageJob) else len(j.frames) for j in self.jobs)

    def prepare_unit(self, jobs: list[ImageJob | SequenceJob]) -> None:
        """A work unit's set-up: the driver collected and checked the inputs and the output folder already;
        the checkpoints are the driver's resolved files (`spec.checkpoints`)."""
        require_openexr()
        self.jobs = jobs
        self.boxes = read_boxes_file(self.spec.boxes_file)
        self.paths = resolve_checkpoints(self.spec)

    @property
    def _trusted_run(self) -> str | None:
        """The run whose committed frames a retried unit takes as done (`Member.retry`)."""
        return self.run_info.id if self.member is not None and self.member.retry else None

    def run(self) -> JobReport:
        """Run the job here; every stage it runs is timed into `report.stages` and told to the host."""
        with listening(self._stage_done, synchronize=self.host.stage_sync()), stage("job.other"):
            return self._run()

    def _stage_done(self, name: str, wall: float, cpu: float) -> None:
        add_stage(self.report.stages, name, wall, cpu)
        self.host.stage_done(name, wall, cpu)

    def _run(self) -> JobReport:
        if not hasattr(self, "jobs"):
            self.prepare()
        if self.spec.engine != "local" and self.member is None:
            raise StudioError(
                f"PredictJob.run is the local engine; a job for the {self.spec.engine} engine runs through "
                "run_job(spec) or engines.dispatch.run_prepared(job)"
            )
        self._make_folder(self.out)
        lock = None
        try:
            # a farm chunk or a distributed run's unit: other writers of the run may write beside it
            shared = self.spec.frames is not None or self.member is not None
            lock = lock_output(self.out, self.run_info.id, self.host, shared=shared)
            pause_point("locked")
            if not shared:
                recover_left_overs(self.out, self.host)
            if self.spec.clean and self.member is None and getattr(self, "check", None) is not None:
                remove_orphans(self.check.orphans)  # asked for: the only way results of a missing input go
                self.report.removed, self.report.orphaned = self.report.orphaned, []
            if self.spec.skip_existing or self._trusted_run:
                self._shas = {t: hub.file_sha256(p, self.spec.checkpoint_dir) for t, p in self.paths.items()}
            with OrderedWriter(self.spec.writers) as self._writers:  # see pipelining.py
                self._run_images([j for j in self.jobs if isinstance(j, ImageJob)])
                for sequence in (j for j in self.jobs if isinstance(j, SequenceJob)):
                    count, error = self._run_sequence(sequence)
                    if error is not None:  # a broken frame stops its sequence (no index), not the whole batch
                        marker = self.out / sequence.name / f"{sequence.name}.partial.json"
                        state = "no index, marked partial" if marker.exists() else "nothing changed there"
                        self.report.failures.append(
                            f"{error.message} (sequence {sequence.name!r} stopped after {count} frame(s); {state})"
                        )
        finally:
            if lock is not None:
                lock.release()
            self._remove_unused_folders()
            self.report.notes = list(dict.fromkeys(self.host.notes))
        return self.report

    def _make_folder(self, folder: Path) -> None:
        if folder.is_dir():
            return
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            return
        except OSError as exc:
            raise output_error(exc, folder) from None
        self._created.append(folder)

    def _remove_unused_folders(self) -> None:
        for folder in reversed(self._created):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only succeeds when empty: nothing of this run (or anyone else's) is there

    def _ensure_models(self, tasks: Iterable[str]) -> dict[str, LoadedModel]:
        """The models of `tasks`, loading those not loaded yet (a resumed run may need none at all)."""
        missing = {t: self.paths[t] for t in tasks if t not in self.models}
        if missing:
            with stage("load"):
                self.models.update(load_models(self.spec, missing, self.cache))
            for task in missing:  # a file that is not the size its official name promises: say so, once
                if self.models[task].extra.get("warning"):
                    self.host.note(self.models[task].extra["warning"])
            self.host.device = next(iter(self.models.values())).plan.device
            if self.spec.batch_size == "auto":
                self.batch = auto_batch_size(self.models)
        return {t: self.models[t] for t in tasks_registry.run_order() if t in tasks}

    def _item_done(self, label: str) -> None:
        if self.on_item is not None:
            self.on_item(1, label)

    def _expectation(self, source: dict[str, Any], boxes: Any, *, sequence: bool) -> Any:
        return job_expectation(
            self.spec, self.tasks, self._shas, source, boxes, sequence=sequence, trusted_run=self._trusted_run
        )

    def _kept(self, plan: Any) -> None:
        """Count a frame not written now: kept from an earlier run, or committed by this run's worker that died
        (a retried unit), which this run did write."""
        committed_by = ((plan.doc or {}).get("run") or {}).get("id")
        if self._trusted_run is not None and committed_by == self._trusted_run:
            self.report.written += 1
        else:
            self.report.skipped += 1

    # ------------------------------------------------------------------------------------------------ frames

    def _frames(self, items: list[FrameItem]) -> tuple[list[CaptureFrame], dict[int, NonFiniteOutputError]]:
        """The per-frame stage of a chunk (stages.compute_frames): raw canonical frames, refused ones apart."""
        return compute_frames(items, self.spec, self.host, self._ensure_models)

    def _commit(
        self,
        item: FrameItem,
        frame: CaptureFrame,
        run: RunInfo,
        done: Callable[[], Any] | None = None,
        temporal: dict[str, Any] | None = None,
    ) -> None:
        """One frame's transaction: sidecars and EXR staged, JSON last (stages.commit_frame). It runs on a
        writer thread when `writers` > 0 while the models go on; `done()` follows on this thread, in frame
        order (pipelining.OrderedWriter), so what records a frame only sees committed ones."""
        self._make_folder(item.folder)
        work = in_context(partial(commit_frame, item, frame, run, self.spec, temporal=temporal))

        def committed(_: Any) -> None:
            self.report.written += 1
            if done is not None:
                done()

        self._writers.submit(work, committed)

    # ------------------------------------------------------------------------------------------------ images

    def _run_images(self, jobs: list[ImageJob]) -> None:
        """Single images in input order; consecutive images that need the same tasks share a chunk."""
        chunk: list[FrameItem] = []

        def flush() -> None:
            if not chunk:
                return
            frames, refused = self._frames(chunk)
            for index, (item, frame) in enumerate(zip(chunk, frames)):
                if index in refused:
                    self.report.failures.append(refused[index].message)
                    self._item_done(item.label)
                else:
                    self._commit(item, frame, self.run_info, partial(self._item_done, item.label))
            chunk.clear()

        for job in jobs:
            try:
                source = image_source(job.path)
                boxes = boxes_for(self.boxes, job.path.name)
                plan = plan_frame(self.out, job.name, self._expectation(source, boxes, sequence=False))
                if plan.action != "write":
                    self._kept(plan)
                    self._item_done(job.name)
                    continue
                with stage("decode"):
                    image = load_image(job.path)
                size = (int(image.shape[1]), int(image.shape[0]))
                boxes = boxes_for(self.boxes, job.path.name, size=size)
            except (InputError, OSError) as exc:
                self.report.failures.append(
                    exc.message if isinstance(exc, InputError) else f"{job.path}: {exc}"
                )
                self._item_done(job.name)
                continue
            item = FrameItem(self.out, job.name, job.path.name, job.path.name, plan, source, image, boxes)
            if chunk and chunk[0].plan.compute != plan.compute:
                flush()
            chunk.append(item)
            if len(chunk) >= self.batch:
                flush()
        flush()

    # --------------------------------------------------------------------------------------------- sequences

    def _sequence_sources(
        self, sequence: SequenceJob
    ) -> Iterator[tuple[int, str, Callable[[], np.ndarray], Callable[[], dict]]]:
        """(frame number, source name, image loader, source identity) per frame; image files are hashed and
        decoded only when a frame needs them (a chunk passes over the frames outside its range), a video is
        decoded in order: all of it, or in a chunk only its range (from a keyframe before it, `video.py`)."""
        if sequence.video is None:
            numbers = sequence.frame_numbers() or []
            for path, number in zip(sequence.frames, numbers):
                yield number, path.name, (lambda p=path: load_image(p)), (lambda p=path: _file_source(p))
            return
        ahead = self.batch if self.spec.writers else 0  # decode the next chunk while the models run
        video, frames = sequence.video, sequence.video_frames(*(self.spec.frames or (None, None)))
        for number, image in prefetch(frames, ahead):
            yield number, video.name, (lambda im=image: im), partial(video_source, video, number)

    def _run_sequence(self, sequence: SequenceJob) -> tuple[int, StudioError | None]:
        """A sequence frame by frame, in order; the index is written only when every frame is committed, over
        frames that all carry this sequence's run (`sequence_run`). Each computed frame goes through the temporal
        pass (`SequencePass`) right before its commit; in a chunk (`spec.frames`) it is committed with the pass
        pending instead, and `finalize` writes the index.

        Returns (frames done, the error that stopped the sequence or None)."""
        try:
            sequence.probe()  # a video's frame rate, before the writer and smoother use it
            if self.spec.frames is not None and sequence.video is not None:
                sequence.video_index()  # a chunk's marker lists every frame of the video (finalize checks them)
        except InputError as exc:
            return 0, exc
        folder = self.out / sequence.name
        shot: list[int] | None = None
        if self.spec.frames is not None:  # a farm chunk: the shot's frame list, fixed when first planned
            try:
                shot = shot_numbers(
                    folder,
                    sequence.name,
                    self.run_info.id,
                    sequence.frame_numbers(),
                    explicit=self.spec.shot_frames,
                    take_over=self.spec.take_over,
                )
            except InputError as exc:
                return 0, exc
        # An explicit run id (a farm job's) wins; otherwise a resume continues the run it finds there.
        adopt = self.spec.skip_existing and self.spec.run_id is None
        run = sequence_run(folder, sequence.name, self.run_info, skip_existing=adopt)
        fps = self.spec.fps or sequence.fps
        writer = SequenceWriter(folder, sequence.name, fps, run=run.record())
        temporal = SequencePass(fps, smooth=self.spec.smooth)  # track ids always; smoothing on request
        deferred = self.spec.frames is not None
        index_path = folder / f"{sequence.name}.sequence.json"
        marker = folder / f"{sequence.name}.partial.json"
        state: dict[str, Any] = {"started": False, "done": 0}  # marker written / frames committed or verified
        numbers: set[int] = set()
        buffer: list[FrameItem] = []

        def begin() -> None:
            """Before the first change in the folder: mark the sequence partial, then drop its old index."""
            if state["started"]:
                return
            self._make_folder(folder)
            expected = shot if deferred else None
            if expected is not None:
                frames: int | None = len(expected)
            else:  # a whole video: its count is not needed (nor read) to decode it in order
                frames = None if sequence.video is not None else len(sequence.frames)
            doc = partial_marker(sequence.name, run, self.tasks, frames, numbers=expected, fps=fps)
            write_document(marker, doc)
            with contextlib.suppress(FileNotFoundError):
                index_path.unlink()
            state["started"] = True

        def flush() -> None:
            if not buffer:
                return
            frames, refused = self._frames(buffer)
            begin()  # only now: until the first commit the previous complete state stays as it was
            for index, (item, frame) in enumerate(zip(buffer, frames)):
                if index in refused:
                    raise refused[index]  # a refused frame stops its sequence, like an unreadable one
                if deferred:
                    record = temporal_record(self.spec, fps, item.plan)
                else:
                    with stage("temporal"):  # in frame order, before the commit
                        record = temporal.computed(frame, item.plan.compute)

                def recorded(item: FrameItem = item) -> None:
                    writer.record(item.number, f"{item.name}.json")
                    self._item_done(item.label)
                    state["done"] += 1

                self._commit(item, frame, run, recorded, record)
            buffer.clear()

        try:
            for number, source_name, load, source_of in self._sequence_sources(sequence):
                if deferred and number > self.spec.frames[1]:  # type: ignore[index]
                    break  # frames come in ascending order: the chunk is done
                numbers.add(number)
                if deferred and number < self.spec.frames[0]:  # type: ignore[index]
                    continue
                name = f"{sequence.name}_{number:04d}"
                label = f"{sequence.name} #{number}"
                source = source_of()
                boxes = boxes_for(self.boxes, source_name, number)
                expect = self._expectation(source, boxes, sequence=True)
                plan = plan_frame(folder, name, expect, run.id, accept_pending=deferred)
                if plan.action != "write":
                    flush()
                    self._writers.drain()  # the index records frames in order
                    if plan.action == "relabel":
                        begin()
                        commit_document(folder, name, relabelled(plan.doc or {}, run))
                    writer.record(number, f"{name}.json")
                    temporal.kept(plan.doc or {})  # replayed through the pass where it can be (temporal.py)
                    self._kept(plan)
                    self._item_done(label)
                    state["done"] += 1
                    continue
                with stage("decode"):
                    image = load()
                size = (int(image.shape[1]), int(image.shape[0]))
                boxes = boxes_for(self.boxes, source_name, number, size=size)
                if buffer and buffer[0].plan.compute != plan.compute:
                    flush()
                buffer.append(FrameItem(folder, name, label, source_name, plan, source, image, boxes, number))
                if len(buffer) >= self.batch:
                    flush()
            flush()
        except (InputError, NonFiniteOutputError) as exc:
            self._writers.drain()  # the frames before the broken one are complete: commit them
            return state["done"], exc
        self._writers.drain()
        count = state["done"]
        if count == 0:
            what = "no frames in the range" if deferred else "no frames could be read"
            if deferred and sequence.video is not None:
                what += f" (the video has frames 1-{sequence.video_index().count})"
            return 0, InputError(f"{sequence.video or sequence.name}: {what}")
        if deferred:
            begin()  # the chunk's frames are committed; finalize writes the index once every chunk is done
            first, last = self.spec.frames  # type: ignore[misc]
            unseen = [n for n in shot or [] if first <= n <= last and n not in numbers]
            if unseen:  # frames of the shot this machine cannot see: an error for them, not a shorter shot
                return count, ShotError(
                    f"{sequence.video or sequence.name}: {len(unseen)} frame(s) of the shot in this chunk's range "
                    f"are not among the inputs here: {frame_ranges(unseen)}; they stay pending and finalize refuses "
                    "until a chunk that sees them writes them"
                )
            return count, None
        # a video's length is known only now: frames past its end (a shorter take) are its orphans (a folder's
        # were found before the run: orphans.py)
        stale = stale_frames(folder, sequence.name, numbers) if sequence.video is not None else []
        if stale and not self.spec.clean:
            self.report.orphaned += [
                f"{folder.name}/{sequence.name}_{n:04d} (frame {n} is beyond the video's {len(numbers)} frames)"
                for n in stale
            ]
        unchanged = not state["started"] and _index_lists(index_path, run.id, numbers) and not marker.exists()
        if unchanged and not (stale and self.spec.clean):
            return count, None  # every frame verified under the index's own run: nothing to change
        begin()
        if self.spec.clean:  # frames whose input is gone stay (reported as orphaned) unless asked
            remove_stale_frames(folder, sequence.name, numbers)
            self.report.removed += [f"{folder.name}/{sequence.name}_{n:04d}" for n in stale]
        pause_point("index")
        writer.close()
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()
        return count, None


def _file_source(path: Path) -> dict[str, Any]:
    try:
        return image_source(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def recover_left_overs(out: Path, host: Host) -> None:
    """Under the exclusive lock: complete the commits killed runs left half done, remove their temporaries."""
    recovered = recover_commits(out)
    if recovered:
        host.note(f"completed {len(recovered)} frame commit(s) that an interrupted earlier run had started")
    removed = clean_stale_temporaries(out)
    if removed:
        host.note(f"removed {len(removed)} temporary file(s) left by an interrupted earlier run")


def _index_lists(index: Path, run_id: str, numbers: set[int]) -> bool:
    """True when `index` exists, names `run_id` and lists exactly the frames `numbers`."""
    try:
        doc = load_json(index, "sequence index")
    except BundleError:
        return False
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    listed = {e.get("frame") for e in doc.get("frames") or [] if isinstance(e, dict)}
    return run.get("id") == run_id and listed == numbers
