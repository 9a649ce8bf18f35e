"""One person's keypoint tracks -> a sized, solved humanoid rig: clean-up, measurements, rest pose, rotations.

This is the whole bpy-free half of the rig import (``build.rig`` turns its result into an armature and keys);
scripts and tests call it directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .poses import fill_gaps
from .rig_filters import CleanUp, contact_weights, lock_feet
from .rig_gaps import refill_with_trust
from .rig_keypoints import KeypointIndex
from .rig_measure import measure
from .rig_skeleton import Measurements, RestPose, rest_pose
from .rig_solve import Motion, solve


@dataclass
class RigSettings:
    """Clean-up and shape options for one rig (the import options' ``rig_*`` fields)."""

    smoothing: bool = (
        True  # the solve's speed-adaptive clean-up (False: the keypoints are followed as they are)
    )
    strength: float = 1.0  # clean-up strength (rig_filters.CleanUp.from_strength): 2 = twice as smooth
    foot_lock: bool = False
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)  # world up, for ground contact
    with_root: bool = False
    with_heel: bool = False
    rest_bend: float = 0.0  # degrees of elbow/knee flexion in the rest pose (Rigify needs a little)
    unit: float = 1.0  # scene units per metre (the import's Scale), for the foot-contact thresholds


@dataclass
class SolvedRig:
    measurements: Measurements
    rest: RestPose
    motion: Motion
    tracks: np.ndarray  # (T, K, 3) cleaned keypoints the rig was solved from
    keypoint_names: list[str] = field(default_factory=list)
    contacts: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


def clean_tracks(
    tracks: np.ndarray, valid: np.ndarray, times: np.ndarray, fps: float, kp: KeypointIndex, s: RigSettings
) -> tuple[np.ndarray, Measurements, dict[str, list[tuple[int, int]]], np.ndarray]:
    """Low-confidence samples interpolated in time, the body measured (confident samples only), the dropped
    samples re-placed from the body's rigid shape (``rig_gaps.refill``), then feet locked (so the contact
    detector never sees a dropped joint). No smoothing here: the clean-up, when asked for, runs in the solve.
    Also returns (T, K) the trust of each sample (``rig_gaps.refill_with_trust``) for the solve's clean-up."""
    fallback = np.where(valid[..., None], tracks, np.nan)
    fallback = np.nan_to_num(np.nanmedian(fallback, axis=0)) if valid.any() else np.zeros(tracks.shape[1:])
    cleaned = fill_gaps(tracks, valid, fallback, times)
    m = measure(cleaned, valid, kp)
    cleaned, trust = refill_with_trust(cleaned, valid, kp, m)
    contacts: dict[str, list[tuple[int, int]]] = {}
    if s.foot_lock and cleaned.shape[0] > 2:
        cleaned, contacts = lock_feet(
            cleaned, kp, fps, np.array(s.up), max_speed=0.25 * s.unit, max_height=0.04 * s.unit
        )
    return cleaned, m, contacts, trust


def solve_person(
    tracks: np.ndarray,
    valid: np.ndarray,
    names: list[str],
    fps: float,
    settings: RigSettings | None = None,
    times: np.ndarray | None = None,
) -> SolvedRig:
    """Everything for one person: (T, K, 3) tracks in the Blender frame, (T, K) confident samples."""
    s = settings or RigSettings()
    kp = KeypointIndex.from_names(names)
    times = (
        np.arange(tracks.shape[0], dtype=np.float64) if times is None else np.asarray(times, dtype=np.float64)
    )
    cleaned, m, contacts, trust = clean_tracks(np.asarray(tracks, dtype=np.float64), valid, times, fps, kp, s)
    rest = rest_pose(m, with_root=s.with_root, with_heel=s.with_heel, bend=s.rest_bend)
    cleanup = CleanUp.from_strength(s.strength) if s.smoothing else None
    frames = cleaned.shape[0]
    planted = (
        {side: contact_weights(runs, frames) for side, runs in contacts.items()} if s.foot_lock else None
    )
    motion = solve(cleaned, kp, m, rest, cleanup, fps, planted, trust)
    return SolvedRig(m, rest, motion, cleaned, list(names), contacts)
