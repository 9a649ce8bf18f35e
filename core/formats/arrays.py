"""The one conversion of tensors and array-likes to numpy used by the writers and the engine; a map read in row
bands (`row_bands.RowBands`, what the engine hands the writers instead of whole maps on very large images) is
left as it is."""

from __future__ import annotations

from typing import Any

import numpy as np

from .row_bands import RowBands


def to_numpy(value: Any) -> np.ndarray:
    """A numpy array on the host: torch tensors are detached and copied off their device (float tensors of any
    precision become float32, integer and bool tensors keep their type); everything else goes through np.asarray."""
    if hasattr(value, "detach"):  # a torch tensor, without importing torch here
        value = value.detach().cpu()
        if value.is_floating_point():
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def all_finite(values: np.ndarray) -> np.ndarray:
    """`np.isfinite(values).all(axis=-1)` for (..., C) arrays, one `isfinite` per component: numpy reduces a
    length-3 last axis about 7× slower than this (32 vs 5 ms on a 1080p pointmap), and this runs per frame."""
    arr = np.asarray(values)
    if arr.shape[-1] == 0:
        return np.ones(arr.shape[:-1], bool)
    out = np.isfinite(arr[..., 0])
    for i in range(1, arr.shape[-1]):
        out &= np.isfinite(arr[..., i])
    return out


def zero_where_invalid(values: np.ndarray, valid: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """`np.where(valid[..., None], values, 0.0)` for (..., C) float32 values: +0.0 where not valid, into `out`
    (float32, the shape of `values`; may be `values` itself) or a new array.

    Done as a bit mask per component (all ones where valid, else zero): numpy's `where` with a broadcast
    condition is about 2.3× slower (a 1080p pointmap: 32 vs 14 ms), and the bundle writer and capture run this
    per frame. Identical bits, NaN and -0.0 included."""
    arr = np.asarray(values, dtype=np.float32)
    keep = np.negative(np.asarray(valid, dtype=bool).view(np.int8), dtype=np.int32).view(np.uint32)
    bits = arr.view(np.uint32)
    result = np.empty(arr.shape, np.float32) if out is None else out
    result_bits = result.view(np.uint32)
    for i in range(arr.shape[-1]):
        np.bitwise_and(bits[..., i], keep, out=result_bits[..., i])
    return result


def host_array(value: Any) -> Any:
    """`to_numpy(value)`, except that a map read in row bands (`RowBands`) stays one (never made whole)."""
    return value if isinstance(value, RowBands) else to_numpy(value)


def float32_map(value: Any) -> Any:
    """A result map for a frame: a map read in row bands as it is, anything else as float32 numpy (shared where
    it already is float32: frames are read-only)."""
    value = host_array(value)
    return value if isinstance(value, RowBands) else np.asarray(value, np.float32)
