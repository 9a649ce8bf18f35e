"""Temporal smoothing: One-Euro keypoints per track, pointmap scale smoothing with consistent intrinsics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sapiens2_studio.core.pipeline import (
    KeypointSmoother,
    OneEuroFilter,
    PersonPose,
    PointmapResult,
    PoseResult,
    rescale_pointmap,
    smooth_pointmap_sequence,
    smooth_pose_sequence,
    smooth_scales,
)


def test_one_euro_reduces_jitter_and_follows_motion():
    rng = np.random.default_rng(0)
    t = np.arange(200) / 30.0
    truth = np.where(t < 3, 100.0, 100.0 + 300.0 * (t - 3))  # still, then fast motion
    noisy = truth + rng.normal(0, 2.0, t.shape)
    filt = OneEuroFilter(fps=30, min_cutoff=1.0, beta=0.05)
    out = np.array([float(filt(np.array([v]))[0]) for v in noisy])
    still = slice(20, 85)
    assert np.std(out[still] - truth[still]) < 0.5 * np.std(noisy[still] - truth[still])
    assert abs(out[-1] - truth[-1]) < 15.0  # no large lag during fast motion


def _frame(boxes_and_offsets, jitter_rng=None):
    people = []
    for box, offset in boxes_and_offsets:
        kp = np.zeros((308, 3), dtype=np.float32)
        kp[:, 0] = offset + np.arange(308)
        kp[:, 1] = offset
        kp[:, 2] = 0.9
        if jitter_rng is not None:
            kp[:, :2] += jitter_rng.normal(0, 1.0, (308, 2))
        people.append(PersonPose(box, kp))
    return PoseResult(people, (1000, 1000))


def test_iou_tracking_keeps_identities_when_order_swaps():
    a, b = (0.0, 0.0, 100.0, 200.0), (500.0, 0.0, 600.0, 200.0)
    frames = [_frame([(a, 0.0), (b, 500.0)]), _frame([(b, 500.0), (a, 0.0)]), _frame([(a, 0.0)])]
    out = smooth_pose_sequence(frames, fps=25)
    ids = [[p.track_id for p in f.people] for f in out]
    assert ids[0] == [0, 1] and ids[1] == [1, 0] and ids[2] == [0]
    # identical positions per track → smoothing leaves them unchanged (no cross-track mixing)
    assert np.allclose(out[1].people[0].keypoints, frames[1].people[0].keypoints)


def test_smoothing_reduces_keypoint_jitter_and_skips_low_scores():
    rng = np.random.default_rng(1)
    box = (0.0, 0.0, 100.0, 200.0)
    frames = [_frame([(box, 50.0)], rng) for _ in range(60)]
    frames[30].people[0].keypoints[7, :2] = (900.0, 900.0)
    frames[30].people[0].keypoints[7, 2] = 0.05  # a lost point: passed through, not smeared into its track
    out = smooth_pose_sequence(frames, fps=30, beta=0.0)
    raw = np.stack([f.people[0].keypoints[:, :2] for f in frames[10:]])
    smooth = np.stack([f.people[0].keypoints[:, :2] for f in out[10:]])
    clean = np.ones(308, dtype=bool)
    clean[7] = False
    assert smooth[:, clean].std(axis=0).mean() < 0.6 * raw[:, clean].std(axis=0).mean()
    assert out[30].people[0].keypoints[7, :2].tolist() == [900.0, 900.0]
    assert abs(float(out[31].people[0].keypoints[7, 0]) - 57.0) < 5.0
    assert all(
        f.people[0].keypoints[:, 2].tolist() == g.people[0].keypoints[:, 2].tolist()
        for f, g in zip(frames, out)
    )


def test_order_matching_and_option_errors():
    s = KeypointSmoother(match="order")
    r = s.update(_frame([((0, 0, 1, 1), 0.0), ((5, 5, 6, 6), 1.0)]))
    assert [p.track_id for p in r.people] == [0, 1]
    with pytest.raises(ValueError, match="match"):
        KeypointSmoother(match="hungarian")


def test_scale_smoothing_methods():
    scales = [1.0, 1.0, 5.0, 1.0, 1.0]
    assert smooth_scales(scales, "median", window=3) == [1.0, 1.0, 1.0, 1.0, 1.0]
    assert smooth_scales(scales, "global") == [1.0] * 5
    ema = smooth_scales(scales, "ema", alpha=0.5)
    assert ema[:2] == [1.0, 1.0] and ema[2] == 3.0
    with pytest.raises(ValueError, match="method"):
        smooth_scales(scales, "mean")


def test_rescaled_pointmap_stays_consistent_with_its_intrinsics():
    points = torch.tensor([[[0.4, -0.2, 2.0]]])
    result = PointmapResult(points, 0.5, (1000.0, 1000.0, 320.0, 240.0))
    new = rescale_pointmap(result, 0.8)
    assert (
        new.scale == 0.8
        and new.intrinsics[0] == pytest.approx(625.0)
        and new.intrinsics[2:] == (320.0, 240.0)
    )
    X, Y, Z = new.points[0, 0].tolist()
    fx, fy, cx, cy = new.intrinsics
    X0, Y0, Z0 = points[0, 0].tolist()
    assert fx * X / Z + cx == pytest.approx(1000.0 * X0 / Z0 + 320.0)  # same pixel
    assert fy * Y / Z + cy == pytest.approx(1000.0 * Y0 / Z0 + 240.0)
    assert pytest.approx(Z0 * 0.5 / 0.8) == Z  # depth follows the smoothed scale
    seq = smooth_pointmap_sequence([result, new, result], method="global")
    assert len({r.scale for r in seq}) == 1


def test_person_leaving_and_returning_keeps_id_and_restarts_the_filter():
    """Track ids survive a short absence; the first frame back is not dragged toward the pre-gap position."""
    a, b = (0.0, 0.0, 100.0, 200.0), (500.0, 0.0, 600.0, 200.0)
    frames = [_frame([(a, 0.0), (b, 500.0)]) for _ in range(5)]
    frames += [_frame([(a, 0.0)]) for _ in range(3)]  # b leaves for 3 frames …
    frames += [_frame([(a, 0.0), ((520.0, 0.0, 620.0, 200.0), 520.0)])]  # … and comes back 20 px further
    frames += [_frame([(a, 0.0), ((900.0, 0.0, 1000.0, 200.0), 900.0)])]  # a new person far away
    out = smooth_pose_sequence(frames, fps=25, beta=0.0)
    assert [p.track_id for p in out[8].people] == [0, 1]
    assert np.allclose(out[8].people[1].keypoints, frames[8].people[1].keypoints)
    assert [p.track_id for p in out[9].people] == [0, 2]


def test_tracking_only_leaves_keypoints_unchanged():
    rng = np.random.default_rng(2)
    box = (0.0, 0.0, 100.0, 200.0)
    frames = [_frame([(box, 50.0)], rng) for _ in range(4)]
    smoother = KeypointSmoother(25, smooth=False)
    out = [smoother.update(f) for f in frames]
    assert all(o.people[0].track_id == 0 for o in out)
    assert all(np.array_equal(o.people[0].keypoints, f.people[0].keypoints) for o, f in zip(out, frames))
