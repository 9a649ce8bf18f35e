"""Bilinear upscale a band of rows at a time, bit-identical to the whole-map
`F.interpolate(x, size, mode="bilinear", align_corners=False)` on the CPU.

Why: a 9000×6000 normal or point map is 648 MB of float32. The engine's job makes such maps band by band while
the bundle is written (`BandedArray`, this module's one implementation of the writers' `formats.row_bands.RowBands`
protocol; nothing else names it) instead of holding them whole, and the bands must equal the whole-map resize that
the Python API and ComfyUI get, to the bit, or the same photo would give other files.

What PyTorch's CPU kernel computes (measured with impulse inputs; float32, fused multiply-adds):
- per axis: src = fma(scale, dst + ½, −½), clamped at 0, with scale = in / out in float32; i₀ = ⌊src⌋ (at most
  in − 1), i₁ = i₀ + 1 (at most in − 1; i₁ = i₀ when in = out), λ₁ = src − i₀ clamped to [0, 1], λ₀ = 1 − λ₁;
- out = fma(λ₀ʸ, r₀, λ₁ʸ · r₁), where rᵢ = fma(λ₀ˣ, a, λ₁ˣ · b) are the rows i₀ʸ, i₁ʸ resized along x,
  when both axes grow (how the dense maps of a photo larger than the network input come back). Where an axis
  shrinks or keeps its size the kernel orders its operations otherwise, so only upscales are made here.
The x pass depends only on the source row, so each band resizes the few source rows it reads once.
`torch.addcmul` is the fused multiply-add. `exact_here()` checks the whole scheme against `F.interpolate` once
per process; where they differ (another CPU kernel), callers keep the whole-map resize.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor


def _axis_taps(n_in: int, n_out: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(i₀, i₁, λ₀, λ₁) of one axis, as the kernel computes them (module docstring)."""
    scale = float(np.float32(n_in) / np.float32(n_out))
    # (dst + ½) · scale is exact in float64 (24 × 15 significant bits), so one rounding to float32 is the fma
    src = ((torch.arange(n_out, dtype=torch.float64) + 0.5) * scale - 0.5).to(torch.float32).clamp(min=0)
    first = src.floor().to(torch.int64).clamp(max=n_in - 1)
    second = (first + 1).clamp(max=n_in - 1)
    weight = (src - first.to(torch.float32)).clamp(0.0, 1.0)
    return first, second, 1.0 - weight, weight


# The kernel takes another path for small outputs (below ~4,000 pixels it rounds otherwise); banding is for huge
# maps, so it is proven, and used, from this size on.
MIN_BANDED_PIXELS = 1 << 16


def is_upscale(source_hw: tuple[int, int], size_hw: tuple[int, int]) -> bool:
    """Whether both axes grow to a map of at least MIN_BANDED_PIXELS: the resizes `BandedResize` makes."""
    grows = size_hw[0] > source_hw[0] and size_hw[1] > source_hw[1]
    return grows and size_hw[0] * size_hw[1] >= MIN_BANDED_PIXELS


class BandedResize:
    """Rows of the bilinear upscale of one (C, h, w) float32 map to (C, H, W), made on request."""

    def __init__(self, source: Tensor, size_hw: tuple[int, int]) -> None:
        self.source = source.to(torch.float32).contiguous()
        self.size_hw = (int(size_hw[0]), int(size_hw[1]))
        _, h, w = self.source.shape
        height, width = self.size_hw
        if not is_upscale((h, w), self.size_hw):
            raise ValueError(
                f"BandedResize only upscales to ≥ {MIN_BANDED_PIXELS} pixels, got {h}x{w} → {height}x{width}"
            )
        self._y = _axis_taps(h, height)
        x0, x1, wx0, wx1 = _axis_taps(w, width)
        self._x = (x0, x1, wx0, wx1)

    def _along_x(self, source_rows: Tensor) -> Tensor:
        """The given source rows resized along x: (C, len(rows), W)."""
        x0, x1, wx0, wx1 = self._x
        picked = self.source.index_select(1, source_rows)
        return torch.addcmul(picked.index_select(2, x1) * wx1, picked.index_select(2, x0), wx0)

    def rows(self, rows: Tensor | np.ndarray) -> Tensor:
        """Output rows `rows` (int64 indices), (C, len(rows), W) float32."""
        rows = torch.as_tensor(rows, dtype=torch.int64)
        y0, y1, wy0, wy1 = (t.index_select(0, rows) for t in self._y)
        needed, where = torch.unique(torch.cat([y0, y1]), return_inverse=True)
        resized = self._along_x(needed)
        top, bottom = resized.index_select(1, where[: len(rows)]), resized.index_select(1, where[len(rows) :])
        return bottom.mul_(wy1[:, None]).addcmul_(top, wy0[:, None])  # fma(λ₀ʸ, r₀, λ₁ʸ · r₁), in place


RowsMaker = Callable[[np.ndarray], np.ndarray]


class BandedArray:
    """A read-only (H, W, C) float32 map that is made a band of rows at a time, never held whole: the writers'
    `formats.row_bands.RowBands`, which is all its consumers know of it.

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


def upscaled_map(source: Tensor, size_hw: tuple[int, int], finish: Callable[[Tensor], Tensor]) -> BandedArray:
    """The bilinear upscale of one (C, h, w) CPU map to (H, W, C), made a band of rows at a time when read: each
    band (C, rows, W) goes through `finish` (which may work in place) before it becomes (rows, W, C) numpy."""
    resize = BandedResize(source, size_hw)

    def make(rows: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return finish(resize.rows(torch.from_numpy(rows))).permute(1, 2, 0).numpy()

    return BandedArray((*resize.size_hw, int(source.shape[0])), make)


# (C, h, w) → (H, W) upscales the self-check makes: small and large factors, odd widths (vector loop tails)
_PROBES = ((3, 37, 53, 300, 261), (2, 33, 31, 347, 190), (3, 120, 90, 701, 523), (1, 9, 7, 1000, 999))


@lru_cache(maxsize=1)
def exact_here() -> bool:
    """Whether `BandedResize` equals `F.interpolate` bit for bit on this machine (checked once per process)."""
    generator = torch.Generator().manual_seed(20261202)
    with torch.inference_mode():
        for channels, h, w, height, width in _PROBES:
            source = torch.randn((channels, h, w), generator=generator) * 10.0 ** torch.randint(
                -3, 4, (channels, h, w), generator=generator
            )
            whole = F.interpolate(source[None], size=(height, width), mode="bilinear", align_corners=False)[0]
            banded = BandedResize(source, (height, width))
            split = torch.cat(
                [banded.rows(torch.arange(s, min(s + 7, height))) for s in range(0, height, 7)], 1
            )
            if not torch.equal(split, whole):
                return False
    return True
