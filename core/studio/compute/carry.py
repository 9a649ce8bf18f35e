"""Carry tasks over from a frame's verified bundle into its new commit (a re-run of other tasks keeps them).

Why through the bundle and not by leaving files alone: a frame is one transaction, so its new commit must hold
every layer, person and preview it claims. The carried layers are read back from the EXR (exact: the float
pointmap and seg ids round-trip unchanged, half-float layers re-encode to the same halves), the people from the
JSON; previews are redrawn from them, so a preview always shows the data beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...formats.bundle import CaptureFrame, CapturePerson
from ...pipeline.results import SegResult
from ...tasks import registry as tasks_registry
from ..sources.batches import TaskBatch
from .run_tasks import GIVEN_INPUT


def carried_seg(old: CaptureFrame | None, carry: Sequence[str]) -> SegResult | None:
    """The stored segmentation as a result, so that pose takes its boxes and the dense layers their mask from it
    when seg itself is carried over (the same inputs as when it was computed)."""
    if old is None or GIVEN_INPUT not in carry:
        return None
    return tasks_registry.get(GIVEN_INPUT).from_frame(old)


def seg_batch(results: Sequence[SegResult | None]) -> TaskBatch | None:
    """A TaskBatch of carried segmentations for `run_tasks(seg=…)` (None unless every image has one)."""
    if not results or any(r is None for r in results):
        return None
    return TaskBatch(GIVEN_INPUT, list(results))  # type: ignore[arg-type]


def apply_carry(frame: CaptureFrame, old: CaptureFrame | None, carry: Sequence[str]) -> None:
    """Put the carried tasks' data of `old` into `frame` (in place, each by its own `Task.carry`, in run order: a
    carried seg mask applies to carried points), model records in run order."""
    if old is None or not carry:
        return
    for name in tasks_registry.run_order(t for t in carry if tasks_registry.has(t)):
        tasks_registry.get(name).carry(frame, old)
    unknown = [t for t in carry if not tasks_registry.has(t)]
    for name in unknown:  # a plug-in not installed or trusted now: its declared layers are kept as they are
        for layer, spec in (old.task_layers or {}).items():
            if (spec.get("task") if isinstance(spec, Mapping) else getattr(spec, "task", None)) == name:
                frame.extra[layer], frame.task_layers[layer] = dict(old.extra[layer]), spec
    records = {m.get("task"): dict(m) for m in frame.models}
    records.update({m.get("task"): dict(m) for m in old.models if m.get("task") in carry})
    known = [t for t in records if isinstance(t, str) and tasks_registry.has(t)]
    frame.models = [records[t] for t in (*tasks_registry.run_order(known), *unknown) if t in records]


def people_from_doc(doc: Mapping[str, Any]) -> list[CapturePerson]:
    """The people of a bundle JSON document (for priming a sequence's tracker without reading the EXR)."""
    people = []
    for index, raw in enumerate(doc.get("people") or []):
        try:
            keypoints = np.array(
                [[np.nan if v is None else v for v in row] for row in raw["keypoints"]], dtype=np.float32
            )
            bbox = tuple(float(v) for v in raw["bbox"])
        except (KeyError, TypeError, ValueError):
            continue
        track = raw.get("track_id")
        people.append(
            CapturePerson(bbox, keypoints, str(raw.get("bbox_source", "image")), None, index, track)
        )
    return people
