"""How the bundle's pixels are encoded: sRGB colour to scene-linear (by table for 8-bit), points to their stored
form (invalid points zeroed, `P.A` flags), masks and mattes to 0..1, and back; all computable per band of rows.

Why a module of its own: the writer, the reader, the job's bounded-memory canonical form of a frame and the USD
export (`sample_points`) share these rules, which decide the bytes of every file.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .arrays import all_finite, host_array, to_numpy, zero_where_invalid
from .bundle_spec import DEPTH, MASK, POINTS
from .errors import BundleError
from .exr import linear_to_srgb, srgb_to_linear
from .row_bands import RowBands

MATTE_EPS = 1.0 / 255.0  # = core.pipeline.postprocess.MATTE_EPS: at or below it the straight colour is 0


# Rows per band of the EXR: a multiple of ZIP's 16-line chunk; a band's temporaries are a few MB even on a
# 9000-pixel-wide photo, so a frame's channels never exist at full size (docs/performance.md).
EXR_BAND_ROWS = 64


Band = dict[str, np.ndarray]


def check_shape(name: str, array: np.ndarray | None, height: int, width: int, channels: int | None) -> None:
    if array is None:
        return
    expected = (height, width) if channels is None else (height, width, channels)
    if array.shape != expected:
        raise BundleError(f"CaptureFrame.{name} has shape {array.shape}, expected {expected} (H, W[, C])")


def as_srgb_float(name: str, array: np.ndarray) -> np.ndarray:
    arr = to_numpy(array)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)
    if arr.ndim == 3 and arr.shape[2] == 4:
        arr = arr[..., :3]
    if arr.dtype == np.uint8:
        return arr.astype(np.float32) / 255.0
    if arr.dtype == np.uint16:
        return arr.astype(np.float32) / 65535.0
    if not np.issubdtype(arr.dtype, np.floating):
        raise BundleError(f"CaptureFrame.{name} must be uint8, uint16 or float 0..1, got {arr.dtype}")
    return np.nan_to_num(arr.astype(np.float32), nan=0.0, posinf=1.0, neginf=0.0)  # NaN would smear in comp


@lru_cache(maxsize=2)
def srgb_u8_table(dtype: Any = np.float32) -> np.ndarray:
    """The linear value of each 8-bit sRGB level, computed exactly as `as_linear`'s float path computes it, then
    cast to `dtype` (as `astype` would cast the float path's result)."""
    return srgb_to_linear(np.arange(256, dtype=np.float32) / 255.0).astype(dtype)


def as_linear(name: str, array: np.ndarray, dtype: Any = np.float32) -> np.ndarray:
    """sRGB image → scene-linear (H, W, 3) in `dtype` (float32, or the EXR's float16). 8-bit colour goes through a
    256-entry table: the same values as the float path, one lookup per pixel instead of a power (the bundle
    writer's costliest numpy step)."""
    arr = to_numpy(array)
    if arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] in (3, 4):
        return srgb_u8_table(np.dtype(dtype))[arr[..., :3]]
    return srgb_to_linear(as_srgb_float(name, arr)).astype(dtype, copy=False)


def sample_points(points: np.ndarray, keypoints: np.ndarray) -> np.ndarray:
    """Pointmap value at the pixel containing each keypoint; NaN rows where outside or invalid."""
    height, width = points.shape[:2]
    out = np.full((keypoints.shape[0], 3), np.nan, dtype=np.float32)
    xy = keypoints[:, :2]
    ok = np.isfinite(xy).all(axis=1)
    cols = np.floor(np.where(ok, xy[:, 0], -1)).astype(np.int64)
    rows = np.floor(np.where(ok, xy[:, 1], -1)).astype(np.int64)
    ok &= (cols >= 0) & (cols < width) & (rows >= 0) & (rows < height)
    values = points[rows[ok], cols[ok]].astype(np.float32)
    valid = np.isfinite(values).all(axis=1) & (values[:, 2] > 0)
    idx = np.flatnonzero(ok)[valid]
    out[idx] = values[valid]
    return out


def stored_points(points: Any) -> tuple[np.ndarray, np.ndarray]:
    """(points as the EXR stores them, valid): float32, non-finite points and points behind the camera (Z ≤ 0)
    replaced by 0, 0, 0; valid is (H, W, 1) bool. Applying it twice changes nothing."""
    pts = to_numpy(points).astype(np.float32, copy=False)  # read only: the masking makes the stored copy
    valid = all_finite(pts) & (pts[..., 2] > 0)  # behind the camera = invalid
    return zero_where_invalid(pts, valid), valid[..., None]


def canonical_points(points: Any, *, in_place: bool = False) -> np.ndarray:
    """`stored_points(points)[0]` without full-size temporaries (a 9000×6000 pointmap is 648 MB): computed in row
    bands, in place when `points` is a writable float32 array that owns its memory (built by the caller, e.g.
    `capture_frames` or `read_bundle`) or `in_place` says the caller gives its memory up (a model result the
    engine drops after capture), else into one new array."""
    if isinstance(points, RowBands):  # stays banded: each band is stored as it is made
        return points.then(lambda band, rows: stored_points(band)[0])
    pts = to_numpy(points)
    own = (
        isinstance(pts, np.ndarray)
        and pts.dtype == np.float32
        and (pts.base is None or in_place)
        and pts.flags.writeable
    )
    if pts.ndim != 3 or pts.shape[2] != 3:
        raise BundleError(f"points must be (H, W, 3), got shape {pts.shape}")
    out = pts if own else np.empty(pts.shape, np.float32)
    step = 4 * EXR_BAND_ROWS
    for y in range(0, pts.shape[0], step):
        np.copyto(out[y : y + step], stored_points(pts[y : y + step])[0])
    return out


def point_channels(points: Any) -> dict[str, np.ndarray]:
    """The EXR channels of a pointmap: depth `Z`, `P.X/Y/Z` and the validity `P.A` (docs/formats.md §2.1)."""
    pts, valid = stored_points(points)
    # 0 where no point: "zero is infinitely far"
    channels = {"Z": pts[..., 2].astype(DEPTH.pixel_type, copy=False)}  # views: writers copy them once
    for i, axis in enumerate("XYZ"):
        channels[f"P.{axis}"] = pts[..., i].astype(POINTS.pixel_type, copy=False)
    flags = valid[..., 0]  # P.A (0 or 1) takes the mask's pixel type
    channels["P.A"] = half_flags(flags) if MASK.pixel_type == np.float16 else flags.astype(MASK.pixel_type)
    return channels


HALF_ZERO_ONE = np.array([0x0000, 0x3C00], np.uint16)  # the bits of float16 0.0 and 1.0


def half_flags(flags: np.ndarray) -> np.ndarray:
    """bool → float16 0/1 by table (numpy's bool → float16 cast goes one value at a time: 16 vs 4 ms per 1080p)."""
    return np.take(HALF_ZERO_ONE, np.asarray(flags, dtype=bool).view(np.uint8)).view(np.float16)


def colour_input(name: str, array: Any, height: int, width: int) -> Any:
    arr = host_array(array)  # a map read in row bands (a huge photo's albedo) stays banded
    if (
        arr.shape[:2] != (height, width)
        or arr.ndim not in (2, 3)
        or (arr.ndim == 3 and arr.shape[2] not in (3, 4))
    ):
        raise BundleError(
            f"CaptureFrame.{name} has shape {arr.shape}, expected {(height, width, 3)} (H, W[, C])"
        )
    return arr


def colour_band(name: str, arr: np.ndarray, rows: slice, prefix: str, dtype: Any) -> Band:
    """Linear colour channels of rows of an sRGB image, in the layer's pixel type. 8-bit colour: one table
    lookup per channel, on the table's bits (numpy's `take` of raw 16/32-bit words is faster than of floats)."""
    band = to_numpy(arr[rows])
    if band.dtype == np.uint8 and band.ndim == 3 and band.shape[2] in (3, 4):
        table = srgb_u8_table(np.dtype(dtype))
        bits = table.view(f"u{table.itemsize}")
        return {f"{prefix}{ch}": np.take(bits, band[..., i]).view(table.dtype) for i, ch in enumerate("RGB")}
    linear = as_linear(name, band, dtype)
    return {f"{prefix}{ch}": linear[..., i] for i, ch in enumerate("RGB")}


def unit(values: np.ndarray) -> np.ndarray:
    """0..1 float32, NaN → 0 (masks and mattes)."""
    return np.clip(np.nan_to_num(np.asarray(values, dtype=np.float32), nan=0.0), 0.0, 1.0)


def straight_foreground(premultiplied: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """sRGB straight colour from the EXR's linear pre-multiplied matte: RGB / A where A > 1/255, else 0."""
    safe = np.where(alpha > MATTE_EPS, alpha, 1.0)[..., None]
    straight = np.clip(premultiplied / safe, 0.0, 1.0)
    return np.where((alpha > MATTE_EPS)[..., None], linear_to_srgb(straight), 0.0).astype(np.float32)


def stack(channels: dict[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    return np.stack([channels[n].astype(np.float32) for n in names], axis=-1)
