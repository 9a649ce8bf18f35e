"""Non-finite model output (NaN/inf), caught per frame before anything is written.

Why: a broken fp16 run or damaged weights make a model return NaN. The writers keep every file valid (JSON `null`,
zero/invalid EXR pixels), but without a word the user would see "nobody found" or an empty mask and blame the
photo. `report_nonfinite` (called by `run_tasks`, so every front-end gets it) notes each task's bad frames once;
`nonfinite_frames` lets a job refuse them instead (`--nonfinite error`). What counts is each task's own rule
(`Task.nonfinite`); a task's other batch notes follow (`Task.batch_notes`: a pointmap whose scale gives no focal
length, whose frames record the default camera instead, `camera.reason`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...tasks import registry as tasks_registry
from ..runtime.host import Host
from ..sources.batches import TaskBatch, place

NONFINITE_POLICIES = ("warn", "error")


def nonfinite_count(task: str, result: Any) -> int:
    """NaN/inf values in one task result, by the task's own rule (`Task.nonfinite`; for seg: in the network's
    logits, which the labels cannot show)."""
    if result is None or not tasks_registry.has(task):
        return 0
    return tasks_registry.get(task).nonfinite(result)


def nonfinite_frames(batches: Mapping[str, TaskBatch]) -> dict[int, list[str]]:
    """Image index → the tasks whose output for that image holds NaN/inf."""
    out: dict[int, list[str]] = {}
    for task, batch in batches.items():
        for i, result in enumerate(batch.results):
            if nonfinite_count(task, result):
                out.setdefault(i, []).append(task)
    return out


def _listed(which: Sequence[str]) -> str:
    return ", ".join(which[:10]) + (f" and {len(which) - 10} more" if len(which) > 10 else "")


def report_nonfinite(
    batches: Mapping[str, TaskBatch], host: Host, where: str = "", labels: Sequence[str] | None = None
) -> None:
    """One note per task with non-finite output (listing its frames), and one for pointmaps without a focal
    length."""
    names = labels or [f"frame {i + 1}" for i in range(max((len(b) for b in batches.values()), default=0))]
    for task, batch in batches.items():
        bad = [names[i] for i, r in enumerate(batch.results) if nonfinite_count(task, r)]
        if bad:
            host.note(
                f"{place(where)}{_listed(bad)}: the {task} model's output holds NaN/inf values (a broken fp16 run "
                "or damaged weights?); they are stored as invalid (null in JSON, 0 in the EXR). Run in fp32 or "
                "bf16, or check the checkpoint"
            )
    for task, batch in batches.items():
        if tasks_registry.has(task):
            for note in tasks_registry.get(task).batch_notes(list(batch.results), names):
                host.note(f"{place(where)}{note}")
