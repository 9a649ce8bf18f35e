"""Per-task pre-processing, matching the official test pipelines (see docs/pipeline.md).

- seg: stretch to 1024×768 (cv2 INTER_AREA when the width shrinks, else INTER_CUBIC);
- matting: the same stretch, but INTER_LINEAR when the width does not shrink (`MattingResize`, keep_ratio=False);
- normal / albedo / pointmap: aspect-preserving resize with int() truncation (INTER_LINEAR), then centred
  zero padding (left = pad_w // 2, top = pad_h // 2) — the layout is kept to undo it afterwards;
- pose: top-down crop per person box (padding 1.25, aspect fixed to w/h = 0.75 by enlarging the short side,
  UDP warp matrix), bicubic when the smaller scale is ≥ 1, else bilinear, constant-0 border.
Padding is applied to the 0–255 image before normalisation, as in the reference.

Coordinates inside this module follow the reference (OpenCV) convention: pixel i's centre is at i.
The public API (predictors, results) uses corner-origin pixels (centre at i + 0.5); the predictors convert.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .errors import PipelineError
from .resample import resize, warp_affine

NET_H, NET_W = 1024, 768
MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)
POSE_PADDING = 1.25


def normalize(x: Tensor) -> Tensor:
    """(…, 3, H, W) RGB in 0–255 → ImageNet-normalised network input (same arithmetic as the reference)."""
    mean = torch.tensor(MEAN, dtype=torch.float32, device=x.device).reshape(3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float32, device=x.device).reshape(3, 1, 1)
    return (x.to(torch.float32) - mean) / std


def seg_interpolation(width: int) -> str:
    """cv2 flag the seg pipeline uses: INTER_AREA if the new width is smaller than the old, else INTER_CUBIC."""
    return "area" if width > NET_W else "cubic"


def preprocess_seg(pixels: Tensor, *, quantize: bool) -> Tensor:
    """(3, H, W) 0–255 → (3, 1024, 768) 0–255, stretched without keeping the aspect ratio."""
    mode = seg_interpolation(int(pixels.shape[-1]))
    return resize(pixels[None], (NET_H, NET_W), mode, quantize=quantize)[0]  # type: ignore[arg-type]


def matting_interpolation(width: int) -> str:
    """cv2 flag of the matting pipeline (`MattingResize`): INTER_AREA if the new width (768) is smaller than the
    old, else INTER_LINEAR — not INTER_CUBIC as for seg, although the reference's comment says so."""
    return "area" if width > NET_W else "linear"


def preprocess_matting(pixels: Tensor, *, quantize: bool) -> Tensor:
    """(3, H, W) 0–255 → (3, 1024, 768) 0–255, stretched without keeping the aspect ratio (no padding)."""
    mode = matting_interpolation(int(pixels.shape[-1]))
    return resize(pixels[None], (NET_H, NET_W), mode, quantize=quantize)[0]  # type: ignore[arg-type]


@dataclass(frozen=True)
class DenseLayout:
    """Where the image sits inside the 1024×768 network input of the dense tasks."""

    image_size: tuple[int, int]  # original (W, H)
    resized_size: tuple[int, int]  # (w, h) after the aspect-preserving resize
    padding: tuple[int, int, int, int]  # (left, right, top, bottom), zeros added around the resized image
    scale: float  # r = min(768 / W, 1024 / H)

    @property
    def content_box(self) -> tuple[int, int, int, int]:
        """(x0, y0, x1, y1) of the image content inside the network input (exclusive end)."""
        left, _, top, _ = self.padding
        return left, top, left + self.resized_size[0], top + self.resized_size[1]


def dense_layout(width: int, height: int, net_hw: tuple[int, int] = (NET_H, NET_W)) -> DenseLayout:
    """The reference's resize-and-pad arithmetic (float64 scale, int() truncation, floor-half padding)."""
    if width < 1 or height < 1:
        raise PipelineError(f"image size must be positive, got {width}×{height}")
    net_h, net_w = net_hw
    scale = min(net_w / width, net_h / height)
    new_w, new_h = max(1, int(width * scale)), max(1, int(height * scale))
    pad_w, pad_h = net_w - new_w, net_h - new_h
    left, top = pad_w // 2, pad_h // 2
    return DenseLayout((width, height), (new_w, new_h), (left, pad_w - left, top, pad_h - top), scale)


def preprocess_dense(pixels: Tensor, *, quantize: bool) -> tuple[Tensor, DenseLayout]:
    """(3, H, W) 0–255 → (3, 1024, 768) 0–255 (resized with INTER_LINEAR, zero padded) and its layout."""
    height, width = int(pixels.shape[-2]), int(pixels.shape[-1])
    layout = dense_layout(width, height)
    new_w, new_h = layout.resized_size
    resized = resize(pixels[None], (new_h, new_w), "linear", quantize=quantize)[0]
    left, right, top, bottom = layout.padding
    out = torch.nn.functional.pad(resized, (left, right, top, bottom), value=0.0)
    return out, layout


@dataclass(frozen=True)
class PoseCrop:
    """One top-down crop: the box (reference pixel convention), its centre/scale and the UDP warp matrix."""

    bbox: tuple[float, float, float, float]
    center: np.ndarray  # (2,) float32
    scale: np.ndarray  # (2,) float32, after padding and the aspect fix
    warp: np.ndarray  # (2, 3) float32, image → network input
    interpolation: str  # "cubic" or "linear"


def pose_crop(
    bbox_xyxy: tuple[float, float, float, float] | np.ndarray,
    *,
    padding: float = POSE_PADDING,
    input_size_wh: tuple[int, int] = (NET_W, NET_H),
) -> PoseCrop:
    """Centre/scale/warp for a box, reproducing the reference's float32 arithmetic bit for bit."""
    f32 = np.float32
    box = np.asarray(bbox_xyxy, dtype=np.float32).reshape(4)
    if not np.all(np.isfinite(box)):
        raise PipelineError(f"person box must be finite, got {box.tolist()}")
    x1, y1, x2, y2 = box
    if not (x2 > x1 and y2 > y1):
        raise PipelineError(f"person box must have x2 > x1 and y2 > y1, got {box.tolist()}")
    center = np.array([(x1 + x2) * f32(0.5), (y1 + y2) * f32(0.5)], dtype=np.float32)
    w, h = (x2 - x1) * f32(padding), (y2 - y1) * f32(padding)
    in_w, in_h = input_size_wh
    aspect = f32(in_w / in_h)
    if w > h * aspect:
        scale = np.array([w, w / aspect], dtype=np.float32)
    else:
        scale = np.array([h * aspect, h], dtype=np.float32)
    warp = udp_warp_matrix(center, scale, input_size_wh)
    sx = float(np.linalg.norm(warp[0, :2]))
    sy = float(np.linalg.norm(warp[1, :2]))
    interpolation = "linear" if min(sx, sy) < 1.0 else "cubic"
    return PoseCrop(tuple(float(v) for v in box), center, scale, warp, interpolation)  # type: ignore[arg-type]


def udp_warp_matrix(center: np.ndarray, scale: np.ndarray, output_size_wh: tuple[int, int]) -> np.ndarray:
    """Unbiased (UDP) warp without rotation: box edges map to pixel 0 and size − 1; float32 like the reference."""
    f32 = np.float32
    cx, cy = f32(center[0]), f32(center[1])
    sw, sh = f32(scale[0]), f32(scale[1])
    scale_x = f32(output_size_wh[0] - 1) / sw
    scale_y = f32(output_size_wh[1] - 1) / sh
    in0, in1 = cx * f32(2), cy * f32(2)
    cos, sin = f32(1.0), f32(0.0)
    warp = np.zeros((2, 3), dtype=np.float32)
    warp[0, 0] = cos * scale_x
    warp[0, 1] = -sin * scale_x
    warp[0, 2] = scale_x * (f32(-0.5) * in0 * cos + f32(0.5) * in1 * sin + f32(0.5) * sw)
    warp[1, 0] = sin * scale_y
    warp[1, 1] = cos * scale_y
    warp[1, 2] = scale_y * (f32(-0.5) * in0 * sin - f32(0.5) * in1 * cos + f32(0.5) * sh)
    return warp


def preprocess_pose_crop(pixels: Tensor, crop: PoseCrop, *, quantize: bool) -> Tensor:
    """(3, H, W) 0–255 → (3, 1024, 768) 0–255 warped crop (constant-0 border)."""
    return warp_affine(pixels, crop.warp, (NET_W, NET_H), crop.interpolation, quantize=quantize)  # type: ignore[arg-type]
