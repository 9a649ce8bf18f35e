"""Thin, safe wrapper around the `openexr` package for named-channel, single-part EXR files.

Why a wrapper: the package writes non-contiguous numpy views as raw memory (silently wrong data), groups
`R,G,B` / `albedo.R,G,B` channels on read unless asked not to, and raises a variety of exceptions on bad files.
This module fixes all three in one place and keeps `openexr` an optional, lazily imported dependency.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .casting import HalfCast
from .errors import ExrError
from .exr_scanline import LINES_PER_CHUNK, ScanlineExrWriter

__all__ = [
    "ExrError",
    "linear_to_srgb",
    "read_exr",
    "require_openexr",
    "srgb_to_linear",
    "write_exr",
    "write_exr_bands",
]

_ALLOWED_DTYPES = (np.float16, np.float32, np.uint32)
# Compression names → the `openexr` constants (the lossless ones every OpenEXR 2.x/3.x reader decodes, and the two
# lossy ones the benchmark compares). One per file: a single-part EXR has one compression for all its channels.
COMPRESSIONS = {
    "none": "NO_COMPRESSION",
    "rle": "RLE_COMPRESSION",
    "zips": "ZIPS_COMPRESSION",
    "zip": "ZIP_COMPRESSION",
    "piz": "PIZ_COMPRESSION",
    "pxr24": "PXR24_COMPRESSION",
    "b44": "B44_COMPRESSION",
    "dwaa": "DWAA_COMPRESSION",
    # OpenEXR ≥ 3.4 only: about half ZIP's time and 0.6× its size here, but no Blender up to 5.3 reads it
    # (measured, docs/performance.md), so bundles never use it; here for measurements and other consumers.
    "zstd": "ZSTD_COMPRESSION",
}


def require_openexr() -> Any:
    """Import the optional `OpenEXR` module or explain how to install it."""
    try:
        import OpenEXR
    except ImportError as exc:  # exercised only where openexr is absent
        install = 'install it: pip install "sapiens2-studio[exr]" (or: pip install openexr)'
        raise ExrError(
            "EXR support (capture bundles) needs the optional 'openexr' package",
            hints={
                "python": install,
                "cli": install,
                "comfyui": f"install it into ComfyUI's Python:  {sys.executable} -m pip install openexr   then "
                "restart ComfyUI",
            },
        ) from exc
    return OpenEXR


def srgb_to_linear(values: np.ndarray) -> np.ndarray:
    """Decode sRGB-encoded 0..1 values to scene-linear (IEC 61966-2-1), float32."""
    v = np.clip(np.asarray(values, dtype=np.float32), 0.0, 1.0)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4).astype(np.float32)


def linear_to_srgb(values: np.ndarray) -> np.ndarray:
    """Encode scene-linear values to sRGB 0..1 (inverse of `srgb_to_linear`), float32."""
    v = np.clip(np.asarray(values, dtype=np.float32), 0.0, 1.0)
    return np.where(v <= 0.0031308, v * 12.92, 1.055 * np.power(v, 1.0 / 2.4) - 0.055).astype(np.float32)


def write_exr(
    path: str | os.PathLike[str],
    channels: Mapping[str, np.ndarray],
    attributes: Mapping[str, Any] | None = None,
    *,
    compression: str = "zip",
    half: HalfCast | None = None,
) -> None:
    """Write 2-D arrays as named channels of one single-part, scanline EXR (`compression`: see COMPRESSIONS).

    Each array's dtype sets the pixel type (float16 → HALF, float32 → FLOAT, uint32 → UINT). All channels must
    share one (H, W) shape. `none`, `zips` and `zip` are written by `exr_scanline.ScanlineExrWriter` (no
    `openexr` needed; attributes str, int or float); the other compressions by the `openexr` binding.
    `half`: the float16 converter our writer uses (core/formats/casting.py; None: numpy's, same bits).
    """
    if not channels:
        raise ExrError(f"{path}: refusing to write an EXR with no channels")
    if compression not in COMPRESSIONS:
        raise ExrError(
            f"{path}: unknown EXR compression {compression!r}; use one of {', '.join(COMPRESSIONS)}"
        )
    shape = None
    prepared: dict[str, np.ndarray] = {}
    for name, array in channels.items():
        arr = np.asarray(array)
        if arr.ndim != 2:
            raise ExrError(f"{path}: channel {name!r} must be 2-D (H, W), got shape {arr.shape}")
        if arr.dtype.type not in _ALLOWED_DTYPES:
            raise ExrError(f"{path}: channel {name!r} has dtype {arr.dtype}; use float16, float32 or uint32")
        if shape is None:
            shape = arr.shape
        elif arr.shape != shape:
            raise ExrError(f"{path}: channel {name!r} has shape {arr.shape}, others have {shape}")
        prepared[name] = arr
    if compression in LINES_PER_CHUNK:  # none, zips, zip: our own writer (fast deflate, see exr_scanline)
        with ScanlineExrWriter(
            path,
            [(name, arr.dtype) for name, arr in prepared.items()],
            *shape,
            attributes,
            compression=compression,
            half=half,
        ) as writer:
            writer.write(prepared)
        return
    OpenEXR = require_openexr()
    if not hasattr(OpenEXR, COMPRESSIONS[compression]):
        raise ExrError(f"{path}: this OpenEXR ({OpenEXR.OPENEXR_VERSION}) has no {compression} compression")
    header: dict[str, Any] = {
        "compression": getattr(OpenEXR, COMPRESSIONS[compression]),
        "type": OpenEXR.scanlineimage,
    }
    header.update(attributes or {})
    try:
        with OpenEXR.File(header, {k: np.ascontiguousarray(v) for k, v in prepared.items()}) as exr:
            exr.write(str(path))
    except Exception as exc:
        raise ExrError(f"{path}: could not write EXR ({exc})") from exc


def write_exr_bands(
    path: str | os.PathLike[str],
    layout: list[tuple[str, Any]],
    height: int,
    width: int,
    bands: Iterable[Mapping[str, np.ndarray]],
    attributes: Mapping[str, Any] | None = None,
    *,
    compression: str = "zip",
    half: HalfCast | None = None,
) -> None:
    """Write an EXR from row bands, top to bottom (`layout`: [(channel, dtype)]; each band maps every channel to
    (rows, width) values, cast to its dtype). With `none`, `zips` or `zip` only one band is held at a time; the
    binding's compressions need the whole image, so the bands are joined first. `half`: as for `write_exr`."""
    if compression in LINES_PER_CHUNK:
        with ScanlineExrWriter(
            path, layout, height, width, attributes, compression=compression, half=half
        ) as writer:
            for band in bands:
                writer.write(band)
        return
    parts = list(bands)
    whole = {
        name: np.concatenate([np.asarray(part[name]) for part in parts]).astype(dtype, copy=False)
        for name, dtype in layout
    }
    write_exr(path, whole, attributes, compression=compression, half=half)


def read_exr(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read every channel of a single-part EXR by its full name; returns (channels, header).

    Row 0 of each (H, W) array is the top row of the image.
    """
    file = Path(path)
    if not file.is_file():
        raise ExrError(f"{file}: EXR file not found")
    OpenEXR = require_openexr()
    try:
        with OpenEXR.File(str(file), separate_channels=True) as exr:
            header = dict(exr.header())
            channels = {name: np.array(ch.pixels) for name, ch in exr.channels().items()}
    except Exception as exc:
        raise ExrError(f"{file}: not a readable OpenEXR file ({exc})") from exc
    return channels, header
