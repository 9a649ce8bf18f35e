"""Temporal smoothing for sequences: One-Euro filtering of keypoints per person track, and smoothing of the
pointmap scale across frames (the per-frame scale is what makes video depth "breathe", sapiens2 issue #11).

One-Euro (Casiez et al. 2012): a low-pass filter whose cutoff rises with speed — still points stop jittering,
fast motion does not lag. cutoff = min_cutoff + beta·|speed| (Hz; speed in pixels per second).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np
import torch

from .errors import PipelineError
from .postprocess import Intrinsics
from .results import PersonPose, PointmapResult, PoseResult


def _alpha(cutoff: np.ndarray | float, rate: float) -> np.ndarray | float:
    tau = 1.0 / (2.0 * math.pi * np.asarray(cutoff))
    return 1.0 / (1.0 + tau * rate)


class OneEuroFilter:
    """One-Euro filter over arrays of any fixed shape (e.g. (308, 2) keypoint positions)."""

    def __init__(self, fps: float = 30.0, min_cutoff: float = 1.0, beta: float = 0.01, d_cutoff: float = 1.0):
        if fps <= 0 or min_cutoff <= 0 or d_cutoff <= 0 or beta < 0:
            raise PipelineError("fps, min_cutoff and d_cutoff must be > 0 and beta ≥ 0")
        self.rate, self.min_cutoff, self.beta, self.d_cutoff = float(fps), min_cutoff, beta, d_cutoff
        self.x: np.ndarray | None = None
        self.dx: np.ndarray | None = None

    def reset(self, where: np.ndarray | None = None) -> None:
        """Forget the state (everywhere, or only where the boolean mask `where` is True)."""
        if where is None or self.x is None or self.dx is None:
            self.x = self.dx = None
            return
        self.dx = np.where(where, 0.0, self.dx)
        self.x = np.where(where, np.nan, self.x)

    def __call__(self, value: np.ndarray) -> np.ndarray:
        value = np.asarray(value, dtype=np.float64)
        if self.x is None or self.dx is None:
            self.x, self.dx = value.copy(), np.zeros_like(value)
            return value.copy()
        fresh = np.isnan(self.x)
        prev = np.where(fresh, value, self.x)
        dx = (value - prev) * self.rate
        edx = self.dx + _alpha(self.d_cutoff, self.rate) * (dx - self.dx)
        cutoff = self.min_cutoff + self.beta * np.abs(edx)
        x = prev + _alpha(cutoff, self.rate) * (value - prev)
        self.x, self.dx = x, np.where(fresh, 0.0, edx)
        return x


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


class KeypointSmoother:
    """Streams PoseResults frame by frame; returns smoothed copies with `track_id` set on every person.

    match "order": person i is track i. "iou": greedy matching of boxes to the tracks' last boxes (IoU ≥
    `iou_threshold`), new tracks for the rest; tracks unseen for `max_missing` frames are dropped.
    Keypoints below `min_score` are passed through unfiltered and restart their filter when seen again; a
    track seen again after missed frames restarts its filter too (the filter assumes one frame per step, so
    its old state would read the gap as a one-frame jump). `smooth=False` only tracks: keypoints are returned
    unchanged, with their `track_id`.
    """

    def __init__(
        self,
        fps: float = 30.0,
        *,
        min_cutoff: float = 1.0,
        beta: float = 0.01,
        d_cutoff: float = 1.0,
        match: Literal["order", "iou"] = "iou",
        iou_threshold: float = 0.3,
        min_score: float = 0.3,
        max_missing: int = 5,
        smooth: bool = True,
    ) -> None:
        if match not in ("order", "iou"):
            raise PipelineError(f"match must be 'order' or 'iou', got {match!r}")
        self.options = {"fps": fps, "min_cutoff": min_cutoff, "beta": beta, "d_cutoff": d_cutoff}
        self.match, self.iou_threshold, self.min_score, self.max_missing = (
            match,
            iou_threshold,
            min_score,
            max_missing,
        )
        self.tracks: dict[
            int, tuple[OneEuroFilter, tuple[float, ...], int]
        ] = {}  # id → filter, last box, missed
        self._next_id = 0
        self.smooth = smooth

    def _assign(self, people: Sequence[Any]) -> list[int]:
        if self.match == "order":
            return list(range(len(people)))
        pairs = sorted(
            (
                (box_iou(p.bbox, box), i, tid)
                for i, p in enumerate(people)
                for tid, (_, box, _) in self.tracks.items()
            ),
            reverse=True,
        )
        ids: list[int | None] = [None] * len(people)
        used: set[int] = set()
        for iou, i, tid in pairs:
            if iou < self.iou_threshold:
                break
            if ids[i] is None and tid not in used:
                ids[i] = tid
                used.add(tid)
        for i in range(len(people)):
            if ids[i] is None:
                while self._next_id in self.tracks:
                    self._next_id += 1
                ids[i] = self._next_id
                self._next_id += 1
        return [int(i) for i in ids]  # type: ignore[arg-type]

    def prime(self, people: Sequence[PersonPose], next_id: int = 0) -> None:
        """Continue from people that did not come through this smoother (a resumed run's last committed frame):
        their tracks, boxes and keypoints become the state, so track ids carry on. The filter's speed starts at 0
        (it is not stored), so smoothing after a resume may differ slightly from an uninterrupted run."""
        self.tracks = {}
        for person in people:
            if person.track_id is None:
                continue
            filt = OneEuroFilter(**self.options)
            kp = np.asarray(person.keypoints, dtype=np.float64)
            low = ~np.isfinite(kp).all(axis=1) | (kp[:, 2] < self.min_score)
            filt.x = np.where(low[:, None], np.nan, kp[:, :2])
            filt.dx = np.zeros_like(filt.x)
            self.tracks[int(person.track_id)] = (filt, tuple(float(v) for v in person.bbox), 0)
        self._next_id = max([next_id, self._next_id, *(t + 1 for t in self.tracks)])

    def update(self, result: PoseResult) -> PoseResult:
        return replace(result, people=self.update_people(result.people))

    def update_people(self, people_in: Sequence[Any]) -> list[Any]:
        """One frame's people (any dataclass with `bbox`, `keypoints` and `track_id`: PersonPose, or a capture
        bundle's CapturePerson), in frame order; returns tracked (and smoothed) copies."""
        people_in = list(people_in)
        ids = self._assign(people_in)
        people = []
        for person, tid in zip(people_in, ids):
            filt = self.tracks[tid][0] if tid in self.tracks else OneEuroFilter(**self.options)
            if tid in self.tracks and self.tracks[tid][2] > 0:
                filt.reset()  # back after a gap: start afresh rather than smear the gap into one step
            self.tracks[tid] = (filt, tuple(person.bbox), 0)
            if not self.smooth:
                people.append(replace(person, track_id=tid))
                continue
            kp = person.keypoints.astype(np.float64)
            low = (kp[:, 2] < self.min_score)[:, None]
            smoothed = filt(kp[:, :2])
            if low.any():
                filt.reset(np.broadcast_to(low, smoothed.shape))
            out = kp.copy()
            out[:, :2] = np.where(low, kp[:, :2], smoothed)
            people.append(replace(person, keypoints=out.astype(np.float32), track_id=tid))
        seen = set(ids)
        for tid in list(self.tracks):
            if tid not in seen:
                filt, box, missed = self.tracks[tid]
                if missed + 1 > self.max_missing:
                    del self.tracks[tid]
                else:
                    self.tracks[tid] = (filt, box, missed + 1)
        return people


def smooth_pose_sequence(results: Sequence[PoseResult], fps: float = 30.0, **options) -> list[PoseResult]:
    """One-Euro smoothing of a whole sequence (see `KeypointSmoother` for the options)."""
    smoother = KeypointSmoother(fps, **options)
    return [smoother.update(r) for r in results]


def smooth_scales(
    scales: Sequence[float],
    method: Literal["median", "global", "ema"] = "median",
    *,
    window: int = 9,
    alpha: float = 0.2,
) -> list[float]:
    """Smooth per-frame pointmap scales: centred running median (default), one global median (static
    camera and focal length), or a causal exponential moving average (streaming)."""
    values = np.asarray(scales, dtype=np.float64)
    if values.size == 0:
        return []
    if method == "global":
        return [float(np.median(values))] * values.size
    if method == "ema":
        if not 0 < alpha <= 1:
            raise PipelineError(f"alpha must be in (0, 1], got {alpha}")
        out, acc = [], float(values[0])
        for v in values:
            acc = acc + alpha * (float(v) - acc)
            out.append(acc)
        return out
    if method == "median":
        if window < 1:
            raise PipelineError(f"window must be ≥ 1, got {window}")
        half = window // 2
        return [float(np.median(values[max(0, i - half) : i + half + 1])) for i in range(values.size)]
    raise PipelineError(f"method must be 'median', 'global' or 'ema', got {method!r}")


def rescale_pointmap(result: PointmapResult, new_scale: float) -> PointmapResult:
    """Re-express a pointmap with another scale, keeping every point on its pixel's ray.

    Sapiens2 ties both the depth and the focal length to the scale: Z = Z_canonical / s and
    fx = 768 / (s·r). Changing s to s' therefore multiplies the depth by s / s' and the focal length by s / s',
    while X and Y stay put (X = (u − cx)·Z / fx is unchanged when Z and fx scale together), so the points still
    reproject to their pixels with the new intrinsics.
    """
    if not new_scale > 0:
        raise PipelineError(f"scale must be positive, got {new_scale}")
    ratio = result.scale / new_scale
    fx, fy, cx, cy = result.intrinsics
    intr = Intrinsics(fx * ratio, fy * ratio, cx, cy).as_tuple()
    factor = torch.tensor([1.0, 1.0, ratio], dtype=result.points.dtype, device=result.points.device)
    return replace(result, points=result.points * factor, scale=float(new_scale), intrinsics=intr)


def smooth_pointmap_sequence(
    results: Sequence[PointmapResult], method: str = "median", **options
) -> list[PointmapResult]:
    """Smooth the scale across frames and rescale every frame's points and intrinsics accordingly."""
    smoothed = smooth_scales([r.scale for r in results], method, **options)  # type: ignore[arg-type]
    return [rescale_pointmap(r, s) for r, s in zip(results, smoothed)]
