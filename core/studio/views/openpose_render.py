"""OpenPose skeleton images as ControlNet-OpenPose models were trained on them (numpy only).

The look is the one of the ControlNet 1.1 OpenPose annotator, which comfyui_controlnet_aux's renderer reproduces:
- body: each of the 17 COCO-18 limbs is a filled ellipse between its two joints (semi-major axis = half the limb
  length, semi-minor axis = the stick width, 4 px) in its limb colour at 60 % brightness (the annotator's 0.6
  blend over black); then every joint is a disc of radius 4 in the joint's colour;
- hands: 20 bones as 2 px lines coloured by hue (bone k of 20 has hue k / 20), then every joint a blue disc of
  radius 4;
- face: every point a white disc of radius 3;
- hand and face points left of the second column or above the second row are left out (the annotator's guard
  against OpenPose's (0, 0) for missing points);
- no feet: the OpenPose ControlNets were trained on COCO-18 bodies without them.
Primitives are hard-edged (no anti-aliasing), like the annotator's, and laid on the pixel grid: a shape starts at
the centre of the pixel that contains its point (points are in the corner-origin pixel frame: the centre of pixel
(c, r) is (c + 0.5, r + 0.5)). Discs are the pixels whose centre is within the radius. Limbs and hand bones are
filled polygons whose outline pixels count too, so they also cover the pixels whose square their edge crosses;
limb ellipses take whole-pixel semi-major axes and whole-degree angles, as the annotator's integer drawing calls do.
This is written from that description, not from the annotator's code; tests/comfy/test_interop_controlnet_aux.py
measures the agreement with comfyui_controlnet_aux's renderer.
"""

from __future__ import annotations

import colorsys
from typing import Any

import numpy as np

# OpenPose COCO-18 limbs (0-based joint indices) in drawing order; limb k has colour k.
LIMBS = (
    (1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (1, 8), (8, 9), (9, 10),
    (1, 11), (11, 12), (12, 13), (1, 0), (0, 14), (14, 16), (0, 15), (15, 17),
)  # fmt: skip
# The 18 OpenPose colours (RGB): joint k and limb k use colour k; the hue steps through the spectrum.
COLORS = (
    (255, 0, 0), (255, 85, 0), (255, 170, 0), (255, 255, 0), (170, 255, 0), (85, 255, 0), (0, 255, 0),
    (0, 255, 85), (0, 255, 170), (0, 255, 255), (0, 170, 255), (0, 85, 255), (0, 0, 255), (85, 0, 255),
    (170, 0, 255), (255, 0, 255), (255, 0, 170), (255, 0, 85),
)  # fmt: skip
LIMB_BRIGHTNESS = 0.6
# Hand bones: from the wrist (0) along each finger, base joint to tip (OpenPose hand order).
HAND_BONES = tuple((0 if j % 4 == 0 else j, j + 1) for j in range(20))
HAND_JOINT_COLOR = (0, 0, 255)
FACE_COLOR = (255, 255, 255)
STICK_WIDTH, JOINT_RADIUS, HAND_LINE_WIDTH, FACE_RADIUS = 4, 4, 2, 3
# Half a pixel: limbs and bones cover the pixels their outline passes through. Across an edge with unit direction
# u that reaches pixel centres up to OUTLINE * (|u_x| + |u_y|) outside it (half a pixel square's extent across u).
OUTLINE = 0.5


def hand_bone_color(bone: int) -> tuple[int, int, int]:
    """Bone `bone` of 20 gets hue bone / 20 at full saturation and value, rounded to 8 bits (the annotator's rainbow)."""
    r, g, b = colorsys.hsv_to_rgb(bone / len(HAND_BONES), 1.0, 1.0)
    return round(r * 255), round(g * 255), round(b * 255)


def _window(canvas: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[slice, slice, np.ndarray] | None:
    """Rows/columns of the canvas whose pixel centres may lie in [lo, hi] (x, y), and those centres."""
    height, width = canvas.shape[:2]
    c0, r0 = max(int(np.floor(lo[0])), 0), max(int(np.floor(lo[1])), 0)
    c1, r1 = min(int(np.ceil(hi[0])) + 1, width), min(int(np.ceil(hi[1])) + 1, height)
    if c0 >= c1 or r0 >= r1:
        return None
    ys, xs = np.mgrid[r0:r1, c0:c1].astype(np.float64) + 0.5
    return slice(r0, r1), slice(c0, c1), np.stack([xs, ys], axis=-1)


def pixel_centre(point: np.ndarray) -> np.ndarray:
    """Centre of the pixel that contains `point`: shapes are laid on the pixel grid, as the annotator's are."""
    return np.floor(np.asarray(point, dtype=np.float64)) + 0.5


def fill_disc(canvas: np.ndarray, centre: np.ndarray, radius: float, color: tuple[int, int, int]) -> None:
    """Every pixel whose centre is within `radius` of the centre of the pixel containing `centre`."""
    centre = pixel_centre(centre)
    found = _window(canvas, centre - radius, centre + radius)
    if found is None:
        return
    rows, cols, xy = found
    inside = np.sum((xy - centre) ** 2, axis=-1) <= radius * radius
    canvas[rows, cols][inside] = color


def fill_ellipse(
    canvas: np.ndarray, a: np.ndarray, b: np.ndarray, half_width: float, color: tuple[int, int, int]
) -> None:
    """A limb: the ellipse centred between `a` and `b`, semi-major axis half their distance, semi-minor axis
    `half_width`, along the line from `b` to `a`.

    Quantised like the annotator's (whose drawing API takes integers): the centre to its pixel, the semi-major axis
    to whole pixels and the angle to whole degrees, both toward zero. Long limbs differ by a pixel or two at their
    ends without this, since one degree is 1.7 pixels at 100 pixels from the centre."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    centre = pixel_centre((a + b) / 2.0)
    semi_major = float(np.floor(np.hypot(*(a - b)) / 2.0))
    angle = np.deg2rad(np.trunc(np.degrees(np.arctan2(a[1] - b[1], a[0] - b[0]))))
    u = np.array([np.cos(angle), np.sin(angle)])
    grow = OUTLINE * (abs(u[0]) + abs(u[1]))
    grown_major, grown_minor = semi_major + grow, half_width + grow
    reach = max(grown_major, grown_minor)
    found = _window(canvas, centre - reach, centre + reach)
    if found is None:
        return
    rows, cols, xy = found
    d = xy - centre
    along = d @ u
    across = d @ np.array([-u[1], u[0]])
    inside = (along / grown_major) ** 2 + (across / grown_minor) ** 2 <= 1.0
    canvas[rows, cols][inside] = color


def fill_segment(
    canvas: np.ndarray, a: np.ndarray, b: np.ndarray, width: float, color: tuple[int, int, int]
) -> None:
    """A line `width` pixels thick between the centres of the pixels containing `a` and `b`, with round ends of
    radius width / 2; like a limb, the band also covers the pixels its edges pass through (see OUTLINE)."""
    a, b = pixel_centre(a), pixel_centre(b)
    r = width / 2.0
    ab = b - a
    length = float(np.hypot(*ab))
    u = ab / length if length > 1e-9 else np.array([1.0, 0.0])
    band = r + OUTLINE * (abs(u[0]) + abs(u[1]))
    found = _window(canvas, np.minimum(a, b) - band, np.maximum(a, b) + band)
    if found is None:
        return
    rows, cols, xy = found
    d = xy - a
    along, across = d @ u, d @ np.array([-u[1], u[0]])
    inside = (np.abs(across) <= band) & (along >= 0.0) & (along <= length)
    inside |= np.sum(d**2, axis=-1) <= r * r
    inside |= np.sum((xy - b) ** 2, axis=-1) <= r * r
    canvas[rows, cols][inside] = color


def _triples(flat: Any) -> np.ndarray | None:
    if not flat:
        return None
    return np.asarray(flat, dtype=np.float64).reshape(-1, 3)


def scale_if_normalised(points: np.ndarray, width: int, height: int) -> np.ndarray:
    """Pixels for a part whose visible points all lie in [0, 1] (controlnet_aux's OpenPose preprocessor writes
    such normalised coordinates); other parts are returned unchanged."""
    pts = points.copy()
    visible = pts[:, 2] > 0
    if visible.any() and np.all(np.abs(pts[visible, :2]) <= 1.0):
        pts[:, 0] *= width
        pts[:, 1] *= height
    return pts


def _shown(points: np.ndarray, threshold: float) -> np.ndarray:
    return (points[:, 2] >= threshold) & np.isfinite(points[:, :2]).all(axis=1)


def _off_the_origin_edges(points: np.ndarray) -> np.ndarray:
    """Hand and face points left of column 1 or above row 1 are not drawn: the annotator takes them for the
    (0, 0) that OpenPose writes for a missing point (so a hand at the image's left edge loses those joints)."""
    return (points[:, 0] >= 1.0) & (points[:, 1] >= 1.0)


def draw_body(canvas: np.ndarray, pose: np.ndarray, threshold: float, stick: float, radius: float) -> None:
    shown = _shown(pose, threshold)
    for (i, j), color in zip(LIMBS, COLORS):
        if i < len(pose) and j < len(pose) and shown[i] and shown[j]:
            dim = tuple(int(c * LIMB_BRIGHTNESS) for c in color)
            fill_ellipse(canvas, pose[i, :2], pose[j, :2], stick, dim)
    for k in range(min(len(pose), len(COLORS))):
        if shown[k]:
            fill_disc(canvas, pose[k, :2], radius, COLORS[k])


def draw_hand(canvas: np.ndarray, hand: np.ndarray, threshold: float, line: float, radius: float) -> None:
    shown = _shown(hand, threshold) & _off_the_origin_edges(hand)
    for bone, (i, j) in enumerate(HAND_BONES):
        if j < len(hand) and shown[i] and shown[j]:
            fill_segment(canvas, hand[i, :2], hand[j, :2], line, hand_bone_color(bone))
    for k in np.flatnonzero(shown):
        fill_disc(canvas, hand[k, :2], radius, HAND_JOINT_COLOR)


def draw_face(canvas: np.ndarray, face: np.ndarray, threshold: float, radius: float) -> None:
    for k in np.flatnonzero(_shown(face, threshold) & _off_the_origin_edges(face)):
        fill_disc(canvas, face[k, :2], radius, FACE_COLOR)


def draw_feet(canvas: np.ndarray, feet: np.ndarray, threshold: float, radius: float) -> None:
    """Foot points (not part of what OpenPose ControlNets know): discs in the colours that follow the 18 joints."""
    for k in np.flatnonzero(_shown(feet, threshold)):
        fill_disc(canvas, feet[k, :2], radius, COLORS[(len(COLORS) + k) % len(COLORS)])


def draw_frame(
    canvas: np.ndarray,
    frame: dict[str, Any],
    *,
    body: bool = True,
    hands: bool = True,
    face: bool = True,
    feet: bool = False,
    stick_width: float = STICK_WIDTH,
    point_radius: float = JOINT_RADIUS,
    threshold: float = 0.3,
) -> np.ndarray:
    """Draw one POSE_KEYPOINT frame onto `canvas` ((H, W, 3) uint8, changed in place and returned).

    `stick_width` is the limb ellipses' semi-minor axis; hand bones are half as wide and face points one pixel
    smaller than `point_radius`, so the defaults (4, 4) give the annotator's 4 / 2 / 4 / 3 pixels. Points whose
    confidence is below `threshold` are not drawn (POSE_KEYPOINT confidences are 0/1 or real scores)."""
    height, width = canvas.shape[:2]
    hand_line = max(1.0, stick_width / 2.0)
    face_radius = max(1.0, point_radius - 1.0)
    for person in frame.get("people", []) or []:
        pose = _triples(person.get("pose_keypoints_2d"))
        if body and pose is not None:
            draw_body(canvas, scale_if_normalised(pose, width, height), threshold, stick_width, point_radius)
        foot = _triples(person.get("foot_keypoints_2d"))
        if feet and foot is not None:
            draw_feet(canvas, scale_if_normalised(foot, width, height), threshold, point_radius)
        if hands:
            for key in ("hand_left_keypoints_2d", "hand_right_keypoints_2d"):
                hand = _triples(person.get(key))
                if hand is not None:
                    draw_hand(
                        canvas, scale_if_normalised(hand, width, height), threshold, hand_line, point_radius
                    )
        face_pts = _triples(person.get("face_keypoints_2d"))
        if face and face_pts is not None:
            draw_face(canvas, scale_if_normalised(face_pts, width, height), threshold, face_radius)
    return canvas
