"""Per-stage times of the real engine, read from its timing seam (`core/timing.py`): what a job's run record holds.

Why the seam and not wrappers: the stages are named where they happen in core, so the numbers describe the code
users run (`core.studio.jobs.job`), and a stage that disappears (renamed, moved, dropped) fails the benchmark
(`require_stages`) instead of being skipped and counted in its parent without a word. Time is *exclusive* (a
stage's nested stages are subtracted from it), so the stages of one frame add up to the frame. CPU time is the
whole process's (`time.process_time`: torch's intra-op threads included), i.e. core-seconds; run the job
sequentially (writers=0) while profiling, or the CPU seconds of concurrent stages overlap.

Stage names: `decode`, `prepare`, `<task>.preprocess` (the dense tasks share one pre-processing, charged to the
first of them in run order), `<task>.normalize`, `<task>.forward`, `<task>.post`, `pose.boxes`, `pose.decode`,
`<task>.other` (the rest of the task's predictor), `capture`, `checks`, `temporal` (sequences), `previews.render`,
`previews.png`, `keypoints_json`, `bundle.exr`, `bundle.json`, `write.other`, `load` (model loading, not per
frame), `job.other` (everything else inside the job).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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

# The stages of each released task's predictor besides `<task>.other` (matting's predictor reports none of its
# own). A dense task's `.preprocess` is expected of the first dense task only (the others reuse its input).
TASK_STAGES: dict[str, tuple[str, ...]] = {
    "pose": ("preprocess", "normalize", "forward", "boxes", "decode"),
    "seg": ("preprocess", "normalize", "forward", "post"),
    "normal": ("normalize", "forward", "post"),
    "albedo": ("normalize", "forward", "post"),
    "pointmap": ("normalize", "forward", "post"),
    "matting": (),
}
DENSE = ("normal", "albedo", "pointmap")  # in run order
RUN_ORDER = ("seg", "pose", "normal", "albedo", "pointmap", "matting")


def expected_stages(tasks: Iterable[str], *, previews: bool, sequence: bool) -> set[str]:
    """Every stage a job of `tasks` (the built-in ones) on photos of a person must report."""
    tasks = set(tasks)
    names = {"decode", "prepare", "capture", "bundle.exr", "bundle.json", "write.other", "job.other", "load"}
    for task in tasks:
        names |= {f"{task}.other", *(f"{task}.{part}" for part in TASK_STAGES[task])}
    first_dense = next((t for t in RUN_ORDER if t in tasks and t in DENSE), None)
    if first_dense is not None:
        names.add(f"{first_dense}.preprocess")
    if "pose" in tasks:
        names.add("keypoints_json")
    if "normal" in tasks or ("seg" in tasks and tasks & {"pose", "pointmap"}):
        names.add("checks")
    if sequence:
        names.add("temporal")
    if previews:
        names |= {"previews.render", "previews.png"}
    return names


class MissingStagesError(AssertionError):
    """A stage the benchmark reads was not reported: the engine's stages changed, so must the benchmark."""


def require_stages(reported: Iterable[str], expected: Iterable[str]) -> None:
    """Fail loudly when an expected stage is missing (a renamed or removed stage is never skipped silently)."""
    missing = sorted(set(expected) - set(reported))
    if missing:
        raise MissingStagesError(
            f"the job reported no {', '.join(missing)} stage(s); it reported {', '.join(sorted(reported))}. "
            "A stage was renamed or removed in core: update benchmarks/stage_profile.py (and docs/performance.md)"
        )


def per_frame(
    stages: Mapping[str, Any], frames: int, *, skip: tuple[str, ...] = ("load",)
) -> dict[str, dict[str, float]]:
    """Stage → {cpu_ms, wall_ms, calls} per frame, from a run record's totals (`JobReport.stages`)."""
    return {
        name: {
            "cpu_ms": 1000.0 * t.cpu / frames,
            "wall_ms": 1000.0 * t.wall / frames,
            "calls": t.calls / frames,
        }
        for name, t in sorted(stages.items())
        if name not in skip
    }


def seam_cost(n: int = 200_000) -> dict[str, float]:
    """Nanoseconds one `with stage(...)` costs with nobody listening and with a job's listener (totals kept), best
    of 5 runs of `n`: `python benchmarks/stage_profile.py`."""
    import timeit

    from sapiens2_studio.core.timing import add_stage, listening, stage

    def one() -> None:
        with stage("decode"):
            pass

    def best() -> float:
        return 1e9 * min(timeit.repeat(one, number=n, repeat=5)) / n

    silent = best()
    totals: dict[str, Any] = {}
    with listening(lambda name, wall, cpu: add_stage(totals, name, wall, cpu)):
        heard = best()
    return {"silent_ns": silent, "listening_ns": heard}


if __name__ == "__main__":
    import json

    print(json.dumps(seam_cost(), indent=1))
