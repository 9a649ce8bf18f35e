"""Non-finite model output (NaN/inf), caught per frame before anything is written.

Why: a broken fp16 run or damaged weights make a model return NaN. The writers keep every file valid (JSON `null`,
zero/invalid EXR pixels), but without a word the user would see "nobody found" or an empty mask and blame the
photo. `report_nonfinite` (called by `run_tasks`, so every front-end gets it) notes each task's bad frames once;
`nonfinite_frames` lets a job refuse them instead (`--nonfinite error`). A pointmap whose scale gives no focal
length is noted too, since its frame records the default camera instead (`camera.reason`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..formats.arrays import BandedArray
from ..pipeline.postprocess import count_nonfinite
from .batches import TaskBatch, place
from .host import Host

NONFINITE_POLICIES = ("warn", "error")


def _bad(value: Any) -> int:
    """Number of NaN/inf entries of a tensor or array (0 for None)."""
    if value is None:
        return 0
    if isinstance(value, torch.Tensor):
        return count_nonfinite(value)
    if isinstance(value, BandedArray):
        return value.nonfinite()
    array = np.asarray(value)
    return int((~np.isfinite(array)).sum()) if np.issubdtype(array.dtype, np.floating) else 0


def nonfinite_count(task: str, result: Any) -> int:
    """NaN/inf values in one task result (for seg: in the network's logits, which the labels cannot show)."""
    if result is None:
        return 0
    if task == "pose":
        return sum(_bad(p.keypoints) + _bad(np.asarray(p.bbox, np.float64)) for p in result.people)
    if task == "seg":
        return int(getattr(result, "nonfinite", 0))
    if task == "normal":
        return _bad(result.normals)
    if task == "albedo":
        return _bad(result.albedo)
    if task == "pointmap":
        return _bad(result.points) + _bad(np.float64(result.scale))
    if task == "matting":
        return _bad(result.alpha) + _bad(result.foreground_premultiplied)
    return 0


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
    pointmap = batches.get("pointmap")
    if pointmap is not None:
        fallback = [
            (names[i], r.scale)
            for i, r in enumerate(pointmap.results)
            if getattr(r, "intrinsics_source", "pointmap") != "pointmap"
        ]
        if fallback:
            scales = ", ".join(f"{s:.4g}" for _, s in fallback[:3])
            host.note(
                f"{place(where)}{_listed([name for name, _ in fallback])}: the pointmap model predicted scale "
                f"{scales}, which gives no focal length; the default camera (fx = fy = 1.2·max(W, H), principal "
                "point at the centre) is used and recorded with its reason"
            )
