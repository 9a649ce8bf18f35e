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
import torch

from .. import catalogue
from ..formats.bundle import CaptureFrame, CapturePerson
from ..pipeline.results import SegResult
from .batches import TaskBatch
from .capture import MATTE_MASK_THRESHOLD


def carried_seg(old: CaptureFrame | None, carry: Sequence[str]) -> SegResult | None:
    """The stored segmentation as a result, so that pose takes its boxes and the dense layers their mask from it
    when seg itself is carried over (the same inputs as when it was computed)."""
    if old is None or "seg" not in carry or old.seg is None:
        return None
    return SegResult(torch.from_numpy(np.asarray(old.seg, dtype=np.int64)))


def seg_batch(results: Sequence[SegResult | None]) -> TaskBatch | None:
    """A TaskBatch of carried segmentations for `run_tasks(seg=…)` (None unless every image has one)."""
    if not results or any(r is None for r in results):
        return None
    return TaskBatch("seg", list(results))  # type: ignore[arg-type]


def apply_carry(frame: CaptureFrame, old: CaptureFrame | None, carry: Sequence[str]) -> None:
    """Put the carried tasks' data of `old` into `frame` (in place), model records in run order."""
    if old is None or not carry:
        return
    if "seg" in carry:
        frame.seg = None if old.seg is None else np.asarray(old.seg, dtype=np.int32)
        frame.mask = old.mask
    if "pose" in carry:
        frame.people = [
            CapturePerson(p.bbox, p.keypoints, p.bbox_source, None, i, p.track_id)
            for i, p in enumerate(old.people)
        ]
    if "normal" in carry:
        frame.normals = old.normals
    if "albedo" in carry:
        frame.albedo = old.albedo
    if "pointmap" in carry:
        points = old.points
        if points is not None and frame.mask is not None:  # a new seg mask applies to the carried points too
            points = np.where(np.asarray(frame.mask)[..., None] > 0.5, points, 0.0).astype(np.float32)
        frame.points = points
        frame.pointmap_scale = old.pointmap_scale
        frame.camera = dict(old.camera) if old.camera else frame.camera
    if "matting" in carry:
        frame.alpha, frame.foreground = old.alpha, old.foreground
        if frame.mask is None and old.alpha is not None:  # capture_frames' rule when only a matte gives one
            frame.mask = (np.asarray(old.alpha) >= MATTE_MASK_THRESHOLD).astype(np.float32)
    records = {m.get("task"): dict(m) for m in frame.models}
    records.update({m.get("task"): dict(m) for m in old.models if m.get("task") in carry})
    frame.models = [records[t] for t in catalogue.RUN_ORDER if t in records]


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
