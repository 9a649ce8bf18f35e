"""Casts into the EXR writer's buffers, with a faster float16 converter when the caller hands one in.

Why: numpy 2.4 converts float32 and bool to float16 one value at a time (≈ 3–13 core-ms per 1080p channel,
depending on the CPU), while torch converts with the CPU's vector instructions (≈ 8× faster). The formats layer
must not depend on torch (Blender and bundle tools read and write bundles without it), and what it does must not
depend on which modules a process happens to have imported; so the choice is explicit: a writer whose caller has
torch (core/studio, `core/studio/runtime/half_cast.torch_half`) passes that converter as `half`, every other writer casts
with numpy. Both round to nearest even: all 4,278,190,080 non-NaN float32 bit patterns give the same half-float
bits (checked exhaustively once; tests/core/formats/test_exr_fast_paths.py checks millions of patterns and every rounding
boundary); a NaN stays a NaN, its payload bits may differ (8,388,606 of the 16,777,214 NaN patterns do).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["HalfCast", "as_pixel_type", "half_castable"]

# A float16 converter: a 2-D float32 or bool array (native-endian, positively strided, maybe read-only) → a new
# C-contiguous float16 array, rounded to nearest even.
HalfCast = Callable[[np.ndarray], np.ndarray]

_FAST_SOURCES = (np.dtype(np.float32), np.dtype(np.bool_))
_HALF = np.dtype(np.float16)


def half_castable(values: np.ndarray) -> bool:
    """Whether `values` is what a `HalfCast` accepts (and numpy's own cast is the slow one)."""
    return (
        values.dtype in _FAST_SOURCES
        and values.dtype.isnative
        and values.ndim == 2
        and values.size > 0
        and all(stride >= 0 for stride in values.strides)
    )


def as_pixel_type(values: np.ndarray, dtype: np.dtype, half: HalfCast | None = None) -> np.ndarray:
    """`values` (2-D) as `dtype` through `half` where one is given and applies (float32/bool → float16);
    otherwise `values` unchanged, for the writer's `np.copyto(..., casting="unsafe")` to cast with numpy."""
    if half is None or dtype != _HALF or not half_castable(values):
        return values
    return half(values)
