"""Casts into the EXR writer's buffers at vector speed, without making the formats layer depend on torch.

Why: numpy 2.4 converts float32 and bool to float16 one value at a time (≈ 13 core-ms per 1080p channel strided,
19 contiguous), while torch converts with the CPU's vector instructions (≈ 1–3 core-ms). Both round to nearest
even: all 4,278,190,080 non-NaN float32 bit patterns give the same half-float bits (checked exhaustively once;
tests/test_exr_fast_paths.py checks millions of patterns and every rounding boundary); a NaN stays a NaN, its
payload bits may differ (8,388,606 of the 16,777,214 NaN patterns do). torch is used only when the process has
already imported it (the engine always has): the formats layer is also used where torch is absent or would be a
costly import (Blender, bundle tools).
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["as_pixel_type"]

_TORCH_SOURCES = (np.dtype(np.float32), np.dtype(np.bool_))
_HALF = np.dtype(np.float16)
# Elements per torch call: below torch's parallel grain (32,768), so the conversion runs on the calling thread.
# A parallel region would leave OpenMP's worker threads spinning after it, and that spin costs more core time
# than the conversion saves: measured on a 1080p capture frame, the deflate that follows went from 177 to 320
# core-ms when the bands were converted in one call each.
_PIECE = 32_000


def as_pixel_type(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`values` (2-D) as `dtype` where torch converts faster than numpy (float32/bool → float16, when torch is
    loaded and can view the array: native-endian, positively strided); otherwise `values` unchanged, for the
    writer's `np.copyto(..., casting="unsafe")` to cast. Called once per band and channel, so torch's per-call
    overhead (a few µs per piece) stays small next to the conversion."""
    if dtype != _HALF or values.dtype not in _TORCH_SOURCES or values.ndim != 2 or values.size == 0:
        return values
    torch = sys.modules.get("torch")
    if torch is None or not values.dtype.isnative or any(stride < 0 for stride in values.strides):
        return values
    # torch views only writable arrays
    source = torch.from_numpy(values if values.flags.writeable else values.copy())
    out = np.empty(values.shape, _HALF)
    target = torch.from_numpy(out)
    height, width = values.shape
    rows = max(1, _PIECE // width)
    cols = min(width, _PIECE)
    for y in range(0, height, rows):
        for x in range(0, width, cols):
            target[y : y + rows, x : x + cols].copy_(source[y : y + rows, x : x + cols])
    return out
