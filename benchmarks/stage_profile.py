"""A per-stage profiler for the real engine: named functions of core/ are wrapped in place while it is active.

Why wrapping and not a copy of the engine's loop: the numbers must describe the code users run (core.studio.job),
not a benchmark's re-enactment of it. Each wrapped call is a stage; time is attributed *exclusively* (a stage's
nested stages are subtracted from it), so the stages of one frame add up to the frame. CPU time is the whole
process's (`time.process_time`: every thread, torch's intra-op threads included), i.e. core-seconds; run the job
sequentially (writers=0) while profiling, or the attribution of concurrent threads is meaningless.

Stage names: `decode`, `prepare`, `<task>.preprocess`, `<task>.normalize`, `<task>.forward`, `<task>.post`,
`pose.boxes`, `pose.decode`, `<task>.other` (the predictor's own loop), `capture`, `checks`, `temporal`,
`previews.render`, `previews.png`, `keypoints_json`, `bundle.channels`, `bundle.exr`, `bundle.json`,
`write.other`, `load` (model loading, not per frame), `job.other` (everything else inside the job).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# Stages that stay on the host when the models run on a GPU (everything else runs where the model runs).
HOST_STAGES = (
    "decode",
    "prepare",
    "capture",
    "checks",
    "temporal",
    "previews.render",
    "previews.png",
    "keypoints_json",
    "bundle.channels",
    "bundle.exr",
    "bundle.json",
    "write.other",
    "job.other",
)


@dataclass
class StageTotals:
    cpu: float = 0.0
    wall: float = 0.0
    calls: int = 0


@dataclass
class StageProfiler:
    """Collects exclusive CPU and wall seconds per stage; `task` is the predictor running now (label prefix).

    `synchronize` (e.g. `torch.cuda.synchronize`) runs at every stage boundary, so that asynchronous device work
    is charged to the stage that launched it rather than to the next one that waits for it."""

    totals: dict[str, StageTotals] = field(default_factory=dict)
    batch_shapes: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)
    _stack: list[list[Any]] = field(default_factory=list)
    task: str = ""
    synchronize: Callable[[], Any] | None = None

    def _label(self, label: str) -> str:
        return label.replace("{task}", self.task or "?")

    def enter(self, label: str) -> None:
        if self.synchronize is not None:
            self.synchronize()
        now_cpu, now_wall = time.process_time(), time.perf_counter()
        if self._stack:  # pause the parent: its exclusive time stops here
            parent = self._stack[-1]
            parent[1] += now_cpu - parent[3]
            parent[2] += now_wall - parent[4]
        self._stack.append([self._label(label), 0.0, 0.0, now_cpu, now_wall])

    def leave(self) -> None:
        if self.synchronize is not None:
            self.synchronize()
        now_cpu, now_wall = time.process_time(), time.perf_counter()
        label, cpu, wall, start_cpu, start_wall = self._stack.pop()
        entry = self.totals.setdefault(label, StageTotals())
        entry.cpu += cpu + now_cpu - start_cpu
        entry.wall += wall + now_wall - start_wall
        entry.calls += 1
        if self._stack:  # resume the parent
            self._stack[-1][3], self._stack[-1][4] = now_cpu, now_wall

    @contextlib.contextmanager
    def stage(self, label: str) -> Iterator[None]:
        self.enter(label)
        try:
            yield
        finally:
            self.leave()

    def wrap(self, fn: Callable[..., Any], label: str, *, task: str | None = None) -> Callable[..., Any]:
        """`fn` timed as stage `label`; `task` also sets the task prefix for the stages nested in it."""

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            previous = self.task
            if task is not None:
                self.task = task
            self.enter(label)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()
                self.task = previous

        return timed

    def per_frame(self, frames: int, *, skip: tuple[str, ...] = ("load",)) -> dict[str, dict[str, float]]:
        """Stage → {cpu_ms, wall_ms, calls} per frame."""
        return {
            label: {
                "cpu_ms": 1000.0 * t.cpu / frames,
                "wall_ms": 1000.0 * t.wall / frames,
                "calls": t.calls / frames,
            }
            for label, t in sorted(self.totals.items())
            if label not in skip
        }


def _targets() -> list[tuple[Any, str, str, str | None]]:
    """(object, attribute, stage label, task context) of every function the profiler wraps."""

    # Modules by full name: some packages re-export a function under a module's name (core.pipeline.predict).
    def module(name: str) -> Any:
        return importlib.import_module(f"sapiens2_studio.core.{name}")

    bundle, images, predict = module("formats.bundle"), module("pipeline.images"), module("pipeline.predict")
    capture, inputs, job = module("studio.capture"), module("studio.inputs"), module("studio.job")
    outputs, tasks, temporal = module("studio.outputs"), module("studio.tasks"), module("studio.temporal")
    stages = module("studio.stages")

    targets: list[tuple[Any, str, str, str | None]] = [
        (job.PredictJob, "run", "job.other", None),
        (job, "load_models", "load", None),
        (inputs, "load_image", "decode", None),
        (job, "load_image", "decode", None),
        (images, "_from_numpy", "prepare", None),
        (images, "_uint8_pixels", "prepare", None),
        (predict, "preprocess_seg", "{task}.preprocess", None),
        (predict, "preprocess_dense", "{task}.preprocess", None),
        (predict, "preprocess_pose_crop", "{task}.preprocess", None),
        (predict, "normalize", "{task}.normalize", None),
        (predict, "_forward", "{task}.forward", None),
        (predict, "seg_to_labels", "{task}.post", None),
        (predict, "normals_to_image", "{task}.post", None),
        (predict, "albedo_to_image", "{task}.post", None),
        (predict, "pointmap_to_image", "{task}.post", None),
        (predict, "pointmap_intrinsics", "{task}.post", None),
        (predict, "_masks", "{task}.post", None),
        (predict, "boxes_for_image", "pose.boxes", None),
        (predict, "average_flip", "pose.decode", None),
        (predict, "decode_heatmaps", "pose.decode", None),
        (predict, "crop_to_image", "pose.decode", None),
        (job, "capture_frames", "capture", None),  # versions before the stages module
        (stages, "capture_frames", "capture", None),
        (capture, "check_geometry", "checks", None),
        (temporal.SequenceSmoother, "apply", "temporal", None),
        (job, "write_frame_outputs", "write.other", None),
        (stages, "write_frame_outputs", "write.other", None),
        (outputs, "preview_images", "previews.render", None),  # versions before drawing one preview at a time
        (outputs, "render_preview", "previews.render", None),
        (outputs, "save_png", "previews.png", None),
        (outputs, "keypoints_document", "keypoints_json", None),
        (outputs, "openpose_document", "keypoints_json", None),
        (outputs, "write_bundle", "bundle.json", None),
        (bundle, "_exr_channels", "bundle.channels", None),  # versions before the banded writer
        (bundle, "_exr_plan", "bundle.channels", None),
        (bundle, "_exr_band", "bundle.channels", None),
        (bundle, "write_exr", "bundle.exr", None),
        (bundle, "write_exr_bands", "bundle.exr", None),
    ]
    if hasattr(tasks, "PREDICTORS"):  # versions before the task registry (issue 27)
        for name in tasks.PREDICTORS:
            targets.append((tasks.PREDICTORS, name, "{task}.other", name))
    else:  # each registered task's predict (core/tasks), what run_tasks calls per batch
        for task in module("tasks.registry").all_tasks():
            targets.append((type(task), "predict", "{task}.other", task.name))
    return targets


@contextlib.contextmanager
def profiling(profiler: StageProfiler) -> Iterator[StageProfiler]:
    """Wrap every target while the block runs; restore the originals afterwards."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for owner, name, label, task in _targets():
            if isinstance(owner, dict):
                original = owner[name]
                owner[name] = profiler.wrap(original, label, task=task)
            else:
                if not hasattr(owner, name):  # a stage this version of the engine does not have
                    continue
                original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
                setattr(owner, name, profiler.wrap(original, label, task=task))
            saved.append((owner, name, original))
        yield profiler
    finally:
        for owner, name, original in reversed(saved):
            if isinstance(owner, dict):
                owner[name] = original
            else:
                setattr(owner, name, original)
