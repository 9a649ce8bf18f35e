"""Pinhole intrinsics -> Blender camera settings (lens, sensor fit, shift); pure maths so it is testable.

Pixel coordinates follow the bundle contract: origin at the top-left corner of the top-left pixel, pixel centres
at i + 0.5, so the image centre is (W/2, H/2) and no half-pixel correction is needed. Blender's shift is in units
of the fitted image side; +shift_y moves the view up while image y grows downwards, hence the sign flip.
"""

from __future__ import annotations

from dataclasses import dataclass

SENSOR_SIZE_MM = 36.0


@dataclass(frozen=True)
class BlenderCameraSettings:
    lens: float
    sensor_fit: str
    sensor_width: float
    sensor_height: float
    shift_x: float
    shift_y: float
    resolution_x: int
    resolution_y: int
    pixel_aspect_x: float
    pixel_aspect_y: float


def camera_settings(
    fx: float, fy: float, cx: float, cy: float, width: int, height: int
) -> BlenderCameraSettings:
    """Blender camera data values that reproduce the pinhole projection of a width x height image.

    Follows Blender's view-plane maths: with ``ycor = pixel_aspect_y / pixel_aspect_x`` a y pixel spans ``ycor``
    x-units; the fitted side (``viewfac`` = W, or ycor * H for a vertical fit) maps to the 36 mm sensor, and the
    shift is measured in ``viewfac`` x-units. Non-square pixels (fx != fy) become the render pixel aspect,
    ``ycor = fx / fy``.
    """
    ycor = fx / fy
    aspect_x, aspect_y = (1.0, ycor) if ycor >= 1.0 else (1.0 / ycor, 1.0)
    if abs(ycor - 1.0) < 1e-9:
        aspect_x = aspect_y = 1.0
    if width >= ycor * height:
        fit, viewfac = "HORIZONTAL", float(width)
    else:
        fit, viewfac = "VERTICAL", ycor * height
    return BlenderCameraSettings(
        lens=fx * SENSOR_SIZE_MM / viewfac,
        sensor_fit=fit,
        sensor_width=SENSOR_SIZE_MM,
        sensor_height=SENSOR_SIZE_MM,
        shift_x=(width / 2.0 - cx) / viewfac,
        shift_y=(cy - height / 2.0) * ycor / viewfac,
        resolution_x=int(width),
        resolution_y=int(height),
        pixel_aspect_x=aspect_x,
        pixel_aspect_y=aspect_y,
    )


def backproject(u, v, depth, fx: float, fy: float, cx: float, cy: float):
    """Corner-origin pixel (u, v) at metric ``depth`` -> OpenCV camera-frame (X, Y, Z)."""
    return ((u - cx) / fx * depth, (v - cy) / fy * depth, depth)
