"""The OpenPose renderer's primitives and rules, measured on small canvases (the pixel-wise comparison with
comfyui_controlnet_aux's renderer is in tests/comfy/test_interop_controlnet_aux.py)."""

from __future__ import annotations

import numpy as np
import pytest
from sapiens2_studio.core.formats.keypoints import person_to_openpose
from sapiens2_studio.core.studio.views import drawing
from sapiens2_studio.core.studio.views import openpose_render as r
from sapiens2_studio.core.testing.people import standing_person


def _canvas(h: int = 40, w: int = 60) -> np.ndarray:
    return np.zeros((h, w, 3), np.uint8)


def test_joint_disc_is_the_pixels_within_the_radius():
    c = _canvas()
    r.fill_disc(c, (30.7, 20.2), 4, (255, 0, 0))  # lies in pixel (30, 20)
    ys, xs = np.nonzero(c[..., 0])
    assert len(ys) == 49  # |d|² ≤ 16 over integer offsets
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (26, 34, 16, 24)


def test_limb_is_an_ellipse_four_pixels_wide_each_side_at_sixty_percent():
    frame = {"people": [{"pose_keypoints_2d": [0, 0, 0, 10.5, 20.5, 1, 50.5, 20.5, 1] + [0, 0, 0] * 15}]}
    c = _canvas()
    r.draw_frame(c, frame, body=True)
    limb = r.COLORS[0]  # limb 0 joins joints 1 and 2
    dim = np.array([int(v * 0.6) for v in limb])
    column = np.all(c[:, 30] == dim, axis=1)  # the middle of the limb, between the joint discs
    assert column.sum() == 9 and np.flatnonzero(column).tolist() == list(range(16, 25))
    assert np.all(c[20, 26:35] == dim)  # along the limb
    assert np.all(c[20, 10] == r.COLORS[1]) and np.all(c[20, 50] == r.COLORS[2])  # joints on top, full colour


def test_hand_bones_and_face_dots():
    hand = np.array([[20.5 + 2 * k, 10.5 + 1.5 * k, 1] for k in range(21)]).ravel().tolist()
    face = np.array([[5.5, 30.5, 1]] + [[0, 0, 0]] * 69).ravel().tolist()
    frame = {"people": [{"hand_left_keypoints_2d": hand, "face_keypoints_2d": face}]}
    c = _canvas()
    r.draw_frame(c, frame)
    assert r.hand_bone_color(0) == (255, 0, 0) and r.hand_bone_color(10) == (0, 255, 255)
    assert np.all(c[10, 20] == r.HAND_JOINT_COLOR)
    face_dot = np.all(c == r.FACE_COLOR, axis=-1)
    assert face_dot.sum() == 29  # radius 3
    assert not face_dot[:20, :].any()  # the (0, 0, 0) points are not drawn


def test_feet_are_off_by_default_and_scores_are_thresholded():
    kp = standing_person()
    frame = {"people": [person_to_openpose(kp)], "canvas_width": 512, "canvas_height": 768}
    plain = r.draw_frame(np.zeros((768, 512, 3), np.uint8), frame)
    with_feet = r.draw_frame(np.zeros((768, 512, 3), np.uint8), frame, feet=True)
    assert np.array_equal(plain[680:, :], np.zeros_like(plain[680:, :]))  # nothing below the ankles
    assert with_feet[680:, :].any()
    real = {"people": [person_to_openpose(kp, flavor="comfyui")], "canvas_width": 512, "canvas_height": 768}
    real["people"][0]["pose_keypoints_2d"][2] = 0.2  # the nose scored below the threshold
    drawn = r.draw_frame(np.zeros((768, 512, 3), np.uint8), real, face=False)
    assert not np.all(drawn[118, 256] == r.COLORS[0])  # no nose dot
    assert np.all(r.draw_frame(np.zeros((768, 512, 3), np.uint8), frame, face=False)[118, 256] == r.COLORS[0])


def test_draw_pose_uses_the_openpose_renderer():
    kp = standing_person()
    frame = {"people": [person_to_openpose(kp)], "canvas_width": 512, "canvas_height": 768}
    image = drawing.render_poses(keypoints=[frame])
    expected = r.draw_frame(np.zeros((768, 512, 3), np.uint8), frame)
    assert image.shape == (1, 768, 512, 3)
    assert np.array_equal(np.rint(image[0].numpy() * 255).astype(np.uint8), expected)


@pytest.mark.parametrize("angle", [0.0, 33.0, 90.0, 145.0])
def test_limb_area_matches_its_ellipse(angle):
    """Whatever the direction, a limb covers about π·(a + g)(b + g) pixels: semi-axes a = half its length, b = the
    stick width, grown by g = ½(|cos θ| + |sin θ|) for the pixels its outline passes through."""
    c = np.zeros((200, 200, 3), np.uint8)
    centre = np.array([100.0, 100.0])
    u = np.array([np.cos(np.deg2rad(angle)), np.sin(np.deg2rad(angle))])
    r.fill_ellipse(c, centre - 40.0 * u, centre + 40.0 * u, 4, (255, 255, 255))
    area = int(c[..., 0].astype(bool).sum())
    g = 0.5 * np.abs(u).sum()
    assert area == pytest.approx(np.pi * (40 + g) * (4 + g), rel=0.03)
