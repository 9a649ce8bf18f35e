"""UDP heatmap decoding with DARK-UDP refinement, flip test and the crop → image mapping, batched in torch.

Reproduces the reference codec (argmax → Gaussian modulation → log → one Newton step) bit for bit:
- argmax per channel (first index on ties), score = the maximum, location −1 where the maximum ≤ 0;
- modulation: 11×11 Gaussian, OpenCV's default σ = 0.3·((11 − 1)/2 − 1) + 0.8 = 2.0, on a zero-padded map,
  rescaled so each channel keeps its original maximum; clip to [1e-3, 50]; log; edge padding by 1. The blur
  emulates `cv2.GaussianBlur`'s float32 FMA passes exactly, but only where the result is used (the 7 taps per
  keypoint and the candidates for each channel's maximum), so it stays cheap;
- the Newton step (Hessian + float32-eps·I, `np.linalg.inv` in float64) runs in numpy on the B·K·7 taps,
  with numpy's float32 log, as the reference; the taps follow the reference's flat-index arithmetic, so a
  location of −1 reads the neighbours the reference reads (the previous channel's padding).
The DARK step amplifies last-bit differences ~10⁴× on flat heatmaps, which is why the arithmetic is matched.
Two documented deviations: a non-finite step (the reference gives NaN, e.g. for an all-zero channel) keeps
the argmax; and the option `max_refine_step` (heatmap pixels; default None = the reference) keeps the argmax
when the step is longer than that on either axis — a near-singular Hessian, which the reference follows and
throws the point far away. Steps on well-formed (trained) heatmaps are < 1 px, so 2.0 is a safe guard;
random-weight heatmaps take steps of 40+ px on many channels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .errors import PipelineError

DEFAULT_MAX_REFINE_STEP: float | None = None  # reference behaviour; 2.0 is a safe guard for trained models
_F32_EPS = float(np.finfo(np.float32).eps)
_BLUR_CHANNELS = 8  # heatmaps blurred at a time on the CPU while looking for each one's maximum


def opencv_gaussian_kernel(size: int, sigma: float = 0.0) -> Tensor:
    """`cv2.getGaussianKernel(size, sigma, CV_32F)`: σ ≤ 0 means 0.3·((size − 1)·0.5 − 1) + 0.8."""
    if size % 2 != 1 or size < 1:
        raise PipelineError(f"Gaussian kernel size must be odd and positive, got {size}")
    if sigma <= 0:
        sigma = 0.3 * ((size - 1) * 0.5 - 1) + 0.8
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    k = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return torch.from_numpy((k / k.sum()).astype(np.float32))


def heatmap_maximum(heatmaps: Tensor) -> tuple[Tensor, Tensor]:
    """Argmax location (x, y) as float32 and the maximum; location −1 where the maximum is ≤ 0."""
    b, k, h, w = heatmaps.shape
    flat = heatmaps.reshape(b, k, h * w)
    # torch.max does not promise the first index on ties; argmax does (as numpy). The maximum is the value
    # there (NaN where a NaN is: argmax takes NaN as the largest, as max does).
    idx = flat.argmax(dim=2)
    vals = flat.gather(2, idx[..., None])[..., 0]
    locs = torch.stack([(idx % w), torch.div(idx, w, rounding_mode="floor")], dim=-1).to(torch.float32)
    locs = torch.where((vals <= 0)[..., None], torch.full_like(locs, -1.0), locs)
    return locs, vals


def _blur_fast(x: Tensor, taps: list[float], h: int, w: int) -> Tensor:
    """Separable blur of a zero-padded (…, h + 2r, w + 2r) map in plain float32 (last-bit differences to cv2)."""
    rows = x[..., :, 0:w] * taps[0]
    for t in range(1, len(taps)):
        rows.add_(x[..., :, t : t + w], alpha=taps[t])
    out = rows[..., 0:h, :] * taps[0]
    for t in range(1, len(taps)):
        out.add_(rows[..., t : t + h, :], alpha=taps[t])
    return out


def _zero_padded_windows(maps: Tensor, channel: Tensor, y: Tensor, x: Tensor, n: int) -> Tensor:
    """(P, n, n) windows centred on (y, x) of the zero-padded maps, read from the unpadded (N, h, w) maps."""
    _, h, w = maps.shape
    span = torch.arange(n, device=maps.device) - n // 2
    rows = (y[:, None] + span)[:, :, None]  # (P, n, 1)
    cols = (x[:, None] + span)[:, None, :]  # (P, 1, n)
    values = maps[channel[:, None, None], rows.clamp(0, h - 1), cols.clamp(0, w - 1)]
    inside = (rows >= 0) & (rows < h) & (cols >= 0) & (cols < w)
    return torch.where(inside, values, torch.zeros((), dtype=values.dtype, device=values.device))


def _blur_exact_at(maps: Tensor, channel: Tensor, y: Tensor, x: Tensor, taps: list[float]) -> Tensor:
    """`cv2.GaussianBlur` of a float32 map at selected pixels, bit for bit.

    OpenCV's float separable filter accumulates the row pass as `s = fma(src_k, k_k, s)` from zero and the
    symmetric column pass as `fma(centre, k_0, 0)` then `fma(up_k + down_k, k_k, s)`. An fma is emulated
    exactly in float64 (a float32 product is exact there) and rounded once to float32. `maps` is (N, h, w),
    zero outside (the blur's constant border); (y, x) are its pixel coordinates.
    """
    n = len(taps)
    half = n // 2
    work = torch.device("cpu") if maps.device.type == "mps" else maps.device  # MPS has no float64
    window = _zero_padded_windows(maps, channel, y, x, n).to(work, torch.float64)  # (P, n, n)
    rows = torch.zeros(window.shape[:2], dtype=torch.float64, device=work)
    for t in range(n):
        rows = (window[:, :, t] * taps[t] + rows).to(torch.float32).to(torch.float64)
    out = (rows[:, half] * taps[half]).to(torch.float32)
    for t in range(1, half + 1):
        pair = (rows[:, half + t] + rows[:, half - t]).to(torch.float32)
        out = (pair.to(torch.float64) * taps[half + t] + out.to(torch.float64)).to(torch.float32)
    return out.to(maps.device)


def _maximum_candidates(maps: Tensor, taps: list[float]) -> Tensor:
    """(P, 3) channel, y, x of every pixel whose float32 blur is within 1e-5 relative of its channel's
    maximum: the pixels whose exact blur decides that maximum. On the CPU the maps are blurred
    `_BLUR_CHANNELS` at a time, so each pass stays in the cache (≈ 1.6× faster than whole stacks)."""
    n, h, w = maps.shape
    pad = len(taps) // 2
    step = _BLUR_CHANNELS if maps.device.type == "cpu" else n
    found = []
    for start in range(0, n, step):
        fast = _blur_fast(F.pad(maps[start : start + step], (pad, pad, pad, pad)), taps, h, w)
        fast_max = fast.reshape(fast.shape[0], -1).amax(dim=1)
        tol = fast_max.abs() * 1e-5 + 1e-30
        part = torch.nonzero(fast >= (fast_max - tol)[:, None, None])
        part[:, 0] += start
        found.append(part)
    return torch.cat(found)


def _modulated_at(heatmaps: Tensor, channel: Tensor, y: Tensor, x: Tensor, kernel_size: int) -> Tensor:
    """Reference-exact modulated values (blur, rescale to the channel's maximum) at selected pixels.

    The rescale needs each channel's blurred maximum: a float32 blur finds the candidates (values within
    1e-5 relative of the maximum), whose exact values decide it.
    """
    b, k, h, w = heatmaps.shape
    hm = heatmaps.to(torch.float32).reshape(b * k, h, w)
    taps = [float(v) for v in opencv_gaussian_kernel(kernel_size)]
    cand = _maximum_candidates(hm, taps)
    exact = _blur_exact_at(hm, cand[:, 0], cand[:, 1], cand[:, 2], taps)
    blur_max = torch.full((b * k,), float("-inf"), device=hm.device).scatter_reduce(
        0, cand[:, 0], exact, reduce="amax"
    )
    ratio = hm.reshape(b * k, -1).amax(dim=1) / blur_max  # float32 / float32, like the reference
    return _blur_exact_at(hm, channel, y, x, taps) * ratio[channel]


def _newton_taps(locs: Tensor, heatmaps: Tensor, kernel_size: int) -> np.ndarray:
    """The 7 clipped, modulated heatmap values around each argmax, (B, K, 7) float32 on the CPU.

    Index arithmetic follows the reference on the flattened, edge-padded (K, H + 2, W + 2) map of each image,
    including numpy's wrap-around of negative indices, so a location of −1 reads what the reference reads.
    """
    b, k, h, w = heatmaps.shape
    row, plane = w + 2, (w + 2) * (h + 2)
    total = k * plane
    offsets = torch.arange(k, device=locs.device, dtype=torch.int64) * plane
    index = (locs[..., 0] + 1 + (locs[..., 1] + 1) * row).to(torch.int64) + offsets  # (B, K)
    deltas = torch.tensor([0, 1, -1, row, -row, row + 1, -row - 1], device=locs.device, dtype=torch.int64)
    flat = (index[..., None] + deltas) % total  # (B, K, 7) into each image's padded stack
    chan = torch.div(flat, plane, rounding_mode="floor")
    rest = flat % plane
    py, px = torch.div(rest, row, rounding_mode="floor"), rest % row
    y, x = (py - 1).clamp(0, h - 1), (px - 1).clamp(0, w - 1)  # edge padding = clamped source pixel
    image = torch.arange(b, device=locs.device).reshape(b, 1, 1).expand_as(chan)
    values = _modulated_at(
        heatmaps, (image * k + chan).reshape(-1), y.reshape(-1), x.reshape(-1), kernel_size
    )
    return values.clamp(1e-3, 50.0).reshape(b, k, 7).detach().cpu().numpy().astype(np.float32)


def refine_dark_udp(
    locs: Tensor,
    heatmaps: Tensor,
    kernel_size: int = 11,
    max_refine_step: float | None = DEFAULT_MAX_REFINE_STEP,
) -> Tensor:
    """One DARK Newton step per keypoint; `locs` (B, K, 2) in heatmap pixels, returns refined float32 locs.

    Only B·K·7 numbers take part in the step, so it runs in numpy on the CPU with the reference's arithmetic:
    numpy's float32 log, float32 derivatives, `np.linalg.inv(H + eps·I)` in float64.
    """
    values = np.log(_newton_taps(locs, heatmaps, kernel_size))
    i_, ix1, ix1_, iy1, iy1_, ix1y1, ix1_y1_ = (values[..., j] for j in range(7))
    half = np.float32(0.5)
    dx = half * (ix1 - ix1_)
    dy = half * (iy1 - iy1_)
    dxx = ix1 - np.float32(2) * i_ + ix1_
    dyy = iy1 - np.float32(2) * i_ + iy1_
    dxy = half * (ix1y1 - ix1 - iy1 + i_ + i_ - ix1_ - iy1_ + ix1_y1_)
    hessian = np.stack([dxx, dxy, dxy, dyy], axis=-1).reshape(*dxx.shape, 2, 2) + _F32_EPS * np.eye(2)
    gradient = np.stack([dx, dy], axis=-1).astype(np.float32)
    with np.errstate(all="ignore"):
        try:
            inverse = np.linalg.inv(hessian)
        except np.linalg.LinAlgError:  # an exactly singular matrix somewhere: closed form, inf/NaN there
            det = hessian[..., 0, 0] * hessian[..., 1, 1] - hessian[..., 0, 1] * hessian[..., 1, 0]
            adj = np.stack(
                [hessian[..., 1, 1], -hessian[..., 0, 1], -hessian[..., 1, 0], hessian[..., 0, 0]], -1
            )
            inverse = adj.reshape(hessian.shape) / det[..., None, None]
        step = np.einsum("...mn,...n->...m", inverse, gradient)
    start = locs.detach().cpu().numpy().astype(np.float32)
    refined = (start - step).astype(np.float32)
    # A non-finite step (the reference returns NaN there, e.g. for an all-zero heatmap) keeps the argmax.
    bad = ~np.isfinite(step).all(axis=-1)
    if max_refine_step is not None:
        bad |= (np.abs(step) > max_refine_step).any(axis=-1)
    refined = np.where(bad[..., None], start, refined)
    return torch.from_numpy(refined).to(locs.device)


def decode_heatmaps(
    heatmaps: Tensor,
    input_size_wh: tuple[int, int] = (768, 1024),
    *,
    kernel_size: int = 11,
    max_refine_step: float | None = DEFAULT_MAX_REFINE_STEP,
) -> tuple[Tensor, Tensor]:
    """(B, K, H, W) heatmaps → keypoints (B, K, 2) in network-input units and scores (B, K) (= the maxima).

    Network-input units follow the reference: `kp_hm / (W_hm − 1, H_hm − 1) · input_size`.
    """
    if heatmaps.ndim == 3:
        heatmaps = heatmaps[None]
    if heatmaps.ndim != 4:
        raise PipelineError(f"heatmaps must be (B, K, H, W), got shape {tuple(heatmaps.shape)}")
    hm = heatmaps.to(torch.float32)
    _, _, h, w = hm.shape
    locs, scores = heatmap_maximum(hm)
    refined = refine_dark_udp(locs, hm, kernel_size, max_refine_step).cpu().numpy()
    kp = refined / np.array([w - 1, h - 1]) * np.array(input_size_wh)
    return torch.from_numpy(kp.astype(np.float32)).to(hm.device), scores


def flip_back(heatmaps_of_flipped: Tensor, flip_indices: Sequence[int]) -> Tensor:
    """Heatmaps of a horizontally flipped input → heatmaps in the original frame (no UDP shift, as reference)."""
    index = torch.as_tensor(list(flip_indices), dtype=torch.long, device=heatmaps_of_flipped.device)
    return heatmaps_of_flipped.flip(-1).index_select(1, index)


def average_flip(heatmaps: Tensor, heatmaps_of_flipped: Tensor, flip_indices: Sequence[int]) -> Tensor:
    """Flip-test average `(hm + flip_back(hm_f)) / 2`."""
    return (heatmaps + flip_back(heatmaps_of_flipped, flip_indices)) / 2


def crop_to_image(
    keypoints: Tensor | np.ndarray,
    center: np.ndarray,
    scale: np.ndarray,
    input_size_wh: tuple[int, int] = (768, 1024),
) -> np.ndarray:
    """Network-input keypoints → image pixels (reference convention): `kp / input · scale + center − scale/2`."""
    kp = keypoints.detach().cpu().numpy() if isinstance(keypoints, Tensor) else np.asarray(keypoints)
    kp = kp.astype(np.float64)
    size = np.asarray(input_size_wh, dtype=np.float64)
    sc = np.asarray(scale, dtype=np.float64)
    ce = np.asarray(center, dtype=np.float64)
    return (kp / size * sc + ce - 0.5 * sc).astype(np.float32)
