"""Track ids of a sequence (the CLI's pass, `core/studio/compute/sequence_pass.py`, which every front-end runs): two people who
cross (one hidden behind the other for a few frames) and a person who walks out of the frame and comes back two
seconds later keep their ids, with boxes and keypoints as a noisy detector and pose model give them, in a
shuffled order per frame."""

from __future__ import annotations

import numpy as np
import pytest
import sequence_truth as truth
from sapiens2_studio.core.formats.bundle import CaptureFrame
from sapiens2_studio.core.pipeline import KeypointSmoother, PersonPose
from sapiens2_studio.core.pipeline.tracking import PersonTracker
from sapiens2_studio.core.studio.compute.sequence_pass import SequencePass
from sapiens2_studio.core.studio.jobs.stages import canonical_frame


def _ids_by_truth(clip, assign) -> dict[int, set[int]]:
    """truth person -> the set of track ids they got over the clip."""
    seen: dict[int, set[int]] = {}
    for observations in clip:
        for obs, tid in zip(observations, assign(observations)):
            seen.setdefault(obs.truth, set()).add(tid)
    return seen


@pytest.fixture(scope="module")
def clip():
    frames = truth.crossing_and_return()
    present = [{o.truth for o in f} for f in frames]
    # the clip does what it says: B is hidden during the crossing and away for longer than a track is kept
    hidden = [i for i, p in enumerate(present) if p == {0} and i < 80]
    away = [i for i, p in enumerate(present) if p == {0} and i >= 80]
    assert 5 <= len(hidden) <= 12, hidden  # about 0.4 s
    assert len(away) > 2 * 24 and away[-1] + 1 < len(frames), "B leaves for 2 s and comes back"
    return frames


@pytest.mark.parametrize("smooth", [False, True])
def test_ids_stable_through_crossing_and_reentry_in_the_cli_pass(clip, smooth):
    """The pass the CLI runs (and ComfyUI's nodes, through core/studio/jobs/sequence_batch.py), on capture frames."""
    passer = SequencePass(truth.FPS, smooth=smooth)

    def assign(observations):
        frame = CaptureFrame(
            width=truth.WIDTH,
            height=truth.HEIGHT,
            people=[PersonPose(o.bbox, o.keypoints.copy()) for o in observations],
        )
        canonical_frame(frame)
        passer.computed(frame, ["pose"])
        return [p.track_id for p in frame.people]

    ids = _ids_by_truth(clip, assign)
    assert len(ids[0]) == len(ids[1]) == 1, ids
    assert ids[0] != ids[1]


def test_each_person_keeps_one_id(clip):
    smoother = KeypointSmoother(truth.FPS, smooth=False)
    ids = _ids_by_truth(clip, lambda obs: [p.track_id for p in smoother.update_people(
        [PersonPose(o.bbox, o.keypoints) for o in obs])])  # fmt: skip
    assert ids == {0: {0}, 1: {1}}


def test_without_motion_and_reidentification_ids_break(clip):
    """What the two rules fix: matching on the last box alone (motion_weight 0) and forgetting a lost person
    (forget_seconds 0) split B into several tracks on this clip."""
    tracker = PersonTracker(truth.FPS, motion_weight=0.0, forget_seconds=0.0, reid_speed=0.0)
    ids = _ids_by_truth(clip, lambda obs: tracker.assign([o.bbox for o in obs]))
    assert len(ids[1]) > 1


def test_a_new_person_is_not_given_an_id_just_seen_elsewhere():
    """A person who disappears and, in the same frame, someone else appearing far away: a new id (the reach
    rule), while a person of a very different size is never taken for a lost one."""
    tracker = PersonTracker(25.0)
    a, b = (0.0, 0.0, 100.0, 200.0), (500.0, 0.0, 600.0, 200.0)
    assert tracker.assign([a, b]) == [0, 1]
    assert tracker.assign([a, (900.0, 0.0, 1000.0, 200.0)]) == [0, 2]
    for _ in range(30):
        tracker.assign([a])
    child = (500.0, 100.0, 540.0, 200.0)  # half the height of B, where B was
    assert tracker.assign([a, child]) == [0, 3]
    grown = (505.0, 0.0, 605.0, 205.0)
    assert tracker.assign([a, child, grown]) == [0, 3, 1]  # B's size, back where B was: B's id


def test_tracker_options_are_checked():
    with pytest.raises(ValueError, match="match"):
        PersonTracker(match="hungarian")
    with pytest.raises(ValueError, match="size_ratio"):
        PersonTracker(size_ratio=0.5)


def test_reidentified_person_restarts_the_filter(clip):
    """Back after two seconds: the first frame back is the raw keypoints (no smear from where B left)."""
    smoother = KeypointSmoother(truth.FPS)
    away = False
    for observations in clip:
        people = smoother.update_people([PersonPose(o.bbox, o.keypoints) for o in observations])
        present = {o.truth for o in observations}
        if 1 not in present:
            away = True
            continue
        if away:
            (back,) = [p for p, o in zip(people, observations) if o.truth == 1]
            (raw,) = [o for o in observations if o.truth == 1]
            assert back.track_id == 1
            np.testing.assert_allclose(back.keypoints[:, :2], raw.keypoints[:, :2], atol=1e-3)
            away = False


def _passed(keypoints: np.ndarray) -> np.ndarray:
    """(frames, K, 2) positions out of the CLI's smoothing pass for one person's (frames, K, 3) keypoints."""
    passer = SequencePass(truth.FPS, smooth=True)
    out = np.empty((*keypoints.shape[:2], 2))
    for i, kp in enumerate(keypoints):
        frame = CaptureFrame(
            width=truth.WIDTH, height=truth.HEIGHT, people=[PersonPose(truth.box_of(kp[:, :2]), kp.copy())]
        )
        canonical_frame(frame)
        passer.computed(frame, ["pose"])
        out[i] = frame.people[0].keypoints[:, :2]
    return out


def _jitter(error: np.ndarray) -> np.ndarray:
    """RMS frame-to-frame acceleration (px/frame²) of a (frames, K, 2) error, per keypoint: what a viewer sees as
    jitter (a smooth offset or a lag barely moves it, noise does)."""
    accel = error[2:] - 2 * error[1:-1] + error[:-2]
    return np.sqrt((accel**2).sum(-1).mean(0))


def test_smoothing_removes_jitter_and_follows_a_step_within_a_frame():
    """Known motion (a walk, every limb swinging at 0.5-1.5 Hz and 2-5 Hz) plus 2 px noise. Jitter: the noise
    that gets through (smoothed noisy input minus smoothed clean input, the filter being adaptive), as the
    acceleration of the keypoints: at least 3x less, for every part of the body. Lag: a sudden move of a
    quarter of the body height is followed on the frame it happens (within 10 % of the step, ≤ 1 frame)."""
    step_at, step = 180, 0.25
    clean, observed, body = truth.walk_with_step(step_at=step_at, step=step)
    clean_kp = np.concatenate([clean, np.full((*clean.shape[:2], 1), 0.9)], -1).astype(np.float32)
    smoothed, through = _passed(observed), _passed(clean_kp)
    still = slice(24, step_at)  # after the first second (the filter's start), before the step
    raw = _jitter(observed[still, :, :2] - clean[still])
    left = _jitter(smoothed[still] - through[still])
    ratio = raw.mean() / left.mean()
    assert ratio >= 3.0, ratio
    for group in range(4):  # torso/head, arms, hands, legs: each part, not only the slow ones
        part = body.group == group
        assert raw[part].mean() / left[part].mean() >= 3.0, (group, raw[part].mean() / left[part].mean())
    height = step * body.height
    errors = np.linalg.norm(smoothed[step_at : step_at + 4] - clean[step_at : step_at + 4], axis=-1).mean(-1)
    lag = int(np.argmax(errors < 0.1 * height))
    assert errors.min() < 0.1 * height and lag <= 1, errors
    print(
        f"jitter {raw.mean():.2f} -> {left.mean():.2f} px/frame² (x{ratio:.1f}); step followed after {lag} frames"
    )
