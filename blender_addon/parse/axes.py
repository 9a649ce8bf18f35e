"""The one place where the OpenCV camera frame becomes Blender's world frame.

Bundles store points and normals in the OpenCV camera frame (x right, y down, z forward). A Blender camera looks
down its local -Z with +Y up, so the camera frame is OpenCV rotated 180° about X: ``diag(1, -1, -1)``.
``up_axis='Y'`` keeps exactly that (the camera sits at the origin with no rotation); ``up_axis='Z'`` (default)
also turns the world +90° about X so the person stands on Blender's Z-up ground and the camera looks along +Y:
(x, y, z)_cv -> (x, z, -y).
"""

from __future__ import annotations

import numpy as np

CV_TO_BLENDER_CAMERA = np.diag([1.0, -1.0, -1.0])
_UP_ROTATIONS = {
    "Y": np.eye(3),
    "Z": np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]),  # +90° about X
}


def camera_rotation(up_axis: str = "Z") -> np.ndarray:
    """Rotation (3x3) of the Blender camera object in the world for the chosen up axis."""
    try:
        return _UP_ROTATIONS[up_axis].copy()
    except KeyError:
        raise ValueError(f"up_axis must be one of {sorted(_UP_ROTATIONS)}, got {up_axis!r}") from None


def opencv_to_blender(up_axis: str = "Z") -> np.ndarray:
    """Rotation (3x3) taking OpenCV camera-frame vectors to Blender world vectors."""
    return camera_rotation(up_axis) @ CV_TO_BLENDER_CAMERA


def convert_points(points: np.ndarray, up_axis: str = "Z", scale: float = 1.0) -> np.ndarray:
    """(..., 3) OpenCV points -> Blender world points (float32), scaled by ``scale``."""
    rotation = (opencv_to_blender(up_axis) * scale).astype(np.float32)
    return np.asarray(points, dtype=np.float32) @ rotation.T


def convert_normals(normals: np.ndarray, up_axis: str = "Z") -> np.ndarray:
    """(..., 3) OpenCV unit vectors -> Blender world unit vectors (rotation only, no scale)."""
    return np.asarray(normals, dtype=np.float32) @ opencv_to_blender(up_axis).astype(np.float32).T
