"""Bilinear upscale a band of rows at a time, bit-identical to the whole-map
`F.interpolate(x, size, mode="bilinear", align_corners=False)` on the CPU.

Why: a 9000×6000 normal or point map is 648 MB of float32. The engine's job makes such maps band by band while
the bundle is written (`formats.arrays.BandedArray`) instead of holding them whole, and the bands must equal the
whole-map resize that the Python API and ComfyUI get, to the bit, or the same photo would give other files.

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

from functools import lru_cache

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
