"""UDP heatmap decoding with DARK-UDP refinement, flip test and the crop → image mapping, batched in torch.

Reproduces the reference codec (argmax → Gaussian modulation → log → one Newton step) over a whole
(B, K, H, W) batch at once:
- blur: 11×11 Gaussian with OpenCV's default σ = 0.3·((11 − 1)/2 − 1) + 0.8 = 2.0 on a zero-padded map,
  rescaled so each channel keeps its original maximum; clip to [1e-3, 50]; log; edge padding by 1;
- Newton step with the Hessian + float32-eps·I, solved in float64 like the reference's `np.linalg.inv`;
- the derivative taps use the reference's flat-index arithmetic, so channels whose maximum is ≤ 0 (location
  −1) read the same neighbours the reference reads (values of the previous channel's padding).
One documented option: `max_refine_step` (heatmap pixels, default None = the reference). When the Newton step
is not finite or larger than this on either axis — a near-singular Hessian, which the reference follows and
throws the point hundreds of pixels away — the keypoint stays at its argmax. Steps on well-formed (trained)
heatmaps are < 1 px, so 2.0 is a safe guard; random-weight heatmaps take steps of 40+ px on many channels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

DEFAULT_MAX_REFINE_STEP: float | None = None  # reference behaviour; 2.0 is a safe guard for trained models
_F32_EPS = float(np.finfo(np.float32).eps)


def opencv_gaussian_kernel(size: int, sigma: float = 0.0) -> Tensor:
    """`cv2.getGaussianKernel(size, sigma, CV_32F)`: σ ≤ 0 means 0.3·((size − 1)·0.5 − 1) + 0.8."""
    if size % 2 != 1 or size < 1:
        raise ValueError(f"Gaussian kernel size must be odd and positive, got {size}")
    if sigma <= 0:
        sigma = 0.3 * ((size - 1) * 0.5 - 1) + 0.8
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    k = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return torch.from_numpy((k / k.sum()).astype(np.float32))


def heatmap_maximum(heatmaps: Tensor) -> tuple[Tensor, Tensor]:
    """Argmax location (x, y) as float32 and the maximum; location −1 where the maximum is ≤ 0."""
    b, k, h, w = heatmaps.shape
    flat = heatmaps.reshape(b, k, h * w)
    vals, idx = flat.max(dim=2)
    # torch.max does not promise the first index on ties; argmax does (as numpy).
    idx = flat.argmax(dim=2)
    locs = torch.stack([(idx % w), torch.div(idx, w, rounding_mode="floor")], dim=-1).to(torch.float32)
    locs = torch.where((vals <= 0)[..., None], torch.full_like(locs, -1.0), locs)
    return locs, vals


def modulate_heatmaps(heatmaps: Tensor, kernel_size: int = 11) -> Tensor:
    """Zero-padded Gaussian blur, rescaled per channel to the original maximum (float32)."""
    b, k, h, w = heatmaps.shape
    hm = heatmaps.to(torch.float32)
    kernel = opencv_gaussian_kernel(kernel_size)
    pad = kernel_size // 2
    taps = [float(v) for v in kernel]
    x = F.pad(hm, (pad, pad, pad, pad))  # explicit zero padding, as the reference
    rows = x[..., :, 0:w] * taps[0]
    for t in range(1, kernel_size):
        rows.add_(x[..., :, t : t + w], alpha=taps[t])
    x = rows[..., 0:h, :] * taps[0]
    for t in range(1, kernel_size):
        x.add_(rows[..., t : t + h, :], alpha=taps[t])
    x = x.reshape(b, k, h, w)
    origin_max = hm.reshape(b, k, -1).amax(dim=2)
    blur_max = x.reshape(b, k, -1).amax(dim=2)
    ratio = origin_max / blur_max
    return x * ratio[..., None, None]


def refine_dark_udp(
    locs: Tensor,
    heatmaps: Tensor,
    kernel_size: int = 11,
    max_refine_step: float | None = DEFAULT_MAX_REFINE_STEP,
) -> Tensor:
    """One DARK Newton step per keypoint; `locs` (B, K, 2) in heatmap pixels, returns refined float32 locs."""
    b, k, h, w = heatmaps.shape
    logs = modulate_heatmaps(heatmaps, kernel_size).clamp(1e-3, 50.0).log()
    padded = F.pad(logs.reshape(b * k, 1, h, w), (1, 1, 1, 1), mode="replicate").reshape(b, -1)
    total = padded.shape[1]
    row = w + 2
    offsets = torch.arange(k, device=locs.device, dtype=torch.int64) * (row * (h + 2))
    index = (locs[..., 0] + 1 + (locs[..., 1] + 1) * row).to(torch.int64) + offsets  # (B, K)

    def tap(delta: int) -> Tensor:
        return torch.gather(padded, 1, (index + delta) % total)  # numpy-style wrap of negative indices

    i_ = tap(0)
    ix1, ix1_ = tap(1), tap(-1)
    iy1, iy1_ = tap(row), tap(-row)
    ix1y1, ix1_y1_ = tap(row + 1), tap(-row - 1)
    dx = 0.5 * (ix1 - ix1_)
    dy = 0.5 * (iy1 - iy1_)
    dxx = ix1 - 2 * i_ + ix1_
    dyy = iy1 - 2 * i_ + iy1_
    dxy = 0.5 * (ix1y1 - ix1 - iy1 + i_ + i_ - ix1_ - iy1_ + ix1_y1_)

    work = torch.device("cpu") if locs.device.type == "mps" else locs.device  # MPS has no float64
    a = dxx.to(work, torch.float64) + _F32_EPS
    d = dyy.to(work, torch.float64) + _F32_EPS
    c = dxy.to(work, torch.float64)
    gx, gy = dx.to(work, torch.float64), dy.to(work, torch.float64)
    det = a * d - c * c
    step_x = (d * gx - c * gy) / det
    step_y = (a * gy - c * gx) / det
    step = torch.stack([step_x, step_y], dim=-1)
    refined = (locs.to(work, torch.float64) - step).to(torch.float32)
    if max_refine_step is not None:
        bad = ~torch.isfinite(step).all(dim=-1) | (step.abs() > max_refine_step).any(dim=-1)
        refined = torch.where(bad[..., None], locs.to(work), refined)
    return refined.to(locs.device)


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
        raise ValueError(f"heatmaps must be (B, K, H, W), got shape {tuple(heatmaps.shape)}")
    hm = heatmaps.to(torch.float32)
    _, _, h, w = hm.shape
    locs, scores = heatmap_maximum(hm)
    refined = refine_dark_udp(locs, hm, kernel_size, max_refine_step)
    factor = torch.tensor(
        [input_size_wh[0] / (w - 1), input_size_wh[1] / (h - 1)],
        dtype=torch.float64,
        device="cpu" if refined.device.type == "mps" else refined.device,
    )
    kp = (refined.to(factor.device, torch.float64) * factor).to(torch.float32).to(hm.device)
    return kp, scores


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
