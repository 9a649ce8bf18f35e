"""Network outputs → maps at the original image resolution (seg labels, unit normals, albedo, metric points,
matting alpha and foreground).

All functions take (B, C, 1024, 768) network-resolution tensors of one layout (seg, matting: stretched; dense:
resized and padded, described by a `DenseLayout`) and work on the tensor's device. The `*_banded` forms give the
same dense maps read in row bands (`formats.row_bands.RowBands`), made when read (bit-identical, see `banded`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ..formats.bundle import default_camera
from ..formats.row_bands import RowBands
from ..shading.conventions import model_to_canonical
from .banded import BandedResize, exact_here, is_upscale, upscaled_map
from .errors import PipelineError
from .preprocess import NET_W, DenseLayout


def count_nonfinite(x: Tensor) -> int:
    """Number of NaN/inf entries of a floating-point tensor (0 for other dtypes), on the tensor's device.

    Why not `(~isfinite(x)).sum()` alone: that makes two full-size temporaries and an int64 sum, ~90 core-ms for a
    1080p (H, W, 3) map on the CPU. One `aminmax` pass (no temporary; NaN propagates to both results, +inf shows in
    the max, -inf in the min) says whether every value is finite; only then is the exact count skipped."""
    if not x.is_floating_point() or x.numel() == 0 or is_all_finite(x):
        return 0
    return int((~torch.isfinite(x)).sum())


def is_all_finite(x: Tensor) -> bool:
    """`bool(torch.isfinite(x).all())` for a floating-point tensor in one `aminmax` pass with no full-size
    temporary (NaN propagates to both results, +inf shows in the max, -inf in the min): on the seg logits
    (29 × 1024 × 768) about a tenth of the boolean map's cost."""
    if x.numel() == 0:
        return True
    low, high = torch.aminmax(_memory_order(x))
    return bool(torch.isfinite(low) & torch.isfinite(high))


def _memory_order(x: Tensor) -> Tensor:
    """`x` with its dimensions permuted into memory order when that makes it contiguous (e.g. an (H, W, 3) result
    that is a permuted (3, H, W) map), for whole-tensor reductions: `aminmax` flattens a non-contiguous tensor
    into a full-size copy first (648 MB for a 54-megapixel map)."""
    order = sorted(range(x.ndim), key=lambda d: -x.stride(d))
    ordered = x.permute(*order)
    return ordered if ordered.is_contiguous() else x


def _bilinear(x: Tensor, size_hw: tuple[int, int]) -> Tensor:
    if tuple(x.shape[-2:]) == tuple(size_hw):
        return x
    return F.interpolate(x, size=size_hw, mode="bilinear", align_corners=False)


# Above this many bytes of full-resolution logits (29 × H × W float32: 0.96 GB at 4K, 3.8 GB at 8K) the labels are
# computed in bands of rows instead, so memory stays bounded (see `_banded_labels`).
SEG_FULL_LOGITS_BUDGET = 512 * 1024 * 1024
_SEG_BAND_ROWS = 128
_SEG_BAND_BYTES = 32 * 1024 * 1024  # one band of resized logits (32 rows of a 9000-wide photo)


def seg_to_labels(
    logits: Tensor, size_wh: tuple[int, int], *, keep_logits: bool = False
) -> tuple[Tensor, Tensor | None]:
    """(1, 29, h, w) logits → (H, W) int64 labels: bilinear resize of the logits (align_corners False), argmax."""
    width, height = size_wh
    logits = logits.to(torch.float32)
    if not keep_logits and logits.shape[1] * height * width * 4 > SEG_FULL_LOGITS_BUDGET:
        return _banded_labels(logits[0], height, width), None
    resized = _bilinear(logits, (height, width))
    finite = is_all_finite(logits)  # finite logits give finite resized ones (convex weights)
    labels = _first_argmax(resized[0]) if finite else resized.argmax(dim=1)[0]
    return labels, (resized[0] if keep_logits else None)


def _bilinear_taps(n_in: int, n_out: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Source indices and weights of `F.interpolate(mode="bilinear", align_corners=False)` along one axis."""
    src = ((torch.arange(n_out, device=device, dtype=torch.float32) + 0.5) * (n_in / n_out) - 0.5).clamp(
        min=0
    )
    first = src.floor().long().clamp(max=n_in - 1)
    return first, (first + 1).clamp(max=n_in - 1), src - first.to(torch.float32)


def _banded_labels(logits: Tensor, height: int, width: int) -> Tensor:
    """Argmax of the bilinearly resized (C, h, w) logits a band of output rows at a time; peak memory is one band
    (a few times `_SEG_BAND_BYTES`), not C × H × W.

    Where the logits grow on both axes (any photo larger than 768×1024) the bands are `banded.BandedResize`,
    bit-identical to `F.interpolate`, so the labels are the whole-map argmax exactly. Otherwise (a panorama
    shorter than the network input) the same sampling is applied in another order, so a near-tie between two
    classes can rarely flip (1 pixel in 3 million on random logits).
    """
    labels = torch.empty((height, width), dtype=torch.int64, device=logits.device)
    on_cpu = logits.device.type == "cpu"
    if on_cpu and is_upscale(tuple(logits.shape[-2:]), (height, width)) and exact_here():
        resize = BandedResize(logits, (height, width))
        finite = is_all_finite(logits)  # finite logits give finite bands (convex weights)
        step = max(1, _SEG_BAND_BYTES // (4 * int(logits.shape[0]) * width))
        for top in range(0, height, step):
            band = resize.rows(torch.arange(top, min(top + step, height)))
            labels[top : top + len(band[0])] = _first_argmax(band) if finite else band.argmax(dim=0)
        return labels
    x0, x1, wx = _bilinear_taps(int(logits.shape[-1]), width, logits.device)
    y0, y1, wy = _bilinear_taps(int(logits.shape[-2]), height, logits.device)
    for top in range(0, height, _SEG_BAND_ROWS):
        end = min(top + _SEG_BAND_ROWS, height)
        rows = torch.lerp(
            logits.index_select(1, y0[top:end]), logits.index_select(1, y1[top:end]), wy[top:end, None]
        )
        labels[top:end] = torch.lerp(rows.index_select(2, x0), rows.index_select(2, x1), wx).argmax(dim=0)
    return labels


def _first_argmax(scores: Tensor) -> Tensor:
    """`scores.argmax(dim=0)` of finite (C, …) scores (the first of equal maxima), one class plane at a time:
    2.5× faster than reducing over the outer axis (0.11 vs 0.27 s for 29 × 128 × 9000)."""
    best = scores[0].clone()
    index = torch.zeros(best.shape, dtype=torch.int64, device=scores.device)
    for c in range(1, scores.shape[0]):
        index.masked_fill_(scores[c] > best, c)
        torch.maximum(best, scores[c], out=best)
    return index


def uncrop(x: Tensor, layout: DenseLayout) -> Tensor:
    """Cut the padding off a (B, C, 1024, 768) dense output and bilinear-resize it to the original size."""
    x0, y0, x1, y1 = layout.content_box
    width, height = layout.image_size
    return _bilinear(x[..., y0:y1, x0:x1], (height, width))


def can_band(layout: DenseLayout) -> bool:
    """Whether this image's dense maps can be made band by band, bit-identical to `uncrop`: the crop grows on
    both axes (a photo larger than the network input) and `banded.exact_here()` holds on this machine."""
    x0, y0, x1, y1 = layout.content_box
    width, height = layout.image_size
    return is_upscale((y1 - y0, x1 - x0), (height, width)) and exact_here()


def _banded(content: Tensor, layout: DenseLayout, finish: Callable[[Tensor], Tensor]) -> RowBands:
    """One (1, C, 1024, 768) CPU map → its crop resized to the original size as an (H, W, C) map read in row
    bands, each band (C, rows, W) passed through `finish` (which may work in place), the same steps the whole-map
    form takes."""
    x0, y0, x1, y1 = layout.content_box
    width, height = layout.image_size
    return upscaled_map(content[0, :, y0:y1, x0:x1], (height, width), finish)


def unit_normals(x: Tensor, eps: float = 1e-8) -> Tensor:
    """n / max(‖n‖, eps) over the channel axis (dim −3)."""
    return x / x.norm(dim=-3, keepdim=True).clamp(min=eps)


def normals_to_image(raw: Tensor, layout: DenseLayout) -> Tensor:
    """Raw normal output → (B, 3, H, W) unit normals at the original size, in the canonical (OpenCV) frame.

    Normalised at network resolution (as the reference), then cropped and resized, then normalised again so
    every pixel stays a unit vector (the reference skips the second step; resizing shortens vectors at edges).
    Last, the pipeline's only frame conversion: from the frame the model predicts in (`MODEL_NORMAL_FRAME`,
    OpenGL: y up, z toward the viewer) to `CANONICAL_FRAME` (OpenCV, the pointmap's frame), a sign flip of y
    and z that commutes with the resize and the normalisation (docs/conventions.md).
    """
    return _finish_normals(uncrop(unit_normals(raw.to(torch.float32)), layout))  # a new tensor: in place


def normal_lengths(x: Tensor) -> Tensor:
    """‖n‖ over the channel axis of (…, 3, H, W) normals, clamped at 1e-8, keeping that axis: √(x² + y² + z²)
    with fused multiply-adds, plane by plane. Why not `Tensor.norm`: reducing over a non-innermost axis of size 3
    is ~30× slower on the CPU (0.18 s for a 256-row band of a 9000-wide map), and this is elementwise, so a band
    gives the values of the whole map."""
    x0, x1, x2 = x.unbind(dim=-3)
    squares = torch.addcmul(torch.addcmul(x0 * x0, x1, x1), x2, x2)
    return squares.sqrt_().clamp_(min=1e-8).unsqueeze(-3)


def _finish_normals(band: Tensor) -> Tensor:
    """Resized normals (…, 3, H, W) made unit again (no full-size copy) and converted to the canonical frame, in
    place."""
    band.div_(normal_lengths(band))
    return model_to_canonical(band, dim=-3, inplace=True)


def normals_banded(raw: Tensor, layout: DenseLayout) -> RowBands:
    """`normals_to_image(raw, layout)[0]` as an (H, W, 3) map read in row bands (raw: one image, (1, 3, 1024, 768))."""
    return _banded(unit_normals(raw.to(torch.float32)), layout, _finish_normals)


def albedo_to_image(raw: Tensor, layout: DenseLayout) -> Tensor:
    """Raw albedo output → (B, 3, H, W) in [0, 1] at the original size.

    Clamped at network resolution before the resize, as the reference; bilinear weights are convex, so the
    result stays in [0, 1] (the second clamp only removes float rounding)."""
    return uncrop(raw.to(torch.float32).clamp(0.0, 1.0), layout).clamp(0.0, 1.0)


def albedo_banded(raw: Tensor, layout: DenseLayout) -> RowBands:
    """`albedo_to_image(raw, layout)[0]` as an (H, W, 3) map read in row bands."""
    return _banded(raw.to(torch.float32).clamp(0.0, 1.0), layout, lambda band: band.clamp_(0.0, 1.0))


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics in original-image pixels, corner-origin pixel frame."""

    fx: float
    fy: float
    cx: float
    cy: float

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.fx, self.fy, self.cx, self.cy)


def default_intrinsics(width: int, height: int) -> Intrinsics:
    """The default camera rule (docs/formats.md), used where no focal length is known: fx = fy = 1.2·max(W, H),
    principal point at the image centre. It is the capture bundle's `default_camera`, so the Python API and the
    files agree."""
    camera = default_camera(width, height)
    return Intrinsics(camera["fx"], camera["fy"], camera["cx"], camera["cy"])


def pointmap_intrinsics(
    scale: float, layout: DenseLayout, canonical_focal: float = float(NET_W)
) -> Intrinsics:
    """Focal lengths implied by the predicted scale: fx_input = 768 / scale at network resolution, mapped back
    per axis through the resize the image really went through: fx = fx_input · W / w, fy = fx_input · H / h
    (w, h = the int()-truncated resized size; ≈ fx_input / r with r = min(768 / W, 1024 / H), but truncation
    makes the two axes differ by up to ~1 % on small or extreme-aspect images, which shows as a reprojection
    error at the image edges). The principal point is not predicted: the image centre (W/2, H/2)."""
    if not scale > 0:
        raise PipelineError(
            f"the predicted pointmap scale must be positive to give a focal length, got {scale}"
        )
    fx_input = canonical_focal / scale
    width, height = layout.image_size
    new_w, new_h = layout.resized_size
    return Intrinsics(fx_input * width / new_w, fx_input * height / new_h, width / 2.0, height / 2.0)


def pointmap_to_image(raw: Tensor, scale: Tensor, layout: DenseLayout) -> Tensor:
    """Canonical pointmap (B, 3, h, w) and scale (B, 1) → metric XYZ (B, 3, H, W) (divided by the scale,
    per image — the reference's demo only got this right for batch 1)."""
    metric = raw.to(torch.float32) / scale.to(torch.float32).reshape(-1, 1, 1, 1)
    return uncrop(metric, layout)


def pointmap_banded(raw: Tensor, scale: Tensor, layout: DenseLayout) -> RowBands:
    """`pointmap_to_image(raw, scale, layout)[0]` as an (H, W, 3) map read in row bands (one image)."""
    metric = raw.to(torch.float32) / scale.to(torch.float32).reshape(-1, 1, 1, 1)
    return _banded(metric, layout, lambda band: band)


# Alpha at or below this is treated as fully transparent when un-premultiplying: one 8-bit level, so an 8-bit matte
# shows no difference, and straight colour × alpha stays within MATTE_EPS of the premultiplied colour there.
MATTE_EPS = 1.0 / 255.0


def matting_to_image(out: Tensor, size_wh: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """Matting output (B, 4, h, w) (after the head's sigmoid) → alpha (B, 1, H, W) and the pre-multiplied
    foreground (B, 3, H, W), both in [0, 1] at the original size.

    As the reference demo (`vis_matting.py`) and Transformers' `post_process_image_matting`: the sigmoid sits in the
    model at network resolution, then all four channels are bilinearly resized (align_corners False, no
    antialiasing) and clipped to [0, 1] (bilinear weights are convex, so the clip only removes float rounding)."""
    width, height = size_wh
    full = _bilinear(out.to(torch.float32), (height, width)).clamp(0.0, 1.0)
    return full[:, 3:4], full[:, 0:3]


def unpremultiply(premultiplied: Tensor, alpha: Tensor, eps: float = MATTE_EPS) -> Tensor:
    """Straight colour = premultiplied / alpha where alpha > eps, else 0; clipped to [0, 1].

    `alpha` broadcasts against `premultiplied` (e.g. (…, 1, H, W) with (…, 3, H, W), or (H, W, 1) with (H, W, 3)).
    The model predicts colour and alpha independently, so a pixel may have premultiplied > alpha; the clip keeps
    the straight colour a colour (it is the same as capping the premultiplied value at alpha)."""
    if not 0.0 <= eps < 1.0:
        raise PipelineError(f"the un-premultiply threshold eps must be in [0, 1), got {eps}")
    opaque_enough = alpha > eps
    straight = premultiplied / torch.where(opaque_enough, alpha, torch.ones_like(alpha))
    return torch.where(opaque_enough, straight, torch.zeros_like(straight)).clamp(0.0, 1.0)
