"""Goliath-308 → COCO / OpenPose / BODY_25 / WholeBody / POSE_KEYPOINT conversions, checked by keypoint name."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sapiens2_studio.core.formats import keypoints as kf
from sapiens2_studio.core.pipeline import PersonPose, PoseResult
from sapiens2_studio.core.pipeline.metadata import keypoint_names
from sapiens2_studio.core.testing.people import standing_person

NAMES = keypoint_names()


def _person(seed=0):
    """A plausible frontal face/body: x grows to the subject's left (image right), y down; scores 0.5..1."""
    rng = np.random.default_rng(seed)
    kp = np.zeros((308, 3), dtype=np.float32)
    kp[:, 0] = rng.uniform(100, 500, 308)
    kp[:, 1] = rng.uniform(100, 700, 308)
    kp[:, 2] = rng.uniform(0.5, 1.0, 308)
    kp[1, :2] = (320, 200)  # left eye at image right
    kp[2, :2] = (280, 200)
    return kp


def _name(i):
    return NAMES[i]


def test_coco17_by_name():
    names = [_name(i) for i in kf.COCO17]
    assert names == list(kf.COCO17_NAMES)
    out = kf.to_coco17(_person())
    assert out.shape == (17, 3)


def test_openpose18_order_by_name_and_neck_modes():
    expected = [
        "nose", "neck", "right_shoulder", "right_elbow", "right_wrist", "left_shoulder", "left_elbow",
        "left_wrist", "right_hip", "right_knee", "right_ankle", "left_hip", "left_knee", "left_ankle",
        "right_eye", "left_eye", "right_ear", "left_ear",
    ]  # fmt: skip
    assert [_name(i) for i in kf.OPENPOSE18] == expected
    kp = _person()
    anat = kf.to_openpose18(kp, "anatomical")
    mid = kf.to_openpose18(kp, "shoulder_midpoint")
    assert np.array_equal(anat[1], kp[69])
    assert np.allclose(mid[1, :2], (kp[5, :2] + kp[6, :2]) / 2)
    assert mid[1, 2] == min(kp[5, 2], kp[6, 2])
    with pytest.raises(ValueError, match="neck"):
        kf.to_openpose18(kp, "chin")


def test_body25_midhip_and_feet():
    kp = _person()
    out = kf.to_body25(kp)
    assert out.shape == (25, 3)
    assert np.allclose(out[8, :2], (kp[9, :2] + kp[10, :2]) / 2)
    foot_names = [_name(i) for i in kf.BODY25[19:]]
    assert foot_names == [
        "left_big_toe",
        "left_small_toe",
        "left_heel",
        "right_big_toe",
        "right_small_toe",
        "right_heel",
    ]
    assert [_name(i) for i in kf.BODY25[9:15]] == [
        "right_hip", "right_knee", "right_ankle", "left_hip", "left_knee", "left_ankle",
    ]  # fmt: skip


@pytest.mark.parametrize("side", ["left", "right"])
def test_hands_in_openpose_order(side):
    table = kf.HAND_LEFT21 if side == "left" else kf.HAND_RIGHT21
    names = [_name(i) for i in table]
    assert names[0] == f"{side}_wrist"
    fingers = ["thumb", "forefinger", "middle_finger", "ring_finger", "pinky_finger"]
    for f, finger in enumerate(fingers):
        joints = names[1 + 4 * f : 5 + 4 * f]
        assert joints == [
            f"{side}_{finger}_third_joint",
            f"{side}_{finger}2",
            f"{side}_{finger}3",
            f"{side}_{finger}4",
        ]
    assert np.array_equal(kf.to_hand21(_person(), side), _person()[list(table)])


def test_face68_semantics():
    kp = _person()
    idx = kf.face68_indices(kp)
    assert idx.shape == (68,)
    assert (idx[:17] == -1).sum() == 16 and idx[8] == 77  # only the chin exists on the jaw line
    assert NAMES[idx[36]].startswith("r_outer") and NAMES[idx[45]].startswith("l_outer")
    assert NAMES[idx[39]].startswith("r_inner") and NAMES[idx[42]].startswith("l_inner")
    assert NAMES[idx[48]] == "r_outer_corner_of_mouth" and NAMES[idx[54]] == "l_outer_corner_of_mouth"
    assert all("r_eyebrow" in NAMES[i] for i in idx[17:22]) and all(
        "l_eyebrow" in NAMES[i] for i in idx[22:27]
    )
    assert all("lip" in NAMES[i] or "mouth" in NAMES[i] or "cupid" in NAMES[i] for i in idx[48:68])
    # brows are ordered along the face axis: right brow outer→inner, left brow inner→outer
    across = kp[1, :2] - kp[2, :2]
    proj = kp[idx[17:27], :2] @ across
    assert np.all(np.diff(proj[:5]) >= 0) and np.all(np.diff(proj[5:]) >= 0)
    face = kf.to_face68(kp)
    assert np.array_equal(face[8], kp[77])  # the chin is Goliath's; the rest of the jaw is synthesised
    assert np.allclose(face[0, :2], kp[kf.R_TRAGUS_TOP, :2]) and np.allclose(
        face[16, :2], kp[kf.L_TRAGUS_TOP, :2]
    )
    assert not np.any(np.all(face[:, :2] == 0, axis=1))  # no (0, 0) placeholder anywhere


def test_jaw_line_of_a_standing_person():
    """The synthesised jaw runs ear → chin → ear below the eyes and outside the mouth, like dlib's 0-16."""
    kp = standing_person()
    kp[kf.L_TRAGUS_TOP, 2] = 0.2  # the left ear scored low (e.g. hair over it)
    jaw = kf.jaw_line(kp)
    y = jaw[:, 1]
    assert np.all(np.diff(y[:9]) > 0) and np.all(np.diff(y[8:]) < 0)  # down to the chin, then up again
    assert np.all(np.diff(jaw[:, 0]) > 0)  # subject's right (image left) to left
    eye_y = kp[[1, 2], 1].max()
    assert y.min() >= eye_y and y.max() == kp[77, 1]
    mouth_r, mouth_l = kp[kf.MOUTH_R, 0], kp[kf.MOUTH_L, 0]
    assert jaw[4, 0] < mouth_r - 5 and jaw[12, 0] > mouth_l + 5  # the jaw passes outside the mouth corners
    # symmetric face → symmetric jaw about the chin's vertical
    assert np.allclose(jaw[:8, 0] + jaw[16:8:-1, 0], 2 * kp[77, 0], atol=1e-3)
    assert np.allclose(jaw[:8, 1], jaw[16:8:-1, 1], atol=1e-3)
    assert np.all(np.delete(jaw[:, 2], 8) == pytest.approx(0.2)) and jaw[8, 2] == pytest.approx(0.9)


def test_jaw_line_turns_with_the_head():
    kp = standing_person()
    centre = np.array([256.0, 120.0])
    angle = np.deg2rad(35.0)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    turned = kp.copy()
    turned[:, :2] = (kp[:, :2] - centre) @ rot.T + centre
    expected = (kf.jaw_line(kp)[:, :2] - centre) @ rot.T + centre
    assert np.allclose(kf.jaw_line(turned)[:, :2], expected, atol=1e-3)


def test_face_order_follows_head_rotation():
    kp = _person()
    upright = kf.face68_indices(kp)
    rotated = kp.copy()
    centre = np.array([300.0, 400.0])
    rot = np.array([[0.0, -1.0], [1.0, 0.0]])  # 90° in-plane rotation of the whole person
    rotated[:, :2] = (kp[:, :2] - centre) @ rot.T + centre
    assert np.array_equal(kf.face68_indices(rotated), upright)


def test_face70_appends_pupils_and_wholebody_layout():
    kp = _person()
    face = kf.to_face70(kp)
    assert face.shape == (70, 3)
    assert np.array_equal(face[68], kp[299]) and np.array_equal(face[69], kp[290])
    wb = kf.to_wholebody133(kp)
    assert wb.shape == (133, 3)
    assert np.array_equal(wb[:17], kf.to_coco17(kp))
    assert np.array_equal(wb[17:23], kp[list(kf.FEET6)])
    assert np.array_equal(wb[91:112], kf.to_hand21(kp, "left")) and np.array_equal(
        wb[112:], kf.to_hand21(kp, "right")
    )


def test_batched_inputs():
    kps = np.stack([_person(0), _person(1)])
    assert kf.to_body25(kps).shape == (2, 25, 3)
    assert kf.to_wholebody133(kps).shape == (2, 133, 3)
    with pytest.raises(ValueError, match="308"):
        kf.to_coco17(np.zeros((17, 3)))


def _result():
    return PoseResult(
        [PersonPose((0, 0, 10, 10), _person(0)), PersonPose((5, 5, 20, 20), _person(1))], (640, 800)
    )


def test_pose_keypoint_comfyui_flavour():
    frames = kf.to_pose_keypoint([_result()], flavor="comfyui")
    assert len(frames) == 1 and frames[0]["canvas_width"] == 640 and frames[0]["canvas_height"] == 800
    person = frames[0]["people"][0]
    assert set(person) == {
        "pose_keypoints_2d", "foot_keypoints_2d", "face_keypoints_2d", "hand_left_keypoints_2d",
        "hand_right_keypoints_2d",
    }  # fmt: skip
    assert len(person["pose_keypoints_2d"]) == 54 and len(person["foot_keypoints_2d"]) == 18
    assert len(person["face_keypoints_2d"]) == 210 and len(person["hand_left_keypoints_2d"]) == 63
    kp = _person(0)
    assert person["pose_keypoints_2d"][3:6] == pytest.approx(kp[69].tolist())  # anatomical neck, real score
    json.dumps(frames)  # plain JSON types only


def test_pose_keypoint_openpose_flavour_is_the_default():
    """OpenPose-convention confidences, feet, full lists, and no (0, 0) for a point below the threshold."""
    kp = _person(0)
    kp[0, 2] = 0.1  # nose below threshold
    kp[list(kf.HAND_LEFT21), 2] = 0.0  # whole left hand undetected
    res = PoseResult([PersonPose((0, 0, 10, 10), kp)], (640, 800))
    person = kf.to_pose_keypoint([res])[0]["people"][0]
    assert person == kf.to_pose_keypoint([res], flavor="openpose")[0]["people"][0]
    assert set(person) == {
        "pose_keypoints_2d", "foot_keypoints_2d", "face_keypoints_2d", "hand_left_keypoints_2d",
        "hand_right_keypoints_2d",
    }  # fmt: skip
    body = np.array(person["pose_keypoints_2d"]).reshape(18, 3)
    assert set(body[:, 2].tolist()) <= {0.0, 1.0}
    assert body[0].tolist() == pytest.approx([*kp[0, :2], 0.0])  # missing, but where it was predicted
    assert np.allclose(body[1, :2], (kp[5, :2] + kp[6, :2]) / 2)  # shoulder-midpoint neck by default
    assert np.allclose(body[2, :2], kp[6, :2])  # absolute pixels, as controlnet_aux encodes them
    hand = np.array(person["hand_left_keypoints_2d"]).reshape(21, 3)
    assert hand[:, 2].tolist() == [0.0] * 21 and np.allclose(hand[:, :2], kp[list(kf.HAND_LEFT21), :2])
    assert np.array(person["foot_keypoints_2d"]).reshape(6, 3)[:, 2].tolist() == [1.0] * 6
    norm = kf.to_pose_keypoint([res], normalized=True)[0]["people"][0]
    nb = np.array(norm["pose_keypoints_2d"]).reshape(18, 3)
    assert np.allclose(nb[2, :2], kp[6, :2] / np.array([640, 800]), atol=1e-6)


def test_pose_keypoint_controlnet_aux_flavour_is_openpose_without_feet():
    res = PoseResult([PersonPose((0, 0, 10, 10), _person(0))], (640, 800))
    aux = kf.to_pose_keypoint([res], flavor="controlnet_aux")[0]["people"][0]
    openpose = kf.to_pose_keypoint([res], flavor="openpose")[0]["people"][0]
    assert "foot_keypoints_2d" not in aux
    assert aux == {k: v for k, v in openpose.items() if k != "foot_keypoints_2d"}


def test_pose_keypoint_options_and_errors():
    person = kf.person_to_openpose(_person(), include_face=False, include_hands=False)
    assert person["face_keypoints_2d"] is None and person["hand_right_keypoints_2d"] is None
    assert person["pose_keypoints_2d"] is not None and person["foot_keypoints_2d"] is not None
    with pytest.raises(ValueError, match="flavor"):
        kf.person_to_openpose(_person(), flavor="dwpose")
    with pytest.raises(ValueError, match="canvas_size"):
        kf.person_to_openpose(_person(), normalized=True)
