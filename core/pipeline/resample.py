"""OpenCV-compatible resize and affine warp in torch (no OpenCV dependency).

The reference test pipelines use `cv2.resize` (INTER_LINEAR / INTER_CUBIC / INTER_AREA) and `cv2.warpAffine`
on uint8 images. We reproduce their sampling geometry exactly and their arithmetic in float32:
- linear / cubic resize: same source-coordinate rule ((dst + 0.5)·scale − 0.5, replicate border, cubic
  A = −0.75), which is what `F.interpolate(align_corners=False)` computes;
- INTER_AREA: true box-overlap weights when both axes shrink, and OpenCV's "area-mode linear" coefficients
  when any axis grows (that is what cv2 does — it is not an area average then);
- warpAffine: the inverse map in float64, source coordinates quantised to 1/32 pixel exactly like OpenCV's
  fixed-point remap (INTER_BITS = 5), constant-0 border, bilinear or bicubic (A = −0.75) taps.
For 8-bit sources (`quantize=True`) INTER_LINEAR resize, INTER_AREA-when-enlarging and warpAffine emulate
OpenCV's fixed-point arithmetic bit for bit (11-bit resize weights; 15-bit remap tables); cubic resize (float64)
and true area averaging use float weights and round, which leaves rare ±1 grey-level differences (measured
numbers in docs/pipeline.md). Non-8-bit sources are resampled in float32. Every function reads uint8 or float
images and returns float (float32 for uint8 input): 8-bit photos stay 8-bit until a resampler reads the pixels it
needs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .errors import PipelineError

ResizeMode = Literal["linear", "cubic", "area"]
WarpMode = Literal["linear", "cubic"]

_CUBIC_A = -0.75


def _float_dtype(x: Tensor) -> torch.dtype:
    """The dtype a resampler returns for `x`: its own when floating point, float32 for 8-bit pixels."""
    return x.dtype if x.is_floating_point() else torch.float32


def _finish(x: Tensor, quantize: bool) -> Tensor:
    x = x.clamp(0.0, 255.0)
    return torch.round(x) if quantize else x


def _area_taps(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Box-overlap weights of OpenCV's INTER_AREA for a shrinking axis: (out, k) indices and weights."""
    scale = in_size / out_size
    rows: list[list[tuple[int, float]]] = []
    for d in range(out_size):
        fs1 = d * scale
        fs2 = fs1 + scale
        cell = min(scale, in_size - fs1)
        s1 = math.ceil(fs1)
        s2 = min(math.floor(fs2), in_size - 1)
        s1 = min(s1, s2)
        taps: list[tuple[int, float]] = []
        if s1 - fs1 > 1e-3:
            taps.append((s1 - 1, (s1 - fs1) / cell))
        taps.extend((s, 1.0 / cell) for s in range(s1, s2))
        if fs2 - s2 > 1e-3:
            taps.append((s2, min(min(fs2 - s2, 1.0), cell) / cell))
        rows.append(taps)
    width = max(len(r) for r in rows)
    idx = np.zeros((out_size, width), dtype=np.int64)
    wts = np.zeros((out_size, width), dtype=np.float64)
    for d, taps in enumerate(rows):
        for j, (s, w) in enumerate(taps):
            idx[d, j], wts[d, j] = s, w
    return idx, wts


def _area_mode_linear_taps(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV's INTER_AREA coefficients when an axis is enlarged (2-tap linear with a special phase)."""
    scale = in_size / out_size
    inv = out_size / in_size
    d = np.arange(out_size, dtype=np.float64)
    s = np.floor(d * scale).astype(np.int64)
    f = ((d + 1) - (s + 1) * inv).astype(np.float32).astype(np.float64)
    f = np.where(f <= 0, 0.0, f - np.floor(f))
    edge = s >= in_size - 1
    f = np.where(edge, 0.0, f)
    s = np.where(edge, in_size - 1, s)
    idx = np.stack([s, np.minimum(s + 1, in_size - 1)], axis=1)
    wts = np.stack([1.0 - f, f], axis=1)
    return idx, wts


def _apply_taps(x: Tensor, dim: int, idx: np.ndarray, wts: np.ndarray) -> Tensor:
    """Resample `x` along `dim` with per-output tap indices/weights, one tap at a time (bounded memory)."""
    index = torch.from_numpy(idx).to(x.device)
    weight = torch.from_numpy(wts).to(device=x.device, dtype=_float_dtype(x))
    shape = [1] * x.ndim
    shape[dim] = idx.shape[0]
    out = None
    for j in range(idx.shape[1]):
        term = x.index_select(dim, index[:, j]) * weight[:, j].reshape(shape)
        out = term if out is None else out + term
    assert out is not None
    return out


def _phase(in_size: int, out_size: int, area_mode: bool) -> tuple[np.ndarray, np.ndarray]:
    """cv2's source index and float32 fraction per output pixel (INTER_LINEAR, or INTER_AREA when enlarging)."""
    inv = out_size / in_size
    scale = 1.0 / inv
    d = np.arange(out_size, dtype=np.float64)
    if area_mode:
        s = np.floor(d * scale).astype(np.int64)
        f = ((d + 1) - (s + 1) * inv).astype(np.float32)
        f = np.where(f <= 0, np.float32(0), (f - np.floor(f)).astype(np.float32))
    else:
        f = ((d + 0.5) * scale - 0.5).astype(np.float32)
        s = np.floor(f).astype(np.int64)
        f = (f - s.astype(np.float32)).astype(np.float32)
    return s, f.astype(np.float32)


def _weights_11bit(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w1 = np.rint(f * np.float32(2048)).astype(np.int64)
    w0 = np.rint((np.float32(1) - f) * np.float32(2048)).astype(np.int64)
    return w0, w1


def _resize_linear_u8(x: Tensor, out_h: int, out_w: int, area_mode: bool = False) -> Tensor:
    """Bit-exact emulation of cv2.resize INTER_LINEAR (and INTER_AREA when an axis grows) on uint8, OpenCV 4.x:
    11-bit fixed-point weights, then the SIMD vertical pass `((S0 >> 4)·b0 >> 16 + (S1 >> 4)·b1 >> 16 + 2) >> 2`
    (verified bit-exact on the fixtures)."""
    _, _, in_h, in_w = x.shape
    dev = x.device

    def tensor(a: np.ndarray) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(dev)

    sx, fx = _phase(in_w, out_w, area_mode)
    low, high = sx < 0, sx >= in_w - 1  # columns clamp the phase at both borders
    fx = np.where(low | high, np.float32(0), fx)
    sx = np.clip(sx, 0, in_w - 1)
    a0, a1 = _weights_11bit(fx)
    sy, fy = _phase(in_h, out_h, area_mode)  # rows keep the phase; their indices are clipped
    top, bottom = np.clip(sy, 0, in_h - 1), np.clip(sy + 1, 0, in_h - 1)
    # Only the source rows the vertical pass reads are resampled horizontally, and only at the columns it reads
    # (each row's horizontal pass is independent, so this is the same arithmetic): a 9000×6000 photo never
    # becomes a full-size int64 copy (1.3 GB), just (rows read) × (output width).
    used = np.unique(np.concatenate([top, bottom]))
    picked = tensor(used).reshape(-1, 1)

    def columns(cols: np.ndarray) -> Tensor:
        return x[:, :, picked, tensor(cols).reshape(1, -1)].to(torch.int64)

    rows = columns(sx) * tensor(a0) + columns(np.minimum(sx + 1, in_w - 1)) * tensor(a1)
    b0, b1 = (tensor(b).reshape(1, 1, -1, 1) for b in _weights_11bit(fy))
    s0 = rows.index_select(2, tensor(np.searchsorted(used, top)))
    s1 = rows.index_select(2, tensor(np.searchsorted(used, bottom)))
    out = ((((s0 >> 4) * b0) >> 16) + (((s1 >> 4) * b1) >> 16) + 2) >> 2
    return out.clamp(0, 255).to(_float_dtype(x))


def resize(x: Tensor, size_hw: tuple[int, int], mode: ResizeMode, *, quantize: bool = False) -> Tensor:
    """Resize (B, C, H, W) images in 0–255 units (uint8, or float) like `cv2.resize(img, (w, h),
    interpolation=mode)`; the result is float."""
    out_h, out_w = int(size_hw[0]), int(size_hw[1])
    in_h, in_w = int(x.shape[-2]), int(x.shape[-1])
    if (out_h, out_w) == (in_h, in_w):
        return x.to(_float_dtype(x), copy=True)
    if mode == "linear" and in_w == 2 * out_w and in_h == 2 * out_h:
        mode = "area"  # cv2 switches an exact 2× linear downscale to its (identical, faster) area path
    if mode == "linear" and quantize:
        return _resize_linear_u8(x, out_h, out_w)
    cubic_in_float64 = mode == "cubic" and quantize and x.device.type != "mps"
    if not x.is_floating_point() and not (mode == "area" or cubic_in_float64):
        x = x.to(torch.float32)  # the paths below that read the pixels themselves take 8-bit data as it is
    if mode == "linear":
        y = F.interpolate(x, size=(out_h, out_w), mode="bilinear", align_corners=False)
    elif cubic_in_float64:
        # the reference's 8-bit cubic resize behaves like exact (unquantised) weights: float64 matches it on all
        # but a handful of exact .5 ties
        y = F.interpolate(x.double(), size=(out_h, out_w), mode="bicubic", align_corners=False).to(
            _float_dtype(x)
        )
    elif mode == "cubic":
        y = F.interpolate(x, size=(out_h, out_w), mode="bicubic", align_corners=False)
    elif mode == "area":
        if in_w >= out_w and in_h >= out_h:
            taps_w, taps_h = _area_taps(in_w, out_w), _area_taps(in_h, out_h)
        elif quantize:
            return _resize_linear_u8(x, out_h, out_w, area_mode=True)
        else:
            taps_w, taps_h = _area_mode_linear_taps(in_w, out_w), _area_mode_linear_taps(in_h, out_h)
        y = _apply_taps(x, -1, *taps_w)
        y = _apply_taps(y, -2, *taps_h)
        if quantize and in_w == 2 * out_w and in_h == 2 * out_h:
            return torch.floor(y.clamp(0.0, 255.0) + 0.5)  # cv2's 2×2 fast path rounds halves up
    else:
        raise PipelineError(f"unknown resize mode {mode!r}; use 'linear', 'cubic' or 'area'")
    return _finish(y, quantize)


def _invert_affine(matrix: np.ndarray) -> np.ndarray:
    """Destination→source map, computed in float64 as cv2.warpAffine does."""
    m = np.asarray(matrix, dtype=np.float64).reshape(2, 3)
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    d = 1.0 / det if det != 0 else 0.0
    a11, a22 = m[1, 1] * d, m[0, 0] * d
    a12, a21 = -m[0, 1] * d, -m[1, 0] * d
    b1 = -a11 * m[0, 2] - a12 * m[1, 2]
    b2 = -a21 * m[0, 2] - a22 * m[1, 2]
    return np.array([[a11, a12, b1], [a21, a22, b2]], dtype=np.float64)


def _cubic_weights(t: Tensor) -> Tensor:
    """Keys cubic (A = −0.75) weights for taps at offsets −1, 0, 1, 2 given the fraction t; shape (4, …)."""
    a = _CUBIC_A
    w0 = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a
    w1 = ((a + 2) * t - (a + 3)) * t * t + 1
    u = 1 - t
    w2 = ((a + 2) * u - (a + 3)) * u * u + 1
    w3 = 1 - w0 - w1 - w2
    return torch.stack([w0, w1, w2, w3])


def _source_grid(inverse: np.ndarray, out_w: int, out_h: int) -> tuple[np.ndarray, np.ndarray]:
    """Source coordinates in 1/32 pixel units (int64), OpenCV's fixed-point rule (AB_BITS 10, INTER_BITS 5)."""
    ab_scale = 1024.0
    round_delta = 16  # AB_SCALE / INTER_TAB_SIZE / 2
    xs = np.arange(out_w, dtype=np.float64)
    ys = np.arange(out_h, dtype=np.float64)
    adelta = np.rint(inverse[0, 0] * xs * ab_scale).astype(np.int64)
    bdelta = np.rint(inverse[1, 0] * xs * ab_scale).astype(np.int64)
    x0 = np.rint((inverse[0, 1] * ys + inverse[0, 2]) * ab_scale).astype(np.int64) + round_delta
    y0 = np.rint((inverse[1, 1] * ys + inverse[1, 2]) * ab_scale).astype(np.int64) + round_delta
    gx = (x0[:, None] + adelta[None, :]) >> 5
    gy = (y0[:, None] + bdelta[None, :]) >> 5
    return gx, gy


_WARP_BAND_ROWS = 128  # source rows the separable warp's horizontal pass transposes at a time


def is_axis_aligned(matrix: np.ndarray) -> bool:
    """No rotation or shear (in the matrix or its inverse): each source coordinate depends on one output axis."""
    m = np.asarray(matrix, dtype=np.float64).reshape(2, 3)
    return m[0, 1] == 0 and m[1, 0] == 0


def _separable_warp(
    x: Tensor, ix: Tensor, iy: Tensor, wx: Tensor, wy: Tensor, offsets: tuple[int, ...]
) -> Tensor:
    """Axis-aligned warp as two 1-D tap passes (same taps and weights as the 2-D remap, much cheaper).

    The horizontal pass reads `_WARP_BAND_ROWS` source rows at a time transposed, so its column gathers are row
    copies (a gather along the last axis costs ~40× more); the products and their order are unchanged, so are
    the bits. Only source rows the vertical pass reads are filtered."""
    channels, in_h, in_w = x.shape
    col_i, col_w = ix[0], wx[:, 0]  # source column per output column, weights (taps, out_w)
    row_i, row_w = iy[:, 0], wy[:, :, 0]
    # the source rows the vertical pass reads (offsets ascend, and clamping keeps the order)
    first = min(max(int(row_i.min()) + offsets[0], 0), in_h - 1)
    last = min(max(int(row_i.max()) + offsets[-1], 0), in_h - 1)
    columns = []
    for t, o in enumerate(offsets):
        sx = col_i + o
        columns.append((sx.clamp(0, in_w - 1), (col_w[t] * ((sx >= 0) & (sx < in_w))).to(x.dtype)[:, None]))
    tmp = torch.empty((channels, last + 1 - first, col_i.numel()), dtype=x.dtype, device=x.device)
    for start in range(first, last + 1, _WARP_BAND_ROWS):
        stop = min(start + _WARP_BAND_ROWS, last + 1)
        band = x[:, start:stop].transpose(1, 2).contiguous()  # (C, in_w, rows)
        acc = None
        for sx, w in columns:
            term = band.index_select(1, sx) * w
            acc = term if acc is None else acc + term
        assert acc is not None
        tmp[:, start - first : stop - first] = acc.transpose(1, 2)
    row_i = row_i - first  # rows of `tmp`; a tap outside them is outside the image
    band_h = last + 1 - first
    out = None
    for t, o in enumerate(offsets):
        sy = row_i + o
        w = (row_w[t] * ((sy >= 0) & (sy < band_h))).to(x.dtype)
        term = tmp.index_select(1, sy.clamp(0, band_h - 1)) * w[:, None]
        out = term if out is None else out + term
    assert out is not None
    return out


@lru_cache(maxsize=2)
def _remap_table(mode: str) -> np.ndarray:
    """OpenCV's 15-bit 2-D remap weights per 1/32 fraction pair: (32 fy, 32 fx, k, k) int64, including its
    rule that forces each 2-D kernel to sum to exactly 32768."""
    f32 = np.float32
    t = np.arange(32, dtype=np.float32) * f32(1.0 / 32)
    if mode == "linear":
        one = np.stack([f32(1) - t, t], axis=1)
    else:
        a = f32(_CUBIC_A)
        c0 = ((a * (t + f32(1)) - f32(5) * a) * (t + f32(1)) + f32(8) * a) * (t + f32(1)) - f32(4) * a
        c1 = ((a + f32(2)) * t - (a + f32(3))) * t * t + f32(1)
        u = f32(1) - t
        c2 = ((a + f32(2)) * u - (a + f32(3))) * u * u + f32(1)
        c3 = f32(1) - c0 - c1 - c2
        one = np.stack([c0, c1, c2, c3], axis=1).astype(np.float32)
    k = one.shape[1]
    table = np.zeros((32, 32, k, k), dtype=np.int64)
    half = k // 2
    for i in range(32):
        for j in range(32):
            w = (one[i][:, None] * one[j][None, :]).astype(np.float32)
            itab = np.rint(w * f32(32768)).astype(np.int64)
            diff = int(itab.sum()) - 32768
            if diff != 0 and k > 2:
                lo = hi = (half, half)
                for k1 in range(half, half + 2):
                    for k2 in range(half, half + 2):
                        if itab[k1, k2] < itab[lo]:
                            lo = (k1, k2)
                        elif itab[k1, k2] > itab[hi]:
                            hi = (k1, k2)
                if diff < 0:
                    itab[hi] -= diff
                else:
                    itab[lo] -= diff
            table[i, j] = itab
    return table


def _warp_u8(
    x: Tensor, ix: Tensor, iy: Tensor, fxi: Tensor, fyi: Tensor, mode: str, *, aligned: bool = False
) -> Tensor:
    """Fixed-point remap of 8-bit data exactly as OpenCV: Σ w·v with 15-bit weights, (acc + 2^14) >> 15.
    `aligned`: the source column depends only on the output column and the row only on the output row (no
    rotation or shear), which lets every tap gather whole rows and columns (`_warp_u8_aligned`)."""
    table = torch.from_numpy(_remap_table(mode).astype(np.int32)).to(x.device)
    offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
    if aligned:
        acc = _warp_u8_aligned(x, ix[0], iy[:, 0], fxi[0], fyi[:, 0], table, offsets)
    else:
        acc = _warp_u8_general(x, ix, iy, fxi, fyi, table, offsets)
    return ((acc + (1 << 14)) >> 15).clamp(0, 255).to(_float_dtype(x)).contiguous()


def _warp_u8_general(
    x: Tensor,
    ix: Tensor,
    iy: Tensor,
    fxi: Tensor,
    fyi: Tensor,
    table: Tensor,
    offsets: tuple[int, ...],
) -> Tensor:
    """The accumulator of `_warp_u8` for any affine warp: every tap gathered pixel by pixel."""
    channels, in_h, in_w = x.shape
    acc = torch.zeros((channels, *ix.shape), dtype=torch.int32, device=x.device)
    for j, oy in enumerate(offsets):
        sy = iy + oy
        valid_y = (sy >= 0) & (sy < in_h)
        rows = sy.clamp(0, in_h - 1)
        for i, ox in enumerate(offsets):
            sx = ix + ox
            valid = valid_y & (sx >= 0) & (sx < in_w)
            weight = table[:, :, j, i][fyi, fxi] * valid
            # each tap gathered from `x` as it is (any strides, no full-size copy), then widened to int32:
            # |acc| < 16·255·2^15·1.3 fits
            acc += x[:, rows, sx.clamp(0, in_w - 1)].to(torch.int32) * weight.to(torch.int32)
    return acc


def _warp_u8_aligned(
    x: Tensor,
    cols: Tensor,
    rows: Tensor,
    fx: Tensor,
    fy: Tensor,
    table: Tensor,
    offsets: tuple[int, ...],
) -> Tensor:
    """The accumulator of `_warp_u8` for an axis-aligned warp, the same integers, from whole-row copies.

    Per tap row `oy` the source rows are copied once and transposed (columns become rows); per tap column `ox`
    its columns are then row copies too (a gather along the last axis costs ~40× more), and the tap's 2-D
    weights come from a table lookup of whole rows and columns. OpenCV's 2-D weights are not a product of 1-D
    ones (rounding, the sum-to-32768 rule), so they stay 2-D; only the gathers become 1-D. Out-of-image taps
    get weight 0, as in `_warp_u8`. Works transposed, (C, out_w, out_h), and returns (C, out_h, out_w).
    """
    channels, in_h, in_w = x.shape
    acc = torch.zeros((channels, cols.numel(), rows.numel()), dtype=torch.int32, device=x.device)
    col_taps = []
    for ox in offsets:
        sx = cols + ox
        col_taps.append((sx.clamp(0, in_w - 1), ((sx >= 0) & (sx < in_w)).to(torch.int32)))
    for j, oy in enumerate(offsets):
        sy = rows + oy
        valid_y = ((sy >= 0) & (sy < in_h)).to(torch.int32)
        band = x.index_select(1, sy.clamp(0, in_h - 1)).transpose(1, 2).contiguous()  # (C, in_w, out_h)
        by_row = table[:, :, j].index_select(0, fy) * valid_y[:, None, None]  # (out_h, 32 fx, k)
        for i, (sx, valid_x) in enumerate(col_taps):
            weight = by_row[:, :, i].t().index_select(0, fx) * valid_x[:, None]  # (out_w, out_h)
            acc += band.index_select(1, sx).to(torch.int32) * weight
    return acc.transpose(1, 2)


def warp_affine(
    x: Tensor,
    matrix: np.ndarray,
    out_size_wh: tuple[int, int],
    mode: WarpMode,
    *,
    quantize: bool = False,
) -> Tensor:
    """`cv2.warpAffine(img, matrix, (w, h), flags=mode)` with a constant-0 border, for (C, H, W) images in 0–255
    units (uint8, or float); the result is float."""
    out_w, out_h = int(out_size_wh[0]), int(out_size_wh[1])
    channels, in_h, in_w = (int(s) for s in x.shape)
    gx_np, gy_np = _source_grid(_invert_affine(matrix), out_w, out_h)
    device = x.device
    gx = torch.from_numpy(gx_np).to(device)
    gy = torch.from_numpy(gy_np).to(device)
    ix, iy = gx >> 5, gy >> 5
    if quantize and mode in ("linear", "cubic"):
        return _warp_u8(x, ix, iy, gx & 31, gy & 31, mode, aligned=is_axis_aligned(matrix))
    x = x.to(_float_dtype(x))
    fx = (gx & 31).to(torch.float32) / 32.0
    fy = (gy & 31).to(torch.float32) / 32.0
    if mode == "linear":
        offsets = (0, 1)
        wx = torch.stack([1 - fx, fx])
        wy = torch.stack([1 - fy, fy])
    elif mode == "cubic":
        offsets = (-1, 0, 1, 2)
        wx = _cubic_weights(fx)
        wy = _cubic_weights(fy)
    else:
        raise PipelineError(f"unknown warp mode {mode!r}; use 'linear' or 'cubic'")
    if is_axis_aligned(matrix):
        out = _separable_warp(x, ix, iy, wx, wy, offsets)
    else:
        flat = x.reshape(channels, in_h * in_w)
        out = torch.zeros((channels, out_h, out_w), dtype=x.dtype, device=device)
        for j, oy in enumerate(offsets):
            sy = iy + oy
            valid_y = (sy >= 0) & (sy < in_h)
            for i, ox in enumerate(offsets):
                sx = ix + ox
                valid = valid_y & (sx >= 0) & (sx < in_w)
                index = (sy.clamp(0, in_h - 1) * in_w + sx.clamp(0, in_w - 1)).reshape(-1)
                weight = (wy[j] * wx[i] * valid).to(x.dtype)
                out += flat[:, index].reshape(channels, out_h, out_w) * weight
    return _finish(out, quantize)
