"""The humanoid rig's bpy-free maths (blender_addon/parse/rig_*.py) against a known rotation-driven body.

The add-on's ``parse`` package is loaded by path under a private name (its parent package imports bpy), and the
ground truth comes from ``tests/blender/rig_truth.py``, the same generator the real-bpy check uses.
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
FRAMES = 300


def _load_common():
    spec = importlib.util.spec_from_file_location(
        "sapiens2_rig_truths_common", REPO / "tests" / "blender" / "rig_truths_common.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


C = _load_common()
P = C.load_parse("sapiens2_rig_test_parse")
NAMES = P["names"]
TRUTH = C.load("rig_truth")
BODY = lambda name: not any(f in name for f in ("thumb", "index", "middle", "ring", "pinky"))  # noqa: E731


@pytest.fixture(scope="module")
def truth():
    return TRUTH.truth(P, FRAMES)


def _solve(points, valid, smoothing):
    settings = P["rig_pipeline"].RigSettings(smoothing=smoothing)  # clean-up at its default strength
    return P["rig_pipeline"].solve_person(points, valid, NAMES, TRUTH.FPS, settings)


def _errors(truth, solved):
    """Per-keypoint position errors (T, K') in metres and per-bone rotation errors (T, B) in degrees."""
    return C.errors(P, truth, solved)


def test_exact_keypoints_give_back_the_exact_rig(truth):
    solved = _solve(truth["keypoints"], np.ones(truth["keypoints"].shape[:2], bool), smoothing=False)
    for bone in ("upper_arm", "forearm", "thigh", "shin", "clavicle", "neck", "index2", "thumb1"):
        assert solved.measurements.lengths[bone] == pytest.approx(truth["m"].lengths[bone], abs=1e-6)
    position, rotation = _errors(truth, solved)
    # Without clean-up nothing is filtered: the solve gives the rig back on every frame, ends included.
    print(
        f"exact keypoints: joints max {1000 * position.max():.4f} mm, rotations max {rotation.max():.4f} deg"
    )
    assert position.max() < 1e-3  # metres
    assert rotation.max() < 0.5  # degrees, every bone including fingers


def _report(label, rotation, names):
    groups = {
        "torso": ("hips", "spine", "spine1", "spine2", "neck", "head"),
        "clavicles": ("clavicle",),
        "upper arms": ("upper_arm",),
        "forearms": ("forearm",),
        "hands": ("hand",),
        "legs": ("thigh", "shin"),
        "feet": ("foot", "toe"),
        "fingers": tuple(f"{f}{k}" for f in ("thumb", "index", "middle", "ring", "pinky") for k in (1, 2, 3)),
    }
    for group, bones in groups.items():
        r = rotation[:, [b for b, n in enumerate(names) if n.split(".")[0] in bones]]
        print(f"{label} {group}: max {r.max():.2f} (first/last frame excluded {r[1:-1].max():.2f}) "
              f"p99 {np.percentile(r, 99):.2f} mean {r.mean():.2f} deg")  # fmt: skip


def test_noisy_and_dropped_keypoints_within_1cm_and_3_degrees(truth):
    """1.5 mm noise per axis, 5 % of joint-frames thrown 20 cm off with a low score, smoothing on. NOT the issue's
    bound (issue 28 asks 3 deg): what the speed-adaptive clean-up reaches while it keeps a 4 Hz motion within 5 %,
    held as a regression bound (measured: joints max 0.78 cm, body bones max 4.49 deg on the upper arm, 4.35 on
    the hands, 4.16 on the forearms, 1.36 on the legs). The clip's first
    and last frame are filtered from one side only and keep about twice the noise (information, not a bug:
    measured over 20 noise draws they reach 4.0 deg at 1.5 mm, 2.9 deg at 1.0 mm, see the next tests)."""
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.0015, drop=0.05)
    solved = _solve(noisy, scores >= 0.3, smoothing=True)
    position, rotation = _errors(truth, solved)
    body = [b for b, n in enumerate(solved.rest.names) if BODY(n)]
    print(
        f"position cm: mean {100 * position.mean():.3f} p99 {100 * np.percentile(position, 99):.3f} "
        f"max {100 * position.max():.3f}; body rotation deg: mean {rotation[:, body].mean():.2f} "
        f"p99 {np.percentile(rotation[:, body], 99):.2f} max {rotation[:, body].max():.2f} "
        f"(first/last frame excluded {rotation[1:-1, body].max():.2f})"
    )
    _report("1.5 mm", rotation, solved.rest.names)
    assert position.max() < 0.01
    assert rotation[:, body].max() < 5.0


@pytest.mark.parametrize("seed", [6, 7, 8, 9])
def test_other_noise_draws_keep_the_maximum(seed):
    """The regression bound must not hang on one lucky noise draw: four more (120 frames each; measured joints
    max 0.74-1.42 cm, body bones max 3.75-4.99 deg -- above the issue's 1 cm / 3 deg)."""
    short = TRUTH.truth(P, 120)
    noisy, scores = C.corrupt(short["keypoints"], noise=0.0015, drop=0.05, seed=seed)
    solved = _solve(noisy, scores >= 0.3, smoothing=True)
    position, rotation = _errors(short, solved)
    body = [b for b, n in enumerate(solved.rest.names) if BODY(n)]
    print(f"seed {seed}: position max {100 * position.max():.2f} cm, body rotation max "
          f"{rotation[1:-1, body].max():.2f} deg (ends {rotation[[0, -1]][:, body].max():.2f})")  # fmt: skip
    assert position.max() < 0.016
    assert rotation[:, body].max() < 5.5


def test_every_frame_within_3_degrees_at_1mm(truth):
    """At 1.0 mm noise even the first and last frame stay within 3 deg (20 draws: worst 2.9 deg)."""
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.001, drop=0.05)
    solved = _solve(noisy, scores >= 0.3, smoothing=True)
    _, rotation = _errors(truth, solved)
    body = [b for b, n in enumerate(solved.rest.names) if BODY(n)]
    _report("1.0 mm", rotation, solved.rest.names)
    assert rotation[:, body].max() < 3.0


def test_a_turn_is_filtered_without_lag(truth):
    """The joint-space filter is centred: a sudden 40 deg turn of the whole body (the root, filtered in the
    world) and a sudden 40 deg pronation of one forearm (a twist read from the hand) come out on their frame,
    and frames away from the step keep the usual accuracy."""
    rest, step, frames = truth["rest"], 60, FRAMES
    local, root = TRUTH.truth_motion(rest.names, frames)
    turn = np.radians(40.0) * (np.arange(frames) >= step)
    hips, forearm = rest.index("hips"), rest.index("forearm.L")
    yaw = np.stack([[[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]] for a in turn])
    local[:, hips] = rest.frames[hips].T @ yaw @ rest.frames[hips] @ local[:, hips]
    local[:, forearm] = local[:, forearm] @ P["rig_math"].rotation_y(turn)
    world, heads = C.forward_kinematics(rest, local, root)  # turning in place, about the hips
    keypoints = C.keypoints_from_pose(P, NAMES, rest, world, heads)
    noisy, scores = C.corrupt(keypoints, noise=0.0015, drop=0.05)
    solved = _solve(noisy, scores >= 0.3, smoothing=True)
    rotations = solved.motion.rotations
    twist = P["rig_math"].twist_about_y
    for bone, measure in (
        (hips, lambda r: np.arctan2(r[:, 1, 0], r[:, 0, 0])),  # heading of the hips' x axis
        (forearm, lambda r: twist(np.swapaxes(truth["world"][:, forearm], -1, -2) @ r)),
    ):
        got = np.unwrap(measure(rotations[:, bone]))
        want = np.unwrap(measure(world[:, bone]))
        crossing = int(np.argmax(np.abs(got - got[0]) > 0.5 * np.abs(want[-1] - want[0])))
        lag = crossing - int(np.argmax(np.abs(want - want[0]) > 0.5 * np.abs(want[-1] - want[0])))
        calm = np.abs(np.arange(frames) - step) > 8
        error = np.degrees(P["rig_math"].rotation_angle(world[:, bone], rotations[:, bone]))
        print(
            f"{rest.names[bone]}: step lag {lag} frames, error away from the step max {error[calm].max():.2f}"
        )
        assert abs(lag) <= 1
        assert error[calm][1:-1].max() < 5.0  # measured 1.66 (hips), 4.10 (forearm): the noise, not the step


def test_bone_lengths_are_constant_over_frames(truth):
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.0015, drop=0.05)
    solved = _solve(noisy, scores >= 0.3, smoothing=True)
    joints = P["rig_solve"].joint_positions(solved.motion, solved.rest)
    for name in ("upper_arm.L", "shin.R", "index2.L", "spine1"):
        length = np.linalg.norm(joints[f"{name}:tail"] - joints[f"{name}:head"], axis=-1)
        assert np.ptp(length) < 1e-9
    # The raw keypoints' distances do vary with the noise: the rig is what keeps them fixed.
    elbow, wrist = NAMES.index("left_elbow"), NAMES.index("left_wrist")
    assert np.ptp(np.linalg.norm(noisy[:, elbow] - noisy[:, wrist], axis=-1)) > 0.005


def test_lengths_are_robust_and_symmetric(truth):
    points = truth["keypoints"].copy()
    valid = np.ones(points.shape[:2], bool)
    knee = NAMES.index("right_knee")
    points[::7, knee] += 0.3  # a wild knee on every 7th frame, still "confident"
    m = P["rig_measure"].measure(points, valid, P["rig_keypoints"].KeypointIndex.from_names(NAMES))
    assert m.lengths["thigh"] == pytest.approx(0.46, abs=2e-3)
    assert m.lengths["shin"] == pytest.approx(0.43, abs=2e-3)


def test_cleanup_keeps_a_4hz_limb_motion_and_calms_a_still_one():
    """The clean-up's cut-off follows the motion's speed: a +-20 deg, 4 Hz swing keeps at least 95 % of its
    amplitude (a fixed 2 Hz low-pass kept 15 % of a 3 Hz one), a +-90 deg, 2 Hz twist 98 %, while 1.7 deg of
    jitter on a still joint is at least halved."""
    f = P["rig_filters"]
    cleanup = f.CleanUp()
    t = np.arange(300) / 30.0
    for hz, degrees, keep in ((4.0, 20.0, 0.95), (2.0, 90.0, 0.98), (1.0, 20.0, 0.97)):
        angle = np.radians(degrees) * np.sin(2 * np.pi * hz * t)
        out = f.adaptive_smooth(np.stack([np.cos(angle), np.sin(angle)], -1), 30.0, cleanup)
        kept = np.abs(np.arctan2(out[30:-30, 1], out[30:-30, 0])).max() / np.radians(degrees)
        print(f"{hz:g} Hz +-{degrees:g} deg: {100 * kept:.1f} % of the amplitude kept")
        assert keep <= kept <= 1.01
    jitter = np.random.default_rng(0).normal(0.0, 0.03, 300)
    out = f.adaptive_smooth(np.stack([np.cos(jitter), np.sin(jitter)], -1), 30.0, cleanup)
    calmed = np.arctan2(out[:, 1], out[:, 0]).std() / jitter.std()
    print(f"still joint: jitter x {calmed:.2f}")
    assert calmed < 0.65


def test_cleanup_follows_a_step_without_lag():
    rng = np.random.default_rng(0)
    t = np.arange(120)
    step = np.where(t >= 60, 0.3, 0.0)
    clean = np.stack([step, np.zeros_like(step), np.zeros_like(step)], axis=1)[:, None, :]
    noisy = clean + rng.normal(0.0, 0.003, clean.shape)
    smoothed = P["rig_filters"].adaptive_smooth(noisy, 30.0, P["rig_filters"].CleanUp(), speed_scale=1 / 0.5)

    def jitter(x):  # RMS second difference away from the step
        calm = np.r_[2:50, 70:118]
        return np.sqrt(np.mean(np.diff(x[:, 0, 0], 2)[calm - 1] ** 2))

    def crossing(x):  # first frame past half the step
        return int(np.argmax(x[:, 0, 0] > 0.15))

    lag = crossing(smoothed) - crossing(clean)
    print(f"jitter {jitter(noisy) * 1000:.2f} -> {jitter(smoothed) * 1000:.2f} mm, lag {lag} frames")
    assert jitter(smoothed) < 0.5 * jitter(noisy)
    assert abs(lag) <= 1


def test_curvature_smoother_follows_curvature_not_speed():
    """``rig_smooth.curvature_smooth`` (the head's clean-up): a head looking round +-25 deg at 0.4 Hz and nodding
    +-8 deg at 0.9 Hz (1.1 rad/s, which holds the speed-adaptive filter open) under 2.5 deg of noise per axis, as
    the solve sees it (a rotation's 9 entries): the worst frame loses a quarter of its error, more than the
    speed-adaptive filter takes off; noise-free the motion comes back within 0.1 deg; a 40 deg step with noise
    stays on its frame."""
    smooth, rm = P["rig_smooth"].curvature_smooth, P["rig_math"]
    rng = np.random.default_rng(3)
    t = np.arange(300) / 30.0
    yaw = np.radians(25.0) * np.sin(2 * np.pi * 0.4 * t)
    pitch = np.radians(8.0) * np.sin(2 * np.pi * 0.9 * t)
    clean = rm.rotation_y(yaw) @ rm.axis_angle(np.array([1.0, 0.0, 0.0]), pitch)
    jitter = rm.axis_angle(
        rng.normal(size=(300, 3)), np.linalg.norm(rng.normal(0.0, np.radians(2.5), (300, 3)), axis=1)
    )
    noisy = jitter @ clean

    def error(flat):  # degrees, worst frame, after projecting back onto rotations
        u, _, vt = np.linalg.svd(flat.reshape(-1, 3, 3))
        return np.degrees(rm.rotation_angle(clean, u @ vt)).max()

    exact = smooth(clean.reshape(-1, 9))
    cleaned = smooth(noisy.reshape(-1, 9))
    speed_adaptive = P["rig_filters"].adaptive_smooth(noisy.reshape(-1, 9), 30.0, P["rig_filters"].CleanUp())
    raw = error(noisy.reshape(-1, 9))
    print(f"head-like turns: raw {raw:.2f}, speed-adaptive {error(speed_adaptive):.2f}, "
          f"curvature-adaptive {error(cleaned):.2f} deg; noise-free {error(exact):.3f} deg")  # fmt: skip
    assert error(exact) < 0.1
    assert error(cleaned) < 0.8 * raw
    assert error(cleaned) < error(speed_adaptive)
    step = np.where(np.arange(120) >= 60, np.radians(40.0), 0.0)[:, None] * np.array([[0.0, 1.0, 0.0]])
    out = smooth(step + rng.normal(0.0, np.radians(1.0), step.shape))
    lag = int(np.argmax(out[:, 1] > np.radians(20.0))) - 60
    assert abs(lag) <= 1


def test_spline_weighs_each_frame_by_its_noise():
    """``rig_smooth.spline_smooth`` (a thigh's twist): a twist turning 1 deg a frame with a 2 deg, 0.5 Hz wobble
    (the slow truth's thigh near its end), read with a noise that changes every 15 frames as a bend plane's does
    (1.5 deg well bent, 6 deg nearly straight) and one frame not seen at all. A constant speed is what the spline
    passes without bias, so the maximum-likelihood one takes the worst frame (its last: one-sided) from 15.4 to
    3.4 deg where the speed-adaptive filter, weighted by the same information and held open by the speed, leaves
    8.3; the unseen frame comes from both sides; a noise-free track comes back as it is."""
    spline = P["rig_smooth"].spline_smooth
    rng = np.random.default_rng(11)
    t = np.arange(300)
    truth = np.radians(1.0) * t + np.radians(2.0) * np.sin(2 * np.pi * 0.5 * t / 30.0)
    sigma = np.radians(np.where((t // 15) % 2 == 0, 1.5, 6.0))
    variance = sigma**2
    variance[150] = np.inf
    noisy = truth + rng.normal(size=300) * np.where(np.isfinite(variance), sigma, 0.0)
    noisy[150] = 0.0  # never looked at
    out = spline(noisy, variance)
    weight = np.where(np.isfinite(variance), (np.radians(1.5) / sigma) ** 2, 0.0)
    unit = np.stack([np.cos(noisy), np.sin(noisy)], -1)
    speed_adaptive = P["rig_filters"].adaptive_smooth(unit, 30.0, P["rig_filters"].CleanUp(), weight)
    speed_adaptive = np.unwrap(np.arctan2(speed_adaptive[:, 1], speed_adaptive[:, 0]))
    raw = np.degrees(np.abs(noisy - truth)[np.isfinite(variance)]).max()
    worst, other = np.degrees(np.abs(out - truth)).max(), np.degrees(np.abs(speed_adaptive - truth)).max()
    print(f"spline: raw {raw:.2f}, speed-adaptive {other:.2f}, spline {worst:.2f} deg "
          f"(unseen frame {np.degrees(abs(out[150] - truth[150])):.2f})")  # fmt: skip
    assert worst < 0.3 * raw
    assert worst < 0.6 * other
    assert np.degrees(abs(out[150] - truth[150])) < 1.0
    assert np.allclose(spline(truth, np.zeros(300)), truth)


def _walker():
    return C.load("rig_truth_walk")


def test_realistic_walk_noise_free_is_reproduced_exactly():
    """The independent walking truth (2-5 Hz limb content, +-90 deg 2 Hz forearm twists, a jump, a 180 deg turn,
    29.97 fps): exact keypoints and no clean-up -> every joint within 1 mm, every bone within 0.5 deg."""
    walk = _walker()
    truth = walk.truth(P)
    solved = P["rig_pipeline"].solve_person(
        truth["keypoints"], np.ones(truth["keypoints"].shape[:2], bool), NAMES, walk.FPS,
        P["rig_pipeline"].RigSettings(smoothing=False),
    )  # fmt: skip
    position, rotation = _errors(truth, solved)
    print(f"walk, exact: joints max {1000 * position.max():.4f} mm, rotations max {rotation.max():.3f} deg")
    assert position.max() < 1e-3
    assert rotation.max() < 0.5


# Per-bone maxima over the walking truth with 3 mm noise, 5 % dropped joints and the default clean-up, measured
# on noise seeds 5 / 6 (degrees). The spine, hips, neck and head meet the 3 deg; the rest do NOT and are held
# as regression bounds, about 15 % above the worse seed. Why they cannot reach 3 deg at this noise, with numbers:
# test_3mm_noise_leaves_hands_upper_arms_and_fingers_above_3_degrees (arms, fingers) and
# benchmarks/bench_rig_oracle.py (legs, hips, head: reachable in principle, see docs/blender.md). Thigh, shin and
# foot were 6.1 / 6.3 / 6.8 before the leg's twist was read from the foot too and the foot's roll was cleaned up
# apart, thigh and shin 4.2 / 4.4 before the twist was smoothed as a spline against a calm reference (issue 28, h17);
# the hips 3.4 before their heading was cleaned up by curvature; the upper arm 10.5 / 9.5 before its twist was
# smoothed as a spline on the bend plane alone (issue 28, h18: its worst frame on seed 6 is the clip's first).
WALK_MEASURED = {"spine": (1.62, 1.75), "spine1": (1.62, 1.48), "spine2": (1.70, 1.87), "hips": (2.47, 2.44),
                 "neck": (1.84, 2.24), "head": (2.69, 2.40), "clavicle": (3.37, 3.53), "upper_arm": (6.63, 9.81),
                 "forearm": (12.93, 11.27), "hand": (15.63, 11.37), "thigh": (3.31, 2.83), "shin": (3.39, 2.89),
                 "foot": (4.70, 4.63), "toe": (4.74, 4.71)}  # fmt: skip
WALK_BOUNDS = {"spine": 3.0, "spine1": 3.0, "spine2": 3.0, "hips": 3.0, "neck": 3.0, "head": 3.0, "clavicle": 4.0,
               "upper_arm": 11.3, "forearm": 14.9, "hand": 18.0, "thigh": 3.8, "shin": 3.9, "foot": 5.5,
               "toe": 5.5}  # fmt: skip


@pytest.mark.parametrize("seed", [5, 6])
def test_realistic_walk_with_3mm_noise_per_bone(seed):
    """The issue's noisy case: the walking truth with 3 mm noise, 5 % dropped joints and the default clean-up, on
    two noise draws. The issue asks joints < 1 cm and bones < 3 deg. Met by the spine, hips, neck and head only; the
    rest is held per bone as a regression bound (``WALK_BOUNDS``), so a change that helps shows and one that hurts
    fails. Measured joints max 2.21 / 1.76 cm (p99 1.02 cm): the rig's joints hang off chains of noisy rotations
    (1 deg on a 0.8 m leg is 1.4 cm). Fingers are not bounded here (a 2 cm segment under 3 mm noise: see below)."""
    walk = _walker()
    truth = walk.truth(P)
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.003, drop=0.05, seed=seed)
    solved = P["rig_pipeline"].solve_person(
        noisy, scores >= 0.3, NAMES, walk.FPS, P["rig_pipeline"].RigSettings()
    )
    position, rotation = _errors(truth, solved)
    _report(f"walk 3 mm seed {seed}", rotation, solved.rest.names)
    print(f"walk 3 mm seed {seed}: joints max {100 * position.max():.2f} cm, "
          f"p99 {100 * np.percentile(position, 99):.2f} cm")  # fmt: skip
    for b, name in enumerate(solved.rest.names):
        bound = WALK_BOUNDS.get(name.split(".")[0])
        if bound is not None:
            assert rotation[:, b].max() < bound, name
    assert position.max() < 0.026
    assert np.percentile(position, 99) < 0.012


@pytest.mark.parametrize("seed", [5, 6])
def test_3mm_noise_leaves_hands_upper_arms_and_fingers_above_3_degrees(seed):
    """Why 3 deg at 3 mm noise is out of reach for the hands (and the forearms, whose twist is the hand's), the upper
    arms and the fingers -- an oracle experiment that gives the estimator everything but the noise.

    The oracle knows the true motion and only has to remove the noise of what each frame shows: the hand's
    orientation from a rigid fit of its six points with the TRUE layout (no dropped joints), the upper arm's twist
    from the true shoulder-elbow-wrist plane plus noise, a fingertip segment's direction. Its error is then filtered
    by an ideal zero-phase low-pass -- with no bias at all, which no real smoother has. Per frame, the hand's
    orientation has 1.7 / 2.0 / 3.6 deg rms per axis (the Cramer-Rao bound of a fit of this layout, 4.4 deg in all;
    the twist about the hand's length is the weak axis: its points lie within 3.5 cm of it). Even cut at 2 Hz --
    below the issue's own limb content (up to ~5 Hz, and a +-90 deg 2 Hz twist), so a real filter could not --
    the hand keeps > 3 deg at its worst frame; at 5 Hz > 5 deg. The upper arm's twist, read from a bend plane
    15-45 deg open, keeps > 3 deg at 2 Hz; a 2 cm finger segment > 9 deg. Measured (seeds 5 / 6): hand 2 Hz
    3.68 / 3.87, 5 Hz 6.24 / 7.63 deg; upper arm 2 Hz 4.59 / 5.18 deg; index fingertip 2 Hz 13.8 / 12.8 deg."""
    walk = _walker()
    truth = walk.truth(P)
    m, rest, world = truth["m"], truth["rest"], truth["world"]
    rig_math, keypoints, skeleton = P["rig_math"], P["rig_keypoints"], P["rig_skeleton"]
    kp = keypoints.KeypointIndex.from_names(NAMES)
    noisy, _ = C.corrupt(truth["keypoints"], noise=0.003, drop=0.0, seed=seed)
    inner = slice(3, -3)  # the mirrored ends of the ideal filter aside
    worst = {"hand 2 Hz": 0.0, "hand 5 Hz": 0.0, "upper arm 2 Hz": 0.0, "fingertip 2 Hz": 0.0}
    for side in ("L", "R"):
        n = keypoints.body_names(side)
        names = [n["wrist"]] + [keypoints.finger_joint(f, 1, side) for f in keypoints.FINGER_WORD]
        layout = m.side_layout(m.hand_layout, side)
        observed = np.stack([kp(noisy, x) for x in names], axis=1)
        fit = rig_math.kabsch(layout, observed - observed.mean(axis=1, keepdims=True))
        hand = rest.index(f"hand.{side}")
        seen = fit @ skeleton.side_frame(skeleton.HAND_REST, side).T @ rest.frames[hand]
        error = C.rotation_vector(np.swapaxes(world[:, hand], -1, -2) @ seen)  # the noise alone
        centred = layout - layout.mean(axis=0)
        fisher = sum(np.eye(3) * (r @ r) - np.outer(r, r) for r in centred) / 0.003**2
        bound = np.degrees(np.sqrt(np.linalg.eigvalsh(np.linalg.inv(fisher))))
        assert np.sqrt(np.sum(bound**2)) > 4.0  # per frame, the best any fit of these points can do
        for cutoff in (2.0, 5.0):
            kept = np.degrees(np.linalg.norm(C.ideal_lowpass(error, cutoff, walk.FPS), axis=1))[inner].max()
            worst[f"hand {cutoff:g} Hz"] = max(worst[f"hand {cutoff:g} Hz"], kept)
        shoulder, elbow, wrist = (kp(noisy, n[x]) for x in ("shoulder", "elbow", "wrist"))
        upper = world[:, rest.index(f"upper_arm.{side}")]
        twist = rig_math.signed_angle(
            upper[..., :, 0], np.cross(elbow - shoulder, wrist - elbow), upper[..., :, 1]
        )
        twist = np.angle(np.exp(1j * twist))
        kept = np.degrees(np.abs(C.ideal_lowpass(twist[:, None], 2.0, walk.FPS)[:, 0]))[inner].max()
        worst["upper arm 2 Hz"] = max(worst["upper arm 2 Hz"], kept)
        tip = rest.index(f"index3.{side}")
        a, b = (
            kp(noisy, keypoints.finger_joint("index", 3, side)),
            kp(noisy, keypoints.finger_joint("index", 4, side)),
        )
        direction = rig_math.normalize(b - a) - world[:, tip][..., :, 1]
        kept = np.degrees(np.linalg.norm(C.ideal_lowpass(direction, 2.0, walk.FPS), axis=1))[inner].max()
        worst["fingertip 2 Hz"] = max(worst["fingertip 2 Hz"], kept)
    print(f"seed {seed}, oracle (noise only, ideal low-pass): "
          + ", ".join(f"{k} {v:.2f} deg" for k, v in worst.items()))  # fmt: skip
    assert worst["hand 2 Hz"] > 3.0
    assert worst["hand 5 Hz"] > 5.0
    assert worst["upper arm 2 Hz"] > 3.0
    assert worst["fingertip 2 Hz"] > 9.0


@pytest.mark.parametrize("noise", [0.0, 0.003])
def test_dropped_joints_are_refilled_from_the_body_shape(noise):
    """Issue 28: a joint dropped for a frame of a fast swing or a take-off lies centimetres off the line through
    time (measured on the walking truth: up to 7-10 cm). ``rig_gaps.refill`` re-places it from what the frame still
    shows -- the rest of its hand, foot or face (rigid layouts), the circle an elbow or knee must lie on, a bone's
    length -- weighed against the time-filled value by their expected errors. Confident samples never move.
    Measured over seeds 5-7 (filled samples, mm): noise-free linear p99 51-52 / max 72-101, refilled p99 4-11 /
    max 16-36; with 3 mm noise linear max 72-104, refilled p99 13-16 / max 17-36; noise read as 2.93-2.99 mm."""
    walk = _walker()
    truth = walk.truth(P)
    kp = P["rig_keypoints"].KeypointIndex.from_names(NAMES)
    used = [NAMES.index(n) for n in P["rig_keypoints"].required_names()]
    gaps = P["rig_gaps"]
    for seed in (5, 6, 7):
        noisy, scores = C.corrupt(truth["keypoints"], noise=noise, drop=0.05, seed=seed)
        valid = scores >= 0.3
        linear = P["rig_pipeline"].fill_gaps(noisy, valid, np.zeros(noisy.shape[1:]))
        m = P["rig_measure"].measure(linear, valid, kp)
        assert gaps.noise_level(linear, valid, kp) == pytest.approx(noise, abs=0.1 * noise + 1e-9)
        refilled = gaps.refill(linear, valid, kp, m)
        np.testing.assert_array_equal(refilled[valid], linear[valid])
        dropped = ~valid[:, used]
        before = np.linalg.norm(linear - truth["keypoints"], axis=-1)[:, used][dropped]
        after = np.linalg.norm(refilled - truth["keypoints"], axis=-1)[:, used][dropped]
        print(f"noise {1000 * noise:g} mm, seed {seed}: filled samples, linear p99 "
              f"{1000 * np.percentile(before, 99):.1f} max {1000 * before.max():.1f} mm; refilled p99 "
              f"{1000 * np.percentile(after, 99):.1f} max {1000 * after.max():.1f} mm")  # fmt: skip
        assert np.percentile(after, 99) < 0.018
        assert after.max() < 0.04
        assert after.max() < 0.5 * before.max()
        assert after.mean() < 0.7 * before.mean()


def test_refill_says_which_samples_to_trust():
    """``rig_gaps.refill_with_trust``: confident samples get trust 1; a refilled sample gets the noise's share of
    its expected error, and that ranks the samples as their real errors do (walking truth, 3 mm noise, 5 %
    dropped: most dropped samples are refilled to about the noise, rms 5.3 mm; the few with trust < 0.3 are off by
    14-17 mm rms). The solve's clean-up lets a head or foot fitted through a low-trust point lean on its
    neighbours (feet 7.9 / 7.2 -> 6.6 / 6.8 deg, seeds 5 / 6)."""
    walk = _walker()
    truth = walk.truth(P)
    kp = P["rig_keypoints"].KeypointIndex.from_names(NAMES)
    used = [NAMES.index(n) for n in P["rig_keypoints"].required_names()]
    for seed in (5, 6):
        noisy, scores = C.corrupt(truth["keypoints"], noise=0.003, drop=0.05, seed=seed)
        valid = scores >= 0.3
        linear = P["rig_pipeline"].fill_gaps(noisy, valid, np.zeros(noisy.shape[1:]))
        m = P["rig_measure"].measure(linear, valid, kp)
        refilled, trust = P["rig_gaps"].refill_with_trust(linear, valid, kp, m)
        np.testing.assert_array_equal(refilled, P["rig_gaps"].refill(linear, valid, kp, m))
        assert np.all(trust[valid] == 1.0) and np.all((trust >= 0.0) & (trust <= 1.0))
        error = np.linalg.norm(refilled - truth["keypoints"], axis=-1)[:, used]
        low = ~valid[:, used] & (trust[:, used] < 0.3)
        high = ~valid[:, used] & (trust[:, used] >= 0.3)
        rms = [1000 * np.sqrt(np.mean(error[x] ** 2)) for x in (low, high)]
        print(
            f"seed {seed}: {low.sum()} low-trust samples rms {rms[0]:.1f} mm, {high.sum()} others {rms[1]:.1f} mm"
        )
        assert low.any() and rms[0] > 2.0 * rms[1]


def test_a_point_refilled_from_a_refilled_one_is_trusted_less():
    """When a knee and the ankle below it drop on the same frame, the ankle is placed one shin from a knee that
    was itself only re-placed: it inherits the knee's error, so it gets less trust than the same ankle placed
    from a seen knee, and the solve's clean-up leans on its neighbours there (run truth seed 7, a frame whose
    knee, ankle and big toe dropped: foot 12.4 -> 9.1 deg, shin 7.5 -> 7.3 deg, joints max 5.8 -> 5.4 cm; walk
    seed 10: foot 7.4 -> 6.2 deg; no other part or draw worse, ``benchmarks/bench_rig_noise.py``)."""
    walk = _walker()
    truth = walk.truth(P)
    kp = P["rig_keypoints"].KeypointIndex.from_names(NAMES)
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.003, drop=0.0, seed=5)
    n = P["rig_keypoints"].body_names("R")
    knee, ankle = kp.index[n["knee"]], kp.index[n["ankle"]]
    foot = [kp.index[n[r]] for r in ("ankle", "heel", "big_toe", "small_toe")]
    frames = np.arange(20, 290, 15)  # single-frame drops across the stride, swing and stance
    trusts = []
    for chain in (False, True):
        valid = scores >= 0.3
        valid[np.ix_(frames, foot + [knee] * chain)] = (
            False  # the whole foot: the ankle must come from the knee
        )
        linear = P["rig_pipeline"].fill_gaps(noisy, valid, np.zeros(noisy.shape[1:]))
        m = P["rig_measure"].measure(linear, valid, kp)
        trusts.append(P["rig_gaps"].refill_with_trust(linear, valid, kp, m)[1])
    seen_knee, dropped_knee = trusts
    print(
        "ankle trust, knee seen / dropped:",
        np.round(seen_knee[frames, ankle], 2),
        np.round(dropped_knee[frames, ankle], 2),
    )
    assert np.all(dropped_knee[frames, ankle] <= seen_knee[frames, ankle] + 1e-12)
    uncertain = dropped_knee[frames, knee] < 1.0
    assert uncertain.any()
    assert np.all(dropped_knee[frames, ankle][uncertain] < seen_knee[frames, ankle][uncertain])


def test_refill_does_not_hurt_slow_motion(truth):
    """On slow motion a line through time is nearly exact and the rigid shape only adds noise: the weighing keeps
    the line (slow truth, 1.5 mm noise: refilled samples no worse on average, max within 2 mm of the line's)."""
    kp = P["rig_keypoints"].KeypointIndex.from_names(NAMES)
    used = [NAMES.index(n) for n in P["rig_keypoints"].required_names()]
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.0015, drop=0.05)
    valid = scores >= 0.3
    linear = P["rig_pipeline"].fill_gaps(noisy, valid, np.zeros(noisy.shape[1:]))
    refilled = P["rig_gaps"].refill(linear, valid, kp, P["rig_measure"].measure(linear, valid, kp))
    dropped = ~valid[:, used]
    before = np.linalg.norm(linear - truth["keypoints"], axis=-1)[:, used][dropped]
    after = np.linalg.norm(refilled - truth["keypoints"], axis=-1)[:, used][dropped]
    print(f"slow: linear mean {1000 * before.mean():.2f} max {1000 * before.max():.2f} mm; refilled mean "
          f"{1000 * after.mean():.2f} max {1000 * after.max():.2f} mm")  # fmt: skip
    assert after.mean() <= before.mean()
    assert after.max() < before.max() + 0.002


def test_foot_lock_pins_a_sliding_foot():
    kp = P["rig_keypoints"].KeypointIndex.from_names(NAMES)
    frames = 60
    tracks = np.zeros((frames, len(NAMES), 3))
    rng = np.random.default_rng(1)
    foot = [kp.index[n] for n in ("left_ankle", "left_heel", "left_big_toe", "left_small_toe")]
    swing = (np.arange(frames) >= 20) & (np.arange(frames) < 40)
    for i, offset in zip(foot, ([0, 0, 0.08], [0, 0.06, 0.0], [0, -0.18, 0.0], [0.03, -0.16, 0.0])):
        tracks[:, i] = offset
        tracks[:, i, 1] += np.where(swing, np.linspace(0, 0.6, frames), 0.0)
        tracks[:, i, 2] += np.where(swing, 0.1 * np.sin(np.linspace(0, np.pi, frames)) + 0.05, 0.0)
        tracks[~swing, i, 1] += np.where(np.arange(frames)[~swing] < 20, 0.0, 0.6)
    tracks[:, foot] += rng.normal(0, 0.004, (frames, 4, 3))  # slide/jitter while planted
    others = [kp.index[n] for n in ("right_ankle", "right_heel", "right_big_toe", "right_small_toe")]
    tracks[:, others] = tracks[:1, foot]
    locked, runs = P["rig_filters"].lock_feet(tracks, kp, 30.0, np.array([0, 0, 1.0]))
    assert runs["L"] and runs["L"][0][0] == 0 and 15 <= runs["L"][0][1] <= 20
    a, b = runs["L"][0]
    planted = locked[a : b + 1, foot[0]]
    assert np.abs(planted - planted[0]).max() < 1e-9  # held still
    assert np.abs(tracks[a : b + 1, foot[0]] - tracks[a, foot[0]]).max() > 0.005  # the input was not
    np.testing.assert_allclose(locked[27:33, foot], tracks[27:33, foot])  # mid-swing untouched


def test_foot_lock_plants_the_rigs_foot_on_the_walk():
    """Issue 28: with foot lock the *rig's* foot stays put while planted -- two-bone IK puts the solved ankle on the
    locked keypoint (before, the ankle came from the thigh and shin directions and slid with the keypoints' length
    noise). The walking truth with 3 mm noise and dropped joints: on every contact frame the foot's head (ankle)
    and tail (ball) move less than 1 mm per frame; without the lock the same frames slide."""
    walk = _walker()
    truth = walk.truth(P)
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.003, drop=0.05)
    pipeline = P["rig_pipeline"]
    locked = pipeline.solve_person(
        noisy, scores >= 0.3, NAMES, walk.FPS, pipeline.RigSettings(foot_lock=True)
    )
    free = pipeline.solve_person(noisy, scores >= 0.3, NAMES, walk.FPS, pipeline.RigSettings())
    assert sum(len(r) for r in locked.contacts.values()) >= 3  # the walk's stances are found
    worst, slid = 0.0, 0.0
    for side, runs in locked.contacts.items():
        for solved, keep in ((locked, True), (free, False)):
            joints = P["rig_solve"].joint_positions(solved.motion, solved.rest)
            for a, b in runs:
                for point in (f"foot.{side}:head", f"foot.{side}:tail"):
                    step = np.linalg.norm(np.diff(joints[point][a : b + 1], axis=0), axis=-1).max()
                    worst, slid = (max(worst, step), slid) if keep else (worst, max(slid, step))
    print(
        f"planted foot: max {1000 * worst:.3f} mm/frame locked, {1000 * slid:.2f} mm/frame without the lock"
    )
    assert worst < 1e-3
    assert slid > 2e-3


def test_naming_presets_cover_every_bone_once():
    names = importlib.import_module("sapiens2_rig_test_parse.rig_names")
    for key, preset in names.PRESETS.items():
        rest_names = (
            P["rig_skeleton"]
            .rest_pose(TRUTH.truth_measurements(P), with_root=preset.with_root, with_heel=preset.with_heel)
            .names
        )
        mapped = [preset.name(n) for n in rest_names]
        assert len(set(mapped)) == len(mapped), key
        assert all(n in preset.names for n in rest_names), key
        assert all(len(n.encode()) <= 63 for n in mapped)
    assert names.preset("MIXAMO").name("forearm.L") == "mixamorig:LeftForeArm"
    assert names.preset("RIGIFY").name("index1.R") == "f_index.01.R"
    assert names.preset("UE").name("shin.L") == "calf_l"


@pytest.mark.parametrize("spread", [0.0, 1e-6])
def test_degenerate_keypoints_give_proper_rest_frames(spread):
    """Keypoints that coincide (or spread over micrometres) must still give every bone a proper rest frame: a
    hand layout of coincident points defines no frame, so the standard hand stands in (before, the hand's rest
    frame was all zeros and Blender dropped the bone: KeyError 'mixamorig:LeftHand'). Finite motion, too."""
    points = np.random.default_rng(2).normal(0.0, spread, (4, len(NAMES), 3)) + np.array([0.0, 5.0, 0.0])
    solved = P["rig_pipeline"].solve_person(points, np.ones(points.shape[:2], bool), NAMES, 30.0)
    frames = solved.rest.frames
    np.testing.assert_allclose(np.swapaxes(frames, -1, -2) @ frames, np.broadcast_to(np.eye(3), frames.shape),
                               atol=1e-9)  # fmt: skip
    assert np.isfinite(solved.motion.rotations).all() and np.isfinite(solved.motion.heads).all()


def test_missing_hand_keypoints_are_refused_by_name():
    errors = importlib.import_module("sapiens2_rig_test_parse.errors")
    with pytest.raises(errors.BundleError, match="left_wrist"):
        P["rig_keypoints"].KeypointIndex.from_names([n for n in NAMES if n != "left_wrist"])


def test_solving_300_frames_is_fast(truth):
    """A generous sanity bound; the measured figure comes from benchmarks/bench_rig.py."""
    noisy, scores = C.corrupt(truth["keypoints"], noise=0.0015, drop=0.05)
    start = time.perf_counter()
    _solve(noisy, scores >= 0.3, smoothing=True)
    assert time.perf_counter() - start < 5.0
