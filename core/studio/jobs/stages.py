"""The per-frame stage of a predict job, shared by every engine: plan a frame, compute its raw results, commit it.

Why here and not inside `PredictJob`: the local engine, a Ray worker and a render-farm chunk all run exactly this
stage, so a frame computed by any of them is the same file. What differs between engines is only where the
temporal pass of a sequence (`temporal.SequencePass`) runs: the local engine runs it in memory right before each
commit; a distributed engine commits the raw frame marked `run.temporal.state = "pending"` and `finalize.py`
runs the pass later over the frames read back from disk, in frame order.

Raw frames are *canonical* (`canonical_frame`): every value the temporal pass reads is held at the precision the
bundle stores it (person boxes as float32, the pointmap scale as float32, points with the EXR's invalid points
zeroed), so a frame in memory and the same frame read back from its bundle are equal inputs to the pass.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...formats.bundle import CaptureFrame, CapturePerson, canonical_points, read_bundle
from ...formats.errors import BundleError
from ...tasks import registry as tasks_registry
from ...timing import stage
from ..compute.capture import capture_frames
from ..compute.carry import apply_carry, carried_seg, seg_batch
from ..compute.finite import nonfinite_frames
from ..compute.run_tasks import GIVEN_INPUT, TaskOptions, run_tasks
from ..compute.sequence_pass import TEMPORAL_TASKS
from ..errors import NonFiniteOutputError, StudioError
from ..runtime.host import Host
from ..runtime.models import LoadedModel
from ..sources.batches import TaskBatch
from ..store.outputs import write_frame_outputs
from ..store.resume import Expectation, FramePlan, RunInfo, frame_run_record

PENDING_SUFFIX = (
    ".pending.npz"  # what a pending frame's temporal pass needs beyond its bundle (see pending_needs)
)


@dataclass
class FrameItem:
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


# A normal / albedo / point map of a frame larger than this (bytes of float32 (H, W, 3); ≈ 22 megapixels) is made
# band by band while the bundle is written, never whole (`pipeline.banded`): a 9000×6000 photo's maps would be
# 648 MB each. Smaller frames keep whole maps, which the writers read faster.
BANDED_MAPS_ABOVE = 256 * 1024 * 1024


def output_record(spec: Any) -> dict[str, Any]:
    """The outputs a job (a JobSpec) asks for besides the tasks, as the frames' `run.outputs` records them."""
    return {"previews": spec.previews, "mesh": spec.mesh, "exr_compression": spec.exr_compression}


def _run_settings(spec: Any, boxes: Any, smooth: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Task → the settings its frames' run records keep (`Task.run_settings`), for the tasks that keep any."""
    found = {
        task.name: task.run_settings(flip_test=spec.flip_test, boxes=boxes, smooth=smooth)
        for task in tasks_registry.all_tasks()
    }
    return {name: settings for name, settings in found.items() if settings is not None}


def job_expectation(
    spec: Any,
    tasks: tuple[str, ...],
    checkpoints: Mapping[str, str | None],
    source: dict[str, Any],
    boxes: Any,
    *,
    sequence: bool,
    trusted_run: str | None = None,
) -> Expectation:
    """What the job (a JobSpec) produces for one frame, for `plan_frame`. `trusted_run`: a retried unit of a
    distributed run, which keeps that run's committed frames (`job.Member.retry`)."""
    smooth = {"smooth": spec.smooth} if sequence else {}
    return Expectation(
        tasks=tasks,
        checkpoints=checkpoints,
        source=source,
        settings=_run_settings(spec, boxes, smooth),
        outputs=output_record(spec),
        boxes_given=boxes is not None,
        skip_existing=spec.skip_existing or trusted_run is not None,
        clean=spec.clean,
        trusted_run=None if spec.skip_existing else trusted_run,
    )


def canonical_frame(frame: CaptureFrame, *, consumed: bool = False) -> None:
    """Hold the values the temporal pass reads at the bundle's precision, in place (module docstring);
    `consumed`: the frame's arrays may share the memory of model results nobody reads any more."""
    frame.people = [CapturePerson.coerce(p, i) for i, p in enumerate(frame.people)]
    for person in frame.people:
        person.bbox = tuple(float(np.float32(v)) for v in person.bbox)  # type: ignore[assignment]
    if frame.pointmap_scale is not None:
        frame.pointmap_scale = float(np.float32(frame.pointmap_scale))
    if frame.points is not None:  # in place where the frame owns them (bundle.canonical_points)
        frame.points = canonical_points(frame.points, in_place=consumed)


def compute_frames(
    items: list[FrameItem],
    spec: Any,
    host: Host,
    models_for: Callable[[tuple[str, ...]], dict[str, LoadedModel]],
) -> tuple[list[CaptureFrame], dict[int, NonFiniteOutputError]]:
    """Compute a chunk's tasks (all items share `plan.compute`), carry the rest over, build canonical raw frames.

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
            bands_above=BANDED_MAPS_ABOVE,
            chunk_size=len(items),
            flip_test=spec.flip_test,
            boxes=None if all(i.boxes is None for i in items) else [i.boxes for i in items],
        )
        segs = seg_batch([carried_seg(old, i.plan.carry) for old, i in zip(olds, items)])
        batches = run_tasks(
            models_for(compute),
            [i.image for i in items],
            host,
            options,
            seg=segs if GIVEN_INPUT not in compute else None,
            labels=[i.label for i in items],
        )
    refused: dict[int, NonFiniteOutputError] = {}
    if spec.nonfinite == "error":
        for index, tasks in nonfinite_frames(batches).items():
            refused[index] = NonFiniteOutputError(
                f"{items[index].label}: the {', '.join(tasks)} output holds NaN/inf values, so it was not "
                "written (with --nonfinite warn it is written, the values stored as invalid)"
            )
    frames = []  # the refusals are decided first: capture then takes each frame's results over and drops them
    for index, (item, old) in enumerate(zip(items, olds)):
        own = {task: TaskBatch(task, [b.results[index]], b.model) for task, b in batches.items()}
        mask = (
            old.mask if old is not None and GIVEN_INPUT in item.plan.carry and old.mask is not None else None
        )
        with stage("capture"):
            frame = capture_frames(
                [item.image], own, mask=mask, source_names=[item.source_name], host=host, consume=True
            )[0]
        apply_carry(frame, old, item.plan.carry)
        canonical_frame(frame, consumed=True)
        frames.append(frame)
        del own
        for batch in batches.values():
            if len(batch.results) == len(items):  # per-image results: this frame's are no longer read
                batch.results[index] = None
    return frames, refused


def pending_needs(spec: Any, tasks: Sequence[str]) -> tuple[bool, bool]:
    """(image, normals): what finalize needs beyond the bundle to redraw the files the temporal pass changes —
    the input image for the pose preview (smoothed keypoints) or the mesh's colours (smoothed depth), and the
    float32 normals for the mesh (the EXR holds them as half floats)."""
    chosen = [tasks_registry.get(t) for t in tasks if tasks_registry.has(t)]
    redrawn = any(t.temporal and any(p.over_image for p in t.previews) for t in chosen)
    smooth_previews = spec.smooth and redrawn and spec.previews
    smooth_mesh = spec.smooth and any(t.temporal and t.mesh for t in chosen) and spec.mesh is not None
    return bool(smooth_previews or smooth_mesh), bool(smooth_mesh and any(t.mesh_normals for t in chosen))


def temporal_record(spec: Any, fps: float, plan: FramePlan) -> dict[str, Any] | None:
    """`run.temporal` of a pending frame: the pass still to run, with what it needs (None: nothing to do)."""
    computed = [t for t in plan.compute if t in TEMPORAL_TASKS]
    if not computed:
        return None
    return {"state": "pending", "fps": float(fps), "smooth": bool(spec.smooth), "computed": computed}


def commit_frame(
    item: FrameItem,
    frame: CaptureFrame,
    run: RunInfo,
    spec: Any,
    *,
    temporal: dict[str, Any] | None = None,
) -> Path:
    """One frame's transaction (transaction.py): previews, keypoint JSONs, mesh, EXR, JSON last. `temporal`: its
    `run.temporal` record; for a pending frame also the sidecar finalize needs (`pending_needs`), in the same
    commit."""
    with stage("write.other"):
        return _commit_frame(item, frame, run, spec, temporal)


def _commit_frame(
    item: FrameItem, frame: CaptureFrame, run: RunInfo, spec: Any, temporal: dict[str, Any] | None
) -> Path:
    outputs = output_record(spec)
    frame.frame = item.number
    frame.run = frame_run_record(run, item.plan, item.source, outputs)
    extra: dict[str, Callable[[Path], Any]] = {}
    if temporal is not None:
        frame.run["temporal"] = temporal
    if temporal is not None and temporal.get("state") == "pending":
        want_image, want_normals = pending_needs(spec, item.plan.tasks)
        arrays: dict[str, np.ndarray] = {}
        if want_image:
            arrays["image"] = np.asarray(item.image)
        if want_normals and frame.normals is not None:
            arrays["normals"] = np.asarray(frame.normals, dtype=np.float32)
        if arrays:
            extra[f"{item.name}{PENDING_SUFFIX}"] = lambda path: _save_arrays(path, arrays)
    os.makedirs(item.folder, exist_ok=True)
    return write_frame_outputs(
        item.folder,
        item.name,
        frame,
        item.image,
        with_previews=spec.previews,
        mesh_format=spec.mesh,
        extra=extra,
        exr_compression=spec.exr_compression,
    )


def _save_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    path.write_bytes(buffer.getvalue())


def load_pending_arrays(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a pending frame's sidecar (empty when it has none)."""
    if not path.is_file():
        return {}
    with np.load(path, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def tasks_in_run_order(tasks: Sequence[str]) -> tuple[str, ...]:
    return tuple(t for t in tasks_registry.run_order() if t in tasks)
