"""A predict job: input paths → models → capture bundles, previews and keypoint JSON in an output folder.

This is the CLI's main job as a Python call (the CLI only parses arguments and prints), and the unit a
distributed engine splits. Order of work: validate everything cheap first (tasks, inputs, boxes file, checkpoints)
so that a typo fails in a second, not after a 5B model has loaded; then load each model once and stream images
through the tasks in chunks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .. import catalogue
from ..checkpoints import hub
from ..formats.exr import require_openexr
from ..formats.sequence import SequenceWriter
from .boxes import BoxesFile, boxes_for, read_boxes_file
from .capture import capture_frames
from .errors import InputError, StudioError
from .host import Host
from .inputs import ImageJob, SequenceJob, collect_inputs, load_image
from .models import LoadedModel, ModelCache
from .outputs import remove_stale_frames, write_frame_outputs
from .pipelining import DEFAULT_WRITERS, OrderedWriter, prefetch
from .tasks import TaskOptions, run_tasks
from .temporal import SequenceSmoother

ItemFn = Callable[[int, str], Any]  # (items done now, label) after each written image
MESH_FORMATS = ("ply", "glb")


@dataclass
class JobSpec:
    """Everything a predict job needs; the defaults are the CLI's.

    checkpoints: task → file overriding the official file of `size`; batch_size: images per forward pass, or
    "auto" (as many as fit in free GPU memory). writers: frames written concurrently on writer threads while
    the models run on the next ones (and a sequence's next frames are decoded ahead); 0 = all on one thread.
    """

    inputs: list[str | os.PathLike]
    out: str | os.PathLike
    tasks: tuple[str, ...] = catalogue.DEFAULT_TASKS
    size: str = catalogue.DEFAULT_SIZE
    checkpoints: dict[str, str | os.PathLike] = field(default_factory=dict)
    checkpoint_dir: str | os.PathLike | None = None
    allow_download: bool = True
    device: str = "auto"
    dtype: str = "auto"
    attention: str = "auto"
    compile: bool = False
    batch_size: int | str = 1
    flip_test: bool = True
    boxes_file: str | os.PathLike | None = None
    smooth: bool = False
    fps: float | None = None
    previews: bool = True
    mesh: str | None = None
    writers: int = DEFAULT_WRITERS

    def validate(self) -> None:
        """Cheap checks of the spec itself, before anything is read or loaded."""
        if not self.tasks:
            raise StudioError(
                "no tasks given; choose from " + ", ".join(catalogue.TASKS), hints={"cli": "see --tasks"}
            )
        for task in self.tasks:
            if task not in catalogue.TASKS:
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
            if "pointmap" not in self.tasks:
                raise StudioError("a mesh needs the pointmap task; add pointmap to the tasks")
        if self.batch_size != "auto" and (not isinstance(self.batch_size, int) or self.batch_size < 1):
            raise StudioError(f"the batch size must be at least 1 (or 'auto'), got {self.batch_size!r}")
        if self.fps is not None and not self.fps > 0:
            raise StudioError(f"the frame rate must be positive, got {self.fps}")
        if not isinstance(self.writers, int) or self.writers < 0:
            raise StudioError(f"the number of writers must be 0 or more, got {self.writers!r}")


@dataclass
class JobReport:
    """What a job did: results written, inputs that failed (with reasons), notes for the user."""

    out: Path
    written: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

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
                task, spec.size, spec.checkpoint_dir, allow_download=spec.allow_download
            )
        except hub.HubError as exc:  # keep going: the user should learn about every missing file at once
            problems.append(exc)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        first = problems[0]
        raise hub.HubError(
            f"{len(problems)} checkpoints are missing:\n  " + "\n  ".join(p.message for p in problems),
            hints={k: v.replace(f"{first_task(first)}=", "TASK=") for k, v in first.hints.items()},
        )
    return paths


def first_task(error: hub.HubError) -> str:
    """The task a download error's CLI hint names (`--checkpoint seg=PATH` → 'seg')."""
    hint = error.hints.get("cli", "")
    return hint.split("--checkpoint ", 1)[-1].split("=", 1)[0] if "--checkpoint " in hint else ""


def load_models(
    spec: JobSpec, paths: dict[str, Path], cache: ModelCache | None = None
) -> dict[str, LoadedModel]:
    """Each task's model under the one execution rule, in run order."""
    cache = cache or ModelCache()
    return {
        task: cache.get(
            paths[task],
            task=task,
            device=spec.device,
            dtype=spec.dtype,
            attention=spec.attention,
            compile=spec.compile,
            hash_cache_dir=spec.checkpoint_dir,
        )
        for task in catalogue.RUN_ORDER
        if task in paths
    }


def auto_batch_size(models: dict[str, LoadedModel]) -> int:
    """The smallest batch that every loaded model fits in free GPU memory (1 on CPU)."""
    from ..arch.batching import auto_batch_size as measure

    sizes = [measure(m.model) for m in models.values()]
    return min(sizes) if sizes else 1


def _chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    return (items[i : i + size] for i in range(0, len(items), size))


class PredictJob:
    """Runs a JobSpec on one machine (the local engine)."""

    def __init__(self, spec: JobSpec, *, host: Host | None = None, on_item: ItemFn | None = None) -> None:
        spec.validate()
        self.spec = spec
        self.host = host or Host()
        self.on_item = on_item
        self.out = Path(spec.out).expanduser()
        self.report = JobReport(self.out)

    def prepare(self) -> int | None:
        """Everything cheap, before any model loads: inputs, boxes file, checkpoints. Returns the number of images
        to process when known in advance (a video's frame count is not)."""
        require_openexr()  # bundles need it
        self.jobs = collect_inputs([str(p) for p in self.spec.inputs])
        self.boxes: BoxesFile | None = read_boxes_file(self.spec.boxes_file)
        self.paths = resolve_checkpoints(self.spec)
        if any(isinstance(j, SequenceJob) and j.video is not None for j in self.jobs):
            return None
        return sum(1 if isinstance(j, ImageJob) else len(j.frames) for j in self.jobs)

    def run(self) -> JobReport:
        if not hasattr(self, "jobs"):
            self.prepare()
        self.models = load_models(self.spec, self.paths)
        self.host.device = next(iter(self.models.values())).plan.device
        self.batch = (
            auto_batch_size(self.models) if self.spec.batch_size == "auto" else int(self.spec.batch_size)
        )
        self.out.mkdir(parents=True, exist_ok=True)
        with OrderedWriter(self.spec.writers) as self._writers:  # throughput hook: see pipelining.py
            for chunk in _chunks([j for j in self.jobs if isinstance(j, ImageJob)], self.batch):
                self._run_images(chunk)
            for sequence in (j for j in self.jobs if isinstance(j, SequenceJob)):
                count, error = self._run_sequence(sequence)
                if error is not None:  # a broken frame stops its sequence (no index), not the whole batch
                    self.report.failures.append(
                        f"{error.message} (sequence {sequence.name!r} stopped after {count} frame(s); no index)"
                    )
        self.report.notes = list(dict.fromkeys(self.host.notes))
        return self.report

    def _write(
        self, folder: Path, name: str, frame: Any, image: np.ndarray, done: Callable[[Path], Any]
    ) -> None:
        """throughput hook: one frame's outputs (its transaction), on a writer thread when `writers` > 0;
        `done(bundle JSON path)` runs afterwards on this thread, in frame order (pipelining.OrderedWriter)."""
        work = partial(
            write_frame_outputs,
            folder,
            name,
            frame,
            image,
            with_previews=self.spec.previews,
            mesh_format=self.spec.mesh,
        )
        self._writers.submit(work, done)

    def _item_done(self, label: str) -> None:
        if self.on_item is not None:
            self.on_item(1, label)

    def _predict(
        self,
        images: list[np.ndarray],
        boxes: list[Any],
        names: list[str],
        smoother: SequenceSmoother | None = None,
    ):
        options = TaskOptions(
            chunk_size=len(images),
            flip_test=self.spec.flip_test,
            boxes=None if all(b is None for b in boxes) else boxes,
        )
        batches = run_tasks(self.models, images, self.host, options, labels=names)
        if smoother is not None:
            smoother.apply(batches)
        return capture_frames(images, batches, source_names=names, host=self.host)

    def _run_images(self, chunk: list[ImageJob]) -> None:
        loaded = []
        for job in chunk:
            try:
                image = load_image(job.path)
                size = (int(image.shape[1]), int(image.shape[0]))
                loaded.append((job, image, boxes_for(self.boxes, job.path.name, size=size)))
            except InputError as exc:
                self.report.failures.append(exc.message)
                self._item_done(job.name)
        if not loaded:
            return
        frames = self._predict(
            [image for _, image, _ in loaded],
            [b for _, _, b in loaded],
            [job.path.name for job, _, _ in loaded],
        )
        for (job, image, _), frame in zip(loaded, frames):
            # throughput hook: the frame's transaction may run on a writer thread; `done` follows in order here
            def done(_: Path, name: str = job.name) -> None:
                self.report.written += 1
                self._item_done(name)

            self._write(self.out, job.name, frame, image, done)

    def _run_sequence(self, sequence: SequenceJob) -> tuple[int, InputError | None]:
        """A sequence frame-chunk by frame-chunk; the index is written only when every frame succeeded.

        Returns (frames written, the input error that stopped the sequence or None)."""
        try:
            sequence.probe()  # a video's frame rate, before the writer and smoother use it
        except InputError as exc:
            return 0, exc
        folder = self.out / sequence.name
        fps = self.spec.fps or sequence.fps
        writer = SequenceWriter(folder, sequence.name, fps)
        smoother = SequenceSmoother(fps, smooth=self.spec.smooth)  # track ids always; smoothing on request
        numbering = sequence.frame_numbers()
        buffer: list[tuple[str, np.ndarray]] = []
        written: set[int] = set()
        count = 0

        def flush() -> None:
            nonlocal count
            if not buffer:
                return
            numbers = (
                numbering[count : count + len(buffer)]
                if numbering is not None
                else list(range(count + 1, count + len(buffer) + 1))
            )
            images = [image for _, image in buffer]
            boxes = [
                boxes_for(self.boxes, src, n, size=(int(img.shape[1]), int(img.shape[0])))
                for (src, img), n in zip(buffer, numbers)
            ]
            names = [src for src, _ in buffer]
            frames = self._predict(images, boxes, names, smoother)
            for image, frame, number in zip(images, frames, numbers):
                frame.frame = number
                name = f"{sequence.name}_{number:04d}"

                # throughput hook: the frame's transaction may run on a writer thread; `done` follows in order
                def done(_: Path, number: int = number, name: str = name) -> None:
                    writer.record(number, f"{name}.json")
                    written.add(number)
                    self.report.written += 1
                    self._item_done(f"{sequence.name} #{number}")

                self._write(folder, name, frame, image, done)
            count += len(buffer)
            buffer.clear()

        ahead = self.batch if self.spec.writers else 0  # throughput hook: decode the next chunk meanwhile
        try:
            for source, image in prefetch(sequence.iter_frames(), ahead):
                buffer.append((source, image))
                if len(buffer) >= self.batch:
                    flush()
            flush()
        except InputError as exc:
            self._writers.drain()
            return count, exc
        self._writers.drain()
        if count == 0:
            return 0, InputError(f"{sequence.video or sequence.name}: no frames could be read")
        writer.close()
        remove_stale_frames(folder, sequence.name, written)
        return count, None


def run_job(spec: JobSpec, *, host: Host | None = None, on_item: ItemFn | None = None) -> JobReport:
    """Run a predict job on this machine; see JobSpec for the options and JobReport for the outcome."""
    return PredictJob(spec, host=host, on_item=on_item).run()
