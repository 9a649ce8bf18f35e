"""Render poses as images: OpenPose-style skeletons from POSE_KEYPOINT frames (what ControlNet OpenPose models were
trained on), the full Sapiens2 308-keypoint skeleton from raw results, and the CLI's pose preview. Pillow only.
"""

from __future__ import annotations

import colorsys
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

from ..data import keypoints308
from ..formats.arrays import to_numpy
from .batches import TaskBatch, check_batch_count, check_image, place, require_batch
from .errors import StudioError
from .previews import to_uint8

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


def pose_preview(image: Any, people: list[Any], score_threshold: float = 0.3) -> np.ndarray:
    """The CLI's pose preview: person boxes and the 308-keypoint skeleton over a copy of the image (uint8)."""
    canvas = Image.fromarray(to_uint8(image)[..., :3]).convert("RGB")
    draw = ImageDraw.Draw(canvas)
    scale = max(canvas.size) / 1000.0
    width = max(1, round(3 * scale))
    for person in people:
        bbox = person["bbox"] if isinstance(person, dict) else person.bbox
        keypoints = person["keypoints"] if isinstance(person, dict) else person.keypoints
        draw.rectangle([float(v) for v in bbox], outline=(0, 255, 0), width=width)
        draw_308(
            keypoints,
            canvas,
            stick_width=width,
            point_radius=max(1, round(3 * scale)),
            threshold=score_threshold,
        )
    return np.asarray(canvas)


def render_poses(
    *,
    keypoints: list[dict[str, Any]] | dict[str, Any] | None = None,
    pose: TaskBatch | None = None,
    image: Any = None,
    body: bool = True,
    hands: bool = True,
    face: bool = True,
    stick_width: int = 4,
    point_radius: int = 4,
    threshold: float = 0.3,
    where: str = "",
) -> torch.Tensor:
    """Draw raw 308-keypoint poses (preferred when given) or POSE_KEYPOINT frames; (B, H, W, 3) float image.

    A single pose or a single background serves every frame; other counts must match."""
    background = to_numpy(check_image(image, where)) if image is not None else None
    style = {
        "body": body,
        "hands": hands,
        "face": face,
        "stick_width": stick_width,
        "point_radius": point_radius,
    }
    frames: list[np.ndarray] = []
    if pose is not None:
        pose = require_batch(pose, "pose", where, "pose")
        for i in range(_frame_count(len(pose), background, "the pose batch", where)):
            result = pose[i]
            w, h = result.image_size
            canvas = blank_canvas(w, h, _background(background, i, w, h, where))
            for person in result.people:
                draw_308(person.keypoints, canvas, threshold=threshold, **style)
            frames.append(to_float_image(canvas))
    elif keypoints is not None:
        if isinstance(keypoints, dict):
            keypoints = [keypoints]
        if not isinstance(keypoints, list) or not keypoints:
            raise StudioError(f"{place(where)}'keypoints' holds no frames (empty POSE_KEYPOINT)")
        for i in range(_frame_count(len(keypoints), background, "the keypoints batch", where)):
            frame = keypoints[min(i, len(keypoints) - 1)]
            w, h = _canvas_size(frame, background, where)
            canvas = blank_canvas(w, h, _background(background, i, w, h, where))
            draw_openpose_frame(frame, canvas, threshold=threshold, **style)
            frames.append(to_float_image(canvas))
    else:
        raise StudioError(
            f"{place(where)}connect 'keypoints' (POSE_KEYPOINT) or 'pose' (Sapiens2 pose) to draw"
        )
    sizes = {f.shape for f in frames}
    if len(sizes) > 1:
        raise StudioError(
            f"{place(where)}the frames have different sizes {sorted(sizes)}; cannot form one image batch"
        )
    return torch.from_numpy(np.stack(frames))


def _frame_count(poses: int, background: np.ndarray | None, of: str, where: str) -> int:
    if background is None or poses == 1:
        return poses if background is None else background.shape[0]
    check_batch_count("image", background.shape[0], poses, where, of=of)
    return poses


def _canvas_size(frame: dict[str, Any], background: np.ndarray | None, where: str) -> tuple[int, int]:
    try:
        return int(frame["canvas_width"]), int(frame["canvas_height"])
    except (KeyError, TypeError, ValueError):
        if background is not None:
            return int(background.shape[2]), int(background.shape[1])
        raise StudioError(
            f"{place(where)}a POSE_KEYPOINT frame without canvas_width/canvas_height needs an 'image' to draw on"
        ) from None


def _background(
    background: np.ndarray | None, index: int, width: int, height: int, where: str
) -> np.ndarray | None:
    if background is None:
        return None
    bg = background[min(index, background.shape[0] - 1)]
    if bg.shape[:2] != (height, width):
        raise StudioError(
            f"{place(where)}the image is {bg.shape[1]}x{bg.shape[0]} but the pose canvas is {width}x{height}; draw over "
            "the image the pose was computed from"
        )
    return bg
