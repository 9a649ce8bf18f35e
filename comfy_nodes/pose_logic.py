"""Pose node logic: raw 308-keypoint results -> ComfyUI POSE_KEYPOINT frames, and pose rendering."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..core.formats import keypoints as keypoint_formats
from .draw_pose import blank_canvas, draw_308, draw_openpose_frame, to_float_image
from .imaging import check_batch_count, check_image
from .types import TaskBatch, require_batch

DRAW_NODE = "Sapiens2 Draw Pose"
FLAVOURS = ("core (real scores)", "controlnet_aux (1/0 confidence)")
NECK_MODES = ("auto", "shoulder midpoint", "anatomical (Sapiens2 neck)")
# When the segmentation finds nobody in a frame: one whole-image person (single-person crops) or no people.
NOBODY = ("whole image", "no people")
NOBODY_KEYS = {NOBODY[0]: "image", NOBODY[1]: "empty"}
_FLAVOUR_KEYS = {FLAVOURS[0]: "comfyui", FLAVOURS[1]: "controlnet_aux"}
_NECK_KEYS = {NECK_MODES[0]: "auto", NECK_MODES[1]: "shoulder_midpoint", NECK_MODES[2]: "anatomical"}


def pose_keypoint_frames(
    batch: TaskBatch, *, flavour: str = FLAVOURS[0], neck_mode: str = NECK_MODES[0], threshold: float = 0.3
) -> list[dict[str, Any]]:
    """One OpenPose-layout dict per image (pixel coordinates), as ComfyUI's POSE_KEYPOINT expects."""
    batch = require_batch(batch, "pose", "Sapiens2 Pose", "pose")
    if flavour not in _FLAVOUR_KEYS:
        raise ValueError(f"unknown keypoint format {flavour!r}; choose one of {', '.join(FLAVOURS)}")
    if neck_mode not in _NECK_KEYS:
        raise ValueError(f"unknown neck mode {neck_mode!r}; choose one of {', '.join(NECK_MODES)}")
    return keypoint_formats.to_pose_keypoint(
        batch.results, flavor=_FLAVOUR_KEYS[flavour], neck=_NECK_KEYS[neck_mode], score_threshold=threshold
    )


def render(
    *,
    keypoints: list[dict[str, Any]] | None = None,
    pose: TaskBatch | None = None,
    image: torch.Tensor | None = None,
    body: bool = True,
    hands: bool = True,
    face: bool = True,
    stick_width: int = 4,
    point_radius: int = 4,
    threshold: float = 0.3,
) -> torch.Tensor:
    """Draw raw 308-keypoint poses (preferred when given) or POSE_KEYPOINT frames; IMAGE ``(B, H, W, 3)``."""
    background = check_image(image, DRAW_NODE).cpu().numpy() if image is not None else None
    style = {
        "body": body,
        "hands": hands,
        "face": face,
        "stick_width": stick_width,
        "point_radius": point_radius,
    }
    frames: list[np.ndarray] = []
    if pose is not None:
        pose = require_batch(pose, "pose", DRAW_NODE, "pose")
        count = _frame_count(len(pose), background, "the pose batch")
        for i in range(count):
            result = pose.results[min(i, len(pose) - 1)]
            w, h = result.image_size
            canvas = blank_canvas(w, h, _background(background, i, w, h))
            for person in result.people:
                draw_308(person.keypoints, canvas, threshold=threshold, **style)
            frames.append(to_float_image(canvas))
    elif keypoints is not None:
        if isinstance(keypoints, dict):
            keypoints = [keypoints]
        if not isinstance(keypoints, list) or not keypoints:
            raise ValueError(f"{DRAW_NODE}: 'keypoints' holds no frames (empty POSE_KEYPOINT)")
        count = _frame_count(len(keypoints), background, "the keypoints batch")
        for i in range(count):
            frame = keypoints[min(i, len(keypoints) - 1)]
            w, h = _canvas_size(frame, background)
            canvas = blank_canvas(w, h, _background(background, i, w, h))
            draw_openpose_frame(frame, canvas, threshold=threshold, **style)
            frames.append(to_float_image(canvas))
    else:
        raise ValueError(
            f"{DRAW_NODE}: connect 'keypoints' (POSE_KEYPOINT) or 'pose' (Sapiens2 pose) to draw"
        )
    sizes = {f.shape for f in frames}
    if len(sizes) > 1:
        raise ValueError(
            f"{DRAW_NODE}: the frames have different sizes {sorted(sizes)}; cannot form one IMAGE"
        )
    return torch.from_numpy(np.stack(frames))


def _frame_count(poses: int, background: np.ndarray | None, of: str) -> int:
    """Frames to draw: a single pose or a single image is repeated, other counts must match."""
    if background is None or poses == 1:
        return poses if background is None else background.shape[0]
    check_batch_count("image", background.shape[0], poses, DRAW_NODE, of=of)
    return poses


def _canvas_size(frame: dict[str, Any], background: np.ndarray | None) -> tuple[int, int]:
    try:
        return int(frame["canvas_width"]), int(frame["canvas_height"])
    except (KeyError, TypeError, ValueError):
        if background is not None:
            return int(background.shape[2]), int(background.shape[1])
        raise ValueError(
            f"{DRAW_NODE}: a POSE_KEYPOINT frame without canvas_width/canvas_height needs an 'image' to draw on"
        ) from None


def _background(background: np.ndarray | None, index: int, width: int, height: int) -> np.ndarray | None:
    if background is None:
        return None
    bg = background[min(index, background.shape[0] - 1)]
    if bg.shape[:2] != (height, width):
        raise ValueError(
            f"{DRAW_NODE}: the image is {bg.shape[1]}x{bg.shape[0]} but the pose canvas is {width}x{height}; "
            "draw over the image the pose was computed from"
        )
    return bg
