"""The one conversion of tensors and array-likes to numpy used by the writers and the engine, and the banded
maps the engine hands the writers instead of whole ones on very large images."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


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


RowsMaker = Callable[[np.ndarray], np.ndarray]


class BandedArray:
    """A read-only (H, W, C) float32 map that is made a band of rows at a time, never held whole.

    Why: a 9000×6000 normal or point map is 648 MB of float32, and the job only ever reads it in bands (the
    EXR writer, 64 rows at a time) or sparsely (the checks' grid, 3D keypoints). `make(rows)` gets sorted unique
    int64 row indices and returns those rows, (len(rows), W, C); it must give the same values however the rows
    are grouped. Indexing (`a[rows]`, `a[o::s, o::s]`, `a[ys, xs]`) makes only the rows it needs;
    `np.asarray(a)` makes the whole map (for writers that need all of it, e.g. previews)."""

    dtype = np.dtype(np.float32)
    ndim = 3

    def __init__(self, shape: tuple[int, int, int], make: RowsMaker, band_rows: int = 256) -> None:
        if len(shape) != 3:
            raise ValueError(f"a BandedArray is (H, W, C), got shape {shape}")
        self.shape = tuple(int(s) for s in shape)
        self._make = make
        self._band_rows = max(1, int(band_rows))
        self._nonfinite: int | None = None

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1] * self.shape[2]

    def __len__(self) -> int:
        return self.shape[0]

    def then(self, step: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> BandedArray:
        """This map with `step(band, rows)` applied to every band it makes (e.g. a mask, indexed by `rows`)."""
        make = self._make
        return BandedArray(self.shape, lambda rows: step(make(rows), rows), self._band_rows)

    def rows(self, rows: np.ndarray, rest: tuple[Any, ...] = ()) -> np.ndarray:
        """The given (sorted, unique) rows, each band indexed by `rest` (the key's other axes) as it is made,
        joined into one array: `a[:, :, 2]` holds Z alone, never the whole (H, W, 3) map."""
        out: np.ndarray | None = None
        for start in range(0, len(rows), self._band_rows):
            band = self._make(rows[start : start + self._band_rows])[(slice(None), *rest)]
            if out is None:
                out = np.empty((len(rows), *band.shape[1:]), band.dtype)
            out[start : start + len(band)] = band
        return out if out is not None else np.empty((0, *self.shape[1:]), np.float32)[(slice(None), *rest)]

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        first, rest = (key[0], key[1:]) if key else (slice(None), ())
        height = self.shape[0]
        if isinstance(first, slice):
            return self.rows(np.arange(*first.indices(height), dtype=np.int64), rest)
        if isinstance(first, (int, np.integer)):
            row = int(first) + (height if int(first) < 0 else 0)
            if not 0 <= row < height:
                raise IndexError(f"row {int(first)} is out of range for {height} rows")
            return self.rows(np.array([row], np.int64))[(0, *rest)]
        index = np.asarray(first)
        if first is not Ellipsis and index.dtype.kind in "iu":
            index = np.where(index < 0, index + height, index).astype(np.int64)
            if index.size and (index.min() < 0 or index.max() >= height):
                raise IndexError(f"a row index is out of range for {height} rows")
            unique, inverse = np.unique(index, return_inverse=True)
            return self.rows(unique)[(inverse.reshape(index.shape), *rest)]
        return np.asarray(self)[key]  # anything else (Ellipsis, boolean masks): on the whole map

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self.rows(np.arange(self.shape[0], dtype=np.int64))
        return whole if dtype is None else whole.astype(dtype, copy=False)

    def nonfinite(self) -> int:
        """Number of NaN/inf values, counted band by band (once: the map never changes)."""
        if self._nonfinite is None:
            bands = (
                self[start : start + self._band_rows] for start in range(0, self.shape[0], self._band_rows)
            )
            self._nonfinite = sum(band.size - int(np.count_nonzero(np.isfinite(band))) for band in bands)
        return self._nonfinite


def host_array(value: Any) -> Any:
    """`to_numpy(value)`, except that a BandedArray stays one (read band by band, never made whole)."""
    return value if isinstance(value, BandedArray) else to_numpy(value)


def float32_map(value: Any) -> Any:
    """A result map for a frame: a BandedArray as it is, anything else as float32 numpy (shared where it already
    is float32: frames are read-only)."""
    value = host_array(value)
    return value if isinstance(value, BandedArray) else np.asarray(value, np.float32)
