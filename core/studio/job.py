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
from ..checkpoints.loader import load_model
from ..formats.bundle import CaptureFrame, read_bundle
from ..formats.documents import load_json
from ..formats.errors import BundleError
from ..formats.exr import require_openexr
from ..formats.sequence import SequenceWriter
from .batches import TaskBatch
from .boxes import BoxesFile, boxes_for, read_boxes_file
from .capture import capture_frames
from .carry import apply_carry, carried_seg, people_from_doc, seg_batch
from .errors import InputError, NonFiniteOutputError, StudioError
from .finite import NONFINITE_POLICIES, nonfinite_frames
from .host import Host
from .inputs import ImageJob, SequenceJob, collect_inputs, load_image
from .lock import lock_output
from .models import LoadedModel, ModelCache
from .outputs import remove_stale_frames, write_frame_outputs
from .pipelining import DEFAULT_WRITERS, OrderedWriter, prefetch
from .preflight import OutputCheck, check_output_folder
from .resume import (
    Expectation,
    FramePlan,
    RunInfo,
    frame_run_record,
    image_source,
    partial_marker,
    plan_frame,
    relabelled,
    sequence_run,
    video_source,
)
from .tasks import TaskOptions, run_tasks
from .temporal import SequenceSmoother
from .transaction import (
    clean_stale_temporaries,
    commit_document,
    output_error,
    pause_point,
    recover_commits,
    write_document,
)

ItemFn = Callable[[int, str], Any]  # (items done now, label) after each written image
MESH_FORMATS = ("ply", "glb")
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,79}$")


@dataclass
class JobSpec:
    """Everything a predict job needs; the defaults are the CLI's.

    size: the official size of every task's checkpoint; None (the default) gives each task its own
    `catalogue.default_size` (0.4b, and 1b for matting, which exists only at 1b), so adding matting to the
    tasks never needs a size. checkpoints: task → file overriding the official file; batch_size: images per
    forward pass, or "auto" (as many as fit in free GPU memory). skip_existing: keep verified frames and tasks,
    do the rest (resume); clean: a frame holds only this run's tasks (otherwise tasks not run now are carried
    over). nonfinite: "warn" (note and store NaN as invalid) or "error" (refuse such frames). run_id: the run's
    id (e.g. a render-farm job's, shared by its chunks); new when None. writers: frames written concurrently
    on writer threads while the models run on the next ones (and a video's next frames are decoded ahead);
    0 = all on one thread.
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
    batch_size: int | str = 1
    flip_test: bool = True
    boxes_file: str | os.PathLike | None = None
    smooth: bool = False
    fps: float | None = None
    previews: bool = True
    mesh: str | None = None
    skip_existing: bool = False
    clean: bool = False
    nonfinite: str = "warn"
    run_id: str | None = None
    writers: int = DEFAULT_WRITERS

    def size_for(self, task: str) -> str:
        """The official size used for `task`: the forced `size`, else the task's default size."""
        return self.size or catalogue.default_size(task)

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
        if self.nonfinite not in NONFINITE_POLICIES:
            raise StudioError(
                f"nonfinite must be one of {', '.join(NONFINITE_POLICIES)}, got {self.nonfinite!r}"
            )
        if self.run_id is not None and not _RUN_ID.match(self.run_id):
            raise StudioError(
                f"run id {self.run_id!r}: use 1–80 letters, digits, '_', '-' or '.', starting with a letter or digit"
            )
        if not isinstance(self.writers, int) or self.writers < 0:
            raise StudioError(f"the number of writers must be 0 or more, got {self.writers!r}")


@dataclass
class JobReport:
    """What a job did: results written, verified results kept, inputs that failed (with reasons), notes."""

    out: Path
    written: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    run_id: str = ""

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


@dataclass
class _Item:
    """One frame on its way through a chunk: where it goes, what to do, and its input."""

    folder: Path
    name: str
    label: str
    source_name: str
    plan: FramePlan
    source: dict[str, Any]
    image: np.ndarray
    boxes: Any = None
    number: int | None = None


class PredictJob:
    """Runs a JobSpec on one machine (the local engine)."""

    def __init__(self, spec: JobSpec, *, host: Host | None = None, on_item: ItemFn | None = None) -> None:
        spec.validate()
        self.spec = spec
        self.host = host or Host()
        self.on_item = on_item
        self.out = Path(spec.out).expanduser()
        self.run_info = RunInfo.new(spec.run_id)
        self.report = JobReport(self.out, run_id=self.run_info.id)
        self.models: dict[str, LoadedModel] = {}
        self.cache = ModelCache()
        self.batch = 1 if spec.batch_size == "auto" else int(spec.batch_size)
        self.tasks = tuple(t for t in catalogue.RUN_ORDER if t in spec.tasks)
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
            load_model(path, device="meta", task=task)
        self.check: OutputCheck = check_output_folder(
            self.out, self.jobs, self.tasks, previews=self.spec.previews, mesh=self.spec.mesh
        )
        if any(isinstance(j, SequenceJob) and j.video is not None for j in self.jobs):
            return None
        return sum(1 if isinstance(j, ImageJob) else len(j.frames) for j in self.jobs)

    def run(self) -> JobReport:
        if not hasattr(self, "jobs"):
            self.prepare()
        self._make_folder(self.out)
        lock = None
        try:
            lock = lock_output(self.out, self.run_info.id, self.host)
            pause_point("locked")
            recovered = recover_commits(self.out)
            if recovered:
                self.host.note(
                    f"completed {len(recovered)} frame commit(s) that an interrupted earlier run had started"
                )
            removed = clean_stale_temporaries(self.out)
            if removed:
                self.host.note(f"removed {len(removed)} temporary file(s) left by an interrupted earlier run")
            if self.spec.skip_existing:
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
            self.models.update(load_models(self.spec, missing, self.cache))
            self.host.device = next(iter(self.models.values())).plan.device
            if self.spec.batch_size == "auto":
                self.batch = auto_batch_size(self.models)
        return {t: self.models[t] for t in catalogue.RUN_ORDER if t in tasks}

    def _item_done(self, label: str) -> None:
        if self.on_item is not None:
            self.on_item(1, label)

    def _expectation(self, source: dict[str, Any], boxes: Any, *, sequence: bool) -> Expectation:
        smooth = {"smooth": self.spec.smooth} if sequence else {}
        return Expectation(
            tasks=self.tasks,
            checkpoints=self._shas,
            source=source,
            settings={
                "pose": {"flip_test": self.spec.flip_test, "boxes": boxes, **smooth},
                "pointmap": dict(smooth),
            },
            outputs={"previews": self.spec.previews, "mesh": self.spec.mesh},
            boxes_given=boxes is not None,
            skip_existing=self.spec.skip_existing,
            clean=self.spec.clean,
        )

    # ------------------------------------------------------------------------------------------------ frames

    def _frames(
        self, items: list[_Item], smoother: SequenceSmoother | None
    ) -> tuple[list[CaptureFrame], dict[int, NonFiniteOutputError]]:
        """Compute the chunk's tasks (all items share `plan.compute`), carry the rest over, build the frames.

        Returns the frames and, with `nonfinite="error"`, the refused ones (index → error)."""
        compute = items[0].plan.compute
        olds: list[CaptureFrame | None] = []
        for item in items:
            old = None
            if item.plan.carry:
                try:
                    old = read_bundle(item.folder / f"{item.name}.json", warn=False)
                except BundleError as exc:  # verified a moment ago; changed since
                    raise StudioError(
                        f"{item.label}: its earlier results changed while reading them ({exc})"
                    ) from None
            olds.append(old)
        batches: dict[str, TaskBatch] = {}
        if compute:
            options = TaskOptions(
                chunk_size=len(items),
                flip_test=self.spec.flip_test,
                boxes=None if all(i.boxes is None for i in items) else [i.boxes for i in items],
            )
            segs = seg_batch([carried_seg(old, i.plan.carry) for old, i in zip(olds, items)])
            batches = run_tasks(
                self._ensure_models(compute),
                [i.image for i in items],
                self.host,
                options,
                seg=segs if "seg" not in compute else None,
                labels=[i.label for i in items],
            )
            if smoother is not None:
                smoother.apply(batches)
        frames = []
        for index, (item, old) in enumerate(zip(items, olds)):
            own = {task: TaskBatch(task, [b.results[index]], b.model) for task, b in batches.items()}
            mask = old.mask if old is not None and "seg" in item.plan.carry and old.mask is not None else None
            frame = capture_frames(
                [item.image], own, mask=mask, source_names=[item.source_name], host=self.host
            )[0]
            apply_carry(frame, old, item.plan.carry)
            frames.append(frame)
        refused: dict[int, NonFiniteOutputError] = {}
        if self.spec.nonfinite == "error":
            for index, tasks in nonfinite_frames(batches).items():
                refused[index] = NonFiniteOutputError(
                    f"{items[index].label}: the {', '.join(tasks)} output holds NaN/inf values, so it was not "
                    "written (with --nonfinite warn it is written, the values stored as invalid)"
                )
        return frames, refused

    def _commit(
        self, item: _Item, frame: CaptureFrame, run: RunInfo, done: Callable[[], Any] | None = None
    ) -> None:
        """One frame's transaction: sidecars and EXR staged, JSON last (transaction.py). It runs on a writer
        thread when `writers` > 0 while the models go on; `done()` follows on this thread, in frame order
        (pipelining.OrderedWriter), so what records a frame only sees committed ones."""
        outputs = {"previews": self.spec.previews, "mesh": self.spec.mesh}
        frame.frame = item.number
        frame.run = frame_run_record(run, item.plan, item.source, outputs)
        self._make_folder(item.folder)
        work = partial(
            write_frame_outputs,
            item.folder,
            item.name,
            frame,
            item.image,
            with_previews=self.spec.previews,
            mesh_format=self.spec.mesh,
        )

        def committed(_: Any) -> None:
            self.report.written += 1
            if done is not None:
                done()

        self._writers.submit(work, committed)

    # ------------------------------------------------------------------------------------------------ images

    def _run_images(self, jobs: list[ImageJob]) -> None:
        """Single images in input order; consecutive images that need the same tasks share a chunk."""
        chunk: list[_Item] = []

        def flush() -> None:
            if not chunk:
                return
            frames, refused = self._frames(chunk, None)
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
                    self.report.skipped += 1
                    self._item_done(job.name)
                    continue
                image = load_image(job.path)
                size = (int(image.shape[1]), int(image.shape[0]))
                boxes = boxes_for(self.boxes, job.path.name, size=size)
            except (InputError, OSError) as exc:
                self.report.failures.append(
                    exc.message if isinstance(exc, InputError) else f"{job.path}: {exc}"
                )
                self._item_done(job.name)
                continue
            item = _Item(self.out, job.name, job.path.name, job.path.name, plan, source, image, boxes)
            if chunk and chunk[0].plan.compute != plan.compute:
                flush()
            chunk.append(item)
            if len(chunk) >= self.batch:
                flush()
        flush()

    # --------------------------------------------------------------------------------------------- sequences

    def _sequence_sources(
        self, sequence: SequenceJob
    ) -> Iterator[tuple[int, str, Callable[[], np.ndarray], dict]]:
        """(frame number, source name, image loader, source identity) per frame; image files are decoded only
        when a frame needs them, a video is decoded in order (it cannot be read otherwise)."""
        if sequence.video is None:
            numbers = sequence.frame_numbers() or []
            for path, number in zip(sequence.frames, numbers):
                try:
                    source = image_source(path)
                except OSError as exc:
                    raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
                yield number, path.name, (lambda p=path: load_image(p)), source
            return
        ahead = self.batch if self.spec.writers else 0  # decode the next chunk while the models run
        for number, (name, image) in enumerate(prefetch(sequence.iter_frames(), ahead), start=1):
            yield number, name, (lambda im=image: im), video_source(sequence.video, number)

    def _run_sequence(self, sequence: SequenceJob) -> tuple[int, StudioError | None]:
        """A sequence frame by frame, in order; the index is written only when every frame is committed, over
        frames that all carry this sequence's run (`sequence_run`).

        Returns (frames done, the error that stopped the sequence or None)."""
        try:
            sequence.probe()  # a video's frame rate, before the writer and smoother use it
        except InputError as exc:
            return 0, exc
        folder = self.out / sequence.name
        # An explicit run id (a farm job's) wins; otherwise a resume continues the run it finds there.
        adopt = self.spec.skip_existing and self.spec.run_id is None
        run = sequence_run(folder, sequence.name, self.run_info, skip_existing=adopt)
        fps = self.spec.fps or sequence.fps
        writer = SequenceWriter(folder, sequence.name, fps, run=run.record())
        smoother = SequenceSmoother(fps, smooth=self.spec.smooth)  # track ids always; smoothing on request
        index_path = folder / f"{sequence.name}.sequence.json"
        marker = folder / f"{sequence.name}.partial.json"
        state: dict[str, Any] = {
            "started": False,  # the marker is written and the old index gone
            "synced": True,  # the smoother's state follows the last committed frame
            "people": [],
            "scale": None,
            "max_track": -1,
            "done": 0,  # frames committed or verified
        }
        numbers: set[int] = set()
        buffer: list[_Item] = []

        def begin() -> None:
            """Before the first change in the folder: mark the sequence partial, then drop its old index."""
            if state["started"]:
                return
            self._make_folder(folder)
            frames = None if sequence.video is not None else len(sequence.frames)
            write_document(marker, partial_marker(sequence.name, run, self.tasks, frames))
            with contextlib.suppress(FileNotFoundError):
                index_path.unlink()
            state["started"] = True

        def remember(people: list[Any], scale: Any, synced: bool) -> None:
            state["people"], state["scale"], state["synced"] = people, scale, synced
            ids = [p.track_id for p in people if getattr(p, "track_id", None) is not None]
            state["max_track"] = max([state["max_track"], *ids])

        def flush() -> None:
            if not buffer:
                return
            compute = buffer[0].plan.compute
            if not state["synced"] and ("pose" in compute or "pointmap" in compute):
                smoother.prime(state["people"], state["scale"], state["max_track"] + 1)
            frames, refused = self._frames(buffer, smoother)
            begin()  # only now: until the first commit the previous complete state stays as it was
            for index, (item, frame) in enumerate(zip(buffer, frames)):
                if index in refused:
                    raise refused[index]  # a refused frame stops its sequence, like an unreadable one

                def recorded(item: _Item = item) -> None:
                    writer.record(item.number, f"{item.name}.json")
                    self._item_done(item.label)
                    state["done"] += 1

                self._commit(item, frame, run, recorded)
            remember(frames[-1].people, frames[-1].pointmap_scale, "pose" in compute)
            buffer.clear()

        try:
            for number, source_name, load, source in self._sequence_sources(sequence):
                name = f"{sequence.name}_{number:04d}"
                label = f"{sequence.name} #{number}"
                boxes = boxes_for(self.boxes, source_name, number)
                plan = plan_frame(folder, name, self._expectation(source, boxes, sequence=True), run.id)
                numbers.add(number)
                if plan.action != "write":
                    flush()
                    self._writers.drain()  # the index records frames in order
                    if plan.action == "relabel":
                        begin()
                        commit_document(folder, name, relabelled(plan.doc or {}, run))
                    writer.record(number, f"{name}.json")
                    remember(people_from_doc(plan.doc or {}), (plan.doc or {}).get("pointmap_scale"), False)
                    self.report.skipped += 1
                    self._item_done(label)
                    state["done"] += 1
                    continue
                image = load()
                size = (int(image.shape[1]), int(image.shape[0]))
                boxes = boxes_for(self.boxes, source_name, number, size=size)
                if buffer and buffer[0].plan.compute != plan.compute:
                    flush()
                buffer.append(_Item(folder, name, label, source_name, plan, source, image, boxes, number))
                if len(buffer) >= self.batch:
                    flush()
            flush()
        except (InputError, NonFiniteOutputError) as exc:
            self._writers.drain()  # the frames before the broken one are complete: commit them
            return state["done"], exc
        self._writers.drain()
        count = state["done"]
        if count == 0:
            return 0, InputError(f"{sequence.video or sequence.name}: no frames could be read")
        if not state["started"] and _index_lists(index_path, run.id, numbers) and not marker.exists():
            return count, None  # every frame verified under the index's own run: nothing to change
        begin()
        remove_stale_frames(folder, sequence.name, numbers)
        pause_point("index")
        writer.close()
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()
        return count, None


def _index_lists(index: Path, run_id: str, numbers: set[int]) -> bool:
    """True when `index` exists, names `run_id` and lists exactly the frames `numbers`."""
    try:
        doc = load_json(index, "sequence index")
    except BundleError:
        return False
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    listed = {e.get("frame") for e in doc.get("frames") or [] if isinstance(e, dict)}
    return run.get("id") == run_id and listed == numbers


def run_job(spec: JobSpec, *, host: Host | None = None, on_item: ItemFn | None = None) -> JobReport:
    """Run a predict job on this machine; see JobSpec for the options and JobReport for the outcome."""
    return PredictJob(spec, host=host, on_item=on_item).run()
