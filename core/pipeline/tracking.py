"""Who is who across the frames of a sequence: person track ids from boxes alone, causal (one frame at a time).

Why a module of its own: the smoother (`temporal.KeypointSmoother`) and every engine's temporal pass need the
same ids for the same boxes, and the rules that make ids stable are all here:
- each track's box is predicted with its own motion before matching by IoU, so two people who cross (boxes on
  top of each other for a few frames) keep their ids instead of being matched by the order they come in; the
  tracks seen last are matched first, so a hidden person's predicted box cannot take the id of the one in front;
- a person unseen for longer than `max_missing` frames is *lost*, not forgotten: their id stays reserved for
  `forget_seconds`, and a new box of a similar height (within `size_ratio`) within reach of where they were
  (`reid_speed` body heights per second of absence) takes it back: a person who walks out of the frame and
  comes back keeps their id. Without appearance features this is a guess; the reach rule keeps it from
  taking an id away from someone who was just seen elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .errors import PipelineError

Box = tuple[float, float, float, float]


def box_iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _centre(box: Sequence[float]) -> tuple[float, float]:
    return (0.5 * (box[0] + box[2]), 0.5 * (box[1] + box[3]))


def _height(box: Sequence[float]) -> float:
    return max(float(box[3] - box[1]), 1e-6)


@dataclass
class Track:
    """One person's box state: where they were last seen, how many frames ago, how fast their box moved."""

    box: Box
    missed: int = 0  # frames since the track was last seen (0: seen in the last frame)
    velocity: tuple[float, float] = (0.0, 0.0)  # box centre, pixels per frame (smoothed)

    def predicted(self) -> Box:
        """The box one frame after the last frame, moved on by the track's own motion."""
        k = self.missed + 1
        dx, dy = self.velocity[0] * k, self.velocity[1] * k
        x1, y1, x2, y2 = self.box
        return (x1 + dx, y1 + dy, x2 + dx, y2 + dy)


class PersonTracker:
    """Assigns a track id to every box of each frame, in frame order (see the module's docstring).

    `assign(boxes)` returns one id per box and `returning` (the ids that were unseen in the last frame and are
    back, so their keypoint filters restart). `match="order"`: box i is track i (no tracking)."""

    def __init__(
        self,
        fps: float = 30.0,
        *,
        match: str = "iou",
        iou_threshold: float = 0.3,
        max_missing: int = 5,
        reid_speed: float = 10.0,
        size_ratio: float = 1.5,
        forget_seconds: float = 10.0,
        motion_weight: float = 0.5,
    ) -> None:
        if match not in ("order", "iou"):
            raise PipelineError(f"match must be 'order' or 'iou', got {match!r}")
        if not fps > 0 or reid_speed < 0 or size_ratio < 1 or forget_seconds < 0:
            raise PipelineError("fps must be > 0, reid_speed and forget_seconds ≥ 0, size_ratio ≥ 1")
        self.fps, self.match, self.iou_threshold, self.max_missing = (
            float(fps),
            match,
            iou_threshold,
            max_missing,
        )
        self.reid_speed, self.size_ratio, self.motion_weight = reid_speed, size_ratio, motion_weight
        self.forget_frames = max(max_missing, math.ceil(forget_seconds * self.fps))
        self.tracks: dict[int, Track] = {}
        self.next_id = 0
        self.returning: set[int] = set()

    def assign(self, boxes: Sequence[Sequence[float]]) -> list[int]:
        boxes = [tuple(float(v) for v in b) for b in boxes]
        if self.match == "order":
            ids = list(range(len(boxes)))
            self.returning = {i for i in ids if i in self.tracks and self.tracks[i].missed > 0}
            self._update(boxes, ids)  # type: ignore[arg-type]
            return ids
        ids: list[int | None] = [None] * len(boxes)
        self._match_iou(boxes, ids)
        self._match_lost(boxes, ids)
        for i in range(len(boxes)):
            if ids[i] is None:
                while self.next_id in self.tracks:
                    self.next_id += 1
                ids[i] = self.next_id
                self.next_id += 1
        out = [int(i) for i in ids]  # type: ignore[arg-type]
        self.returning = {i for i in out if i in self.tracks and self.tracks[i].missed > 0}
        self._update(boxes, out)  # type: ignore[arg-type]
        return out

    def _match_iou(self, boxes: list[Box], ids: list[int | None]) -> None:
        """Greedy matching of boxes to the recent tracks' predicted boxes, best IoU first, the tracks seen most
        recently first (a matching cascade): while one person is hidden behind another, the hidden one's
        predicted box lies on the one in front, and could otherwise take their id."""
        used: set[int] = set()
        for missed in range(self.max_missing + 1):
            pairs = sorted(
                (
                    (box_iou(box, track.predicted()), -i, -tid, i, tid)
                    for i, box in enumerate(boxes)
                    if ids[i] is None
                    for tid, track in self.tracks.items()
                    if track.missed == missed
                ),
                reverse=True,
            )
            for iou, _, _, i, tid in pairs:
                if iou < self.iou_threshold:
                    break
                if ids[i] is None and tid not in used:
                    ids[i] = tid
                    used.add(tid)

    def _match_lost(self, boxes: list[Box], ids: list[int | None]) -> None:
        """Re-identification: boxes left over take the id of a track not matched in this frame whose height is
        similar and whose last (or predicted) place is within reach, nearest first (in body heights)."""
        taken = {tid for tid in ids if tid is not None}
        pairs = []
        for i, box in enumerate(boxes):
            if ids[i] is not None:
                continue
            for tid, track in self.tracks.items():
                if tid in taken:
                    continue
                height = _height(track.box)
                if max(_height(box) / height, height / _height(box)) > self.size_ratio:
                    continue
                reach = self.reid_speed * (track.missed + 1) / self.fps
                (cx, cy), places = _centre(box), (track.box, track.predicted())
                distance = min(math.hypot(cx - _centre(p)[0], cy - _centre(p)[1]) for p in places) / height
                if distance <= reach:
                    pairs.append((distance, i, tid))
        for _, i, tid in sorted(pairs):
            if ids[i] is None and tid not in taken:
                ids[i] = tid
                taken.add(tid)

    def _update(self, boxes: list[Box], ids: list[int]) -> None:
        for box, tid in zip(boxes, ids):
            track = self.tracks.get(tid)
            if track is None or track.missed > self.max_missing:
                self.tracks[tid] = Track(box)  # new, or back after being lost: its old motion says nothing
                continue
            (ox, oy), (nx, ny) = _centre(track.box), _centre(box)
            step = track.missed + 1
            w = self.motion_weight
            velocity = (
                (1 - w) * track.velocity[0] + w * (nx - ox) / step,
                (1 - w) * track.velocity[1] + w * (ny - oy) / step,
            )
            self.tracks[tid] = Track(box, 0, velocity)
        seen = set(ids)
        for tid in list(self.tracks):
            if tid in seen:
                continue
            track = self.tracks[tid]
            if track.missed + 1 > self.forget_frames:
                del self.tracks[tid]
            else:
                track.missed += 1

    def prime(self, boxes: dict[int, Sequence[float]], next_id: int = 0) -> None:
        """Continue from a frame that did not come through this tracker (a resumed run's last committed frame):
        its people's ids and boxes become the tracks (their motion starts at 0, lost tracks are not known)."""
        self.tracks = {int(tid): Track(tuple(float(v) for v in box)) for tid, box in boxes.items()}  # type: ignore[misc]
        self.next_id = max([next_id, self.next_id, *(t + 1 for t in self.tracks)])
        self.returning = set()
