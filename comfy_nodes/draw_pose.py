"""Render poses as images: OpenPose-style skeletons from POSE_KEYPOINT (what ControlNet OpenPose models were trained
on), or the full Sapiens2 308-keypoint skeleton from raw results.  Pillow only.
"""

from __future__ import annotations

import colorsys
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from ..core.data import keypoints308

# OpenPose COCO-18 limbs (0-based) and their standard colours, as drawn by the OpenPose/ControlNet annotators.
OPENPOSE_LIMBS = (
    (1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (1, 8), (8, 9), (9, 10),
    (1, 11), (11, 12), (12, 13), (1, 0), (0, 14), (14, 16), (0, 15), (15, 17),
)  # fmt: skip
OPENPOSE_COLORS = (
    (255, 0, 0), (255, 85, 0), (255, 170, 0), (255, 255, 0), (170, 255, 0), (85, 255, 0), (0, 255, 0),
    (0, 255, 85), (0, 255, 170), (0, 255, 255), (0, 170, 255), (0, 85, 255), (0, 0, 255), (85, 0, 255),
    (170, 0, 255), (255, 0, 255), (255, 0, 170), (255, 0, 85),
)  # fmt: skip
HAND_EDGES = tuple((0 if j % 4 == 0 else j, j + 1) for j in range(20))
FEET_LINKS = ((13, 0), (13, 1), (13, 2), (10, 3), (10, 4), (10, 5))  # ankle -> big toe, small toe, heel


def keypoint_metadata() -> dict[str, Any]:
    return keypoints308()


def _triples(flat: Any) -> np.ndarray | None:
    if not flat:
        return None
    arr = np.asarray(flat, dtype=np.float32).reshape(-1, 3)
    return arr


def _scale_if_normalised(points: np.ndarray, width: int, height: int) -> np.ndarray:
    """controlnet_aux's OpenPose preprocessor emits 0..1 coordinates; everything else emits pixels."""
    pts = points.copy()
    visible = pts[:, 2] > 0
    if visible.any() and np.all(np.abs(pts[visible, :2]) <= 1.0):
        pts[:, 0] *= width
        pts[:, 1] *= height
    return pts


def _limb(draw: ImageDraw.ImageDraw, a: np.ndarray, b: np.ndarray, color, width: int) -> None:
    draw.line([(float(a[0]), float(a[1])), (float(b[0]), float(b[1]))], fill=tuple(color), width=width)
    r = width / 2.0
    for p in (a, b):  # round caps so joints look continuous
        draw.ellipse([p[0] - r, p[1] - r, p[0] + r, p[1] + r], fill=tuple(color))


def _dot(draw: ImageDraw.ImageDraw, p: np.ndarray, color, radius: float) -> None:
    draw.ellipse([p[0] - radius, p[1] - radius, p[0] + radius, p[1] + radius], fill=tuple(color))


def draw_openpose_frame(
    frame: dict[str, Any],
    canvas: Image.Image,
    *,
    body: bool = True,
    hands: bool = True,
    face: bool = True,
    feet: bool = True,
    stick_width: int = 4,
    point_radius: int = 4,
    threshold: float = 0.3,
) -> Image.Image:
    """Draw one POSE_KEYPOINT frame (flat x, y, c triples per part) onto ``canvas``."""
    width, height = canvas.size
    draw = ImageDraw.Draw(canvas)
    for person in frame.get("people", []):
        pose = _triples(person.get("pose_keypoints_2d"))
        if body and pose is not None:
            pose = _scale_if_normalised(pose, width, height)
            for (i, j), color in zip(OPENPOSE_LIMBS, OPENPOSE_COLORS):
                if i < len(pose) and j < len(pose) and pose[i, 2] >= threshold and pose[j, 2] >= threshold:
                    _limb(draw, pose[i], pose[j], [int(c * 0.6) for c in color], stick_width)
            for k, p in enumerate(pose[:18]):
                if p[2] >= threshold:
                    _dot(draw, p, OPENPOSE_COLORS[k], point_radius)
            foot = _triples(person.get("foot_keypoints_2d"))
            if feet and foot is not None and len(pose) >= 14:
                foot = _scale_if_normalised(foot, width, height)
                for a, b in FEET_LINKS:
                    if pose[a, 2] >= threshold and foot[b, 2] >= threshold:
                        _limb(draw, pose[a], foot[b], (170, 170, 0), max(1, stick_width // 2))
        for key in ("hand_left_keypoints_2d", "hand_right_keypoints_2d"):
            hand = _triples(person.get(key))
            if not hands or hand is None:
                continue
            hand = _scale_if_normalised(hand, width, height)
            for e, (i, j) in enumerate(HAND_EDGES):
                if hand[i, 2] >= threshold and hand[j, 2] >= threshold:
                    rgb = colorsys.hsv_to_rgb(e / len(HAND_EDGES), 1.0, 1.0)
                    _limb(draw, hand[i], hand[j], [int(c * 255) for c in rgb], max(1, stick_width // 2))
            for p in hand:
                if p[2] >= threshold:
                    _dot(draw, p, (0, 0, 255), max(1, point_radius // 2))
        face_pts = _triples(person.get("face_keypoints_2d"))
        if face and face_pts is not None:
            face_pts = _scale_if_normalised(face_pts, width, height)
            for p in face_pts:
                if p[2] >= threshold:
                    _dot(draw, p, (255, 255, 255), max(1, point_radius // 2))
    return canvas


def draw_308(
    keypoints: np.ndarray,
    canvas: Image.Image,
    *,
    body: bool = True,
    hands: bool = True,
    face: bool = True,
    stick_width: int = 3,
    point_radius: int = 3,
    threshold: float = 0.3,
) -> Image.Image:
    """Draw one person's 308 keypoints with the skeleton and colours of the Sapiens2 metadata."""
    meta = keypoint_metadata()
    draw = ImageDraw.Draw(canvas)
    kp = np.asarray(keypoints, dtype=np.float32)
    hand_ids = set(range(21, 63)) - {41, 62}  # the wrists belong to the body skeleton
    face_ids = set(range(70, 308))

    def wanted(i: int) -> bool:
        if i in hand_ids:
            return hands
        if i in face_ids:
            return face
        return body

    for (i, j), color in zip(meta["skeleton_links"], meta["skeleton_link_colors_rgb"]):
        if wanted(i) and wanted(j) and kp[i, 2] >= threshold and kp[j, 2] >= threshold:
            _limb(draw, kp[i], kp[j], color, stick_width)
    for i, (p, color) in enumerate(zip(kp, meta["keypoint_colors_rgb"])):
        if wanted(i) and p[2] >= threshold:
            radius = point_radius if i not in face_ids else max(1, point_radius // 2)
            _dot(draw, p, color, radius)
    return canvas


def blank_canvas(width: int, height: int, background: np.ndarray | None = None) -> Image.Image:
    """A black canvas, or a copy of ``background`` (H, W, 3 floats in [0, 1]) to draw over."""
    if background is None:
        return Image.new("RGB", (width, height))
    arr = np.clip(np.asarray(background, dtype=np.float32) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return Image.fromarray(arr[..., :3], mode="RGB")


def to_float_image(canvas: Image.Image) -> np.ndarray:
    return np.asarray(canvas, dtype=np.float32) / 255.0
