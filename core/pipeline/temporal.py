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
from .tracking import PersonTracker


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


class BodyFilter:
    """One-Euro smoothing of one person's keypoints relative to their body centre.

    Why relative: the filter's cutoff rises with speed, so on a person who walks, every keypoint moves fast and
    a filter on image positions hardly smooths anything. Split each frame into the body centre (the mean of the
    keypoints weighted by how far their score is above `min_score`, so a point crossing the threshold moves the
    centre smoothly; averaging many points makes the centre's own noise small) and each keypoint's offset from
    it; each part gets its own One-Euro filter, so a still hand on a walking body is smoothed as a still hand,
    and a sudden move of the whole body (its centre) is followed at once. `relative=False`: one filter on the
    positions (the classic One-Euro use)."""

    def __init__(
        self, options: dict[str, float], min_score: float, *, relative: bool = True, centre_beta: float = 1.0
    ) -> None:
        self.offsets = OneEuroFilter(**options)
        self.centre = OneEuroFilter(**{**options, "beta": centre_beta}) if relative else None
        self.min_score = min_score

    def reset(self) -> None:
        self.offsets.reset()
        if self.centre is not None:
            self.centre.reset()

    def body_centre(self, kp: np.ndarray) -> np.ndarray:
        """(2,) the score-weighted centre of (N, 3) keypoints (the plain mean of the finite ones if none counts)."""
        finite = np.isfinite(kp).all(axis=1)
        weights = np.where(finite, np.clip(kp[:, 2] - self.min_score, 0.0, None), 0.0)
        if not weights.sum() > 0:
            weights = finite.astype(np.float64)
        if not weights.sum() > 0:
            return np.zeros(2)
        return (np.where(finite[:, None], kp[:, :2], 0.0) * weights[:, None]).sum(axis=0) / weights.sum()

    def __call__(self, kp: np.ndarray) -> np.ndarray:
        """Smoothed (N, 2) positions of (N, 3) float64 keypoints; points below `min_score` come back as they are
        and restart their filter."""
        low = (kp[:, 2] < self.min_score)[:, None]
        if self.centre is None:
            smoothed = self.offsets(kp[:, :2])
        else:
            centre = self.body_centre(kp)
            smoothed = self.centre(centre)[None, :] + self.offsets(kp[:, :2] - centre[None, :])
        if low.any():
            self.offsets.reset(np.broadcast_to(low, smoothed.shape))
        return np.where(low, kp[:, :2], smoothed)

    def prime(self, kp: np.ndarray) -> None:
        """State from keypoints that did not come through this filter (speeds start at 0)."""
        low = ~np.isfinite(kp).all(axis=1) | (kp[:, 2] < self.min_score)
        centre = np.zeros(2) if self.centre is None else self.body_centre(kp)
        self.offsets.x = np.where(low[:, None], np.nan, kp[:, :2] - centre[None, :])
        self.offsets.dx = np.zeros_like(self.offsets.x)
        if self.centre is not None:
            self.centre.x, self.centre.dx = centre, np.zeros(2)


class KeypointSmoother:
    """Streams PoseResults frame by frame; returns smoothed copies with `track_id` set on every person.

    Track ids come from `tracking.PersonTracker` (match "order": person i is track i; "iou": boxes matched to
    the tracks' predicted boxes, a person who leaves and comes back re-identified; see its module). Keypoints go
    through a `BodyFilter` per track (relative to the body centre unless `relative=False`). Keypoints below
    `min_score` are passed through unfiltered and restart their filter when seen again; a track seen again after
    missed frames restarts its filter too (the filter assumes one frame per step, so its old state would read the
    gap as a one-frame jump). `smooth=False` only tracks: keypoints are returned unchanged, with their `track_id`.
    """

    def __init__(
        self,
        fps: float = 30.0,
        *,
        min_cutoff: float = 0.5,
        beta: float = 0.01,
        d_cutoff: float = 1.0,
        match: Literal["order", "iou"] = "iou",
        iou_threshold: float = 0.3,
        min_score: float = 0.3,
        max_missing: int = 5,
        smooth: bool = True,
        relative: bool = True,
        centre_beta: float = 1.0,
    ) -> None:
        self.tracker = PersonTracker(fps, match=match, iou_threshold=iou_threshold, max_missing=max_missing)
        self.options = {"fps": fps, "min_cutoff": min_cutoff, "beta": beta, "d_cutoff": d_cutoff}
        OneEuroFilter(**self.options)  # the options' errors now, not on the first person
        self.min_score, self.smooth, self.relative, self.centre_beta = (
            min_score,
            smooth,
            relative,
            centre_beta,
        )
        self.filters: dict[int, BodyFilter] = {}

    def _filter(self, tid: int) -> BodyFilter:
        if tid not in self.filters:
            self.filters[tid] = BodyFilter(
                self.options, self.min_score, relative=self.relative, centre_beta=self.centre_beta
            )
        return self.filters[tid]

    def prime(self, people: Sequence[PersonPose], next_id: int = 0) -> None:
        """Continue from people that did not come through this smoother (a resumed run's last committed frame):
        their tracks, boxes and keypoints become the state, so track ids carry on. The filter's speed starts at 0
        (it is not stored), so smoothing after a resume may differ slightly from an uninterrupted run."""
        tracked = [p for p in people if p.track_id is not None]
        self.tracker.prime({int(p.track_id): p.bbox for p in tracked}, next_id)  # type: ignore[arg-type]
        self.filters = {}
        for person in tracked:
            self._filter(int(person.track_id)).prime(np.asarray(person.keypoints, dtype=np.float64))  # type: ignore[arg-type]

    def update(self, result: PoseResult) -> PoseResult:
        return replace(result, people=self.update_people(result.people))

    def update_people(self, people_in: Sequence[Any]) -> list[Any]:
        """One frame's people (any dataclass with `bbox`, `keypoints` and `track_id`: PersonPose, or a capture
        bundle's CapturePerson), in frame order; returns tracked (and smoothed) copies."""
        people_in = list(people_in)
        ids = self.tracker.assign([p.bbox for p in people_in])
        people = []
        for person, tid in zip(people_in, ids):
            filt = self._filter(tid)
            if tid in self.tracker.returning:
                filt.reset()  # back after a gap: start afresh rather than smear the gap into one step
            if not self.smooth:
                people.append(replace(person, track_id=tid))
                continue
            kp = person.keypoints.astype(np.float64)
            out = kp.copy()
            out[:, :2] = filt(kp)
            people.append(replace(person, keypoints=out.astype(np.float32), track_id=tid))
        for tid in [t for t in self.filters if t not in self.tracker.tracks]:
            del self.filters[tid]  # forgotten by the tracker
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
