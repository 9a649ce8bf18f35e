"""Render poses as images: OpenPose skeletons from POSE_KEYPOINT frames (what ControlNet OpenPose models were
trained on; `openpose_render`), the full Sapiens2 308-keypoint skeleton from raw results (Pillow), and the CLI's
pose preview.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from PIL import Image, ImageDraw

from ...data import keypoints308
from ...formats.arrays import to_numpy
from ..errors import StudioError
from ..sources.batches import TaskBatch, check_batch_count, check_image, place, require_batch
from .openpose_render import JOINT_RADIUS, STICK_WIDTH, draw_frame
from .previews import to_uint8


def keypoint_metadata() -> dict[str, Any]:
    return keypoints308()


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
    feet: bool = False,
    stick_width: int = STICK_WIDTH,
    point_radius: int = JOINT_RADIUS,
    threshold: float = 0.3,
) -> Image.Image:
    """Draw one POSE_KEYPOINT frame (flat x, y, c triples per part) onto ``canvas`` the way ControlNet-OpenPose
    models saw their training images (`openpose_render`); feet only when asked (no OpenPose ControlNet knows
    them)."""
    pixels = np.array(canvas.convert("RGB"), dtype=np.uint8)
    draw_frame(
        pixels,
        frame,
        body=body,
        hands=hands,
        face=face,
        feet=feet,
        stick_width=stick_width,
        point_radius=point_radius,
        threshold=threshold,
    )
    canvas.paste(Image.fromarray(pixels))
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
    feet: bool = False,
    stick_width: int = 4,
    point_radius: int = 4,
    threshold: float = 0.3,
    where: str = "",
) -> torch.Tensor:
    """Draw raw 308-keypoint poses (preferred when given) or POSE_KEYPOINT frames; (B, H, W, 3) float image.

    A single pose or a single background serves every frame; other counts must match. `feet` draws the
    POSE_KEYPOINT frames' foot points (the raw skeleton always has its feet)."""
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
            draw_openpose_frame(frame, canvas, threshold=threshold, feet=feet, **style)
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
