"""Typed per-image results at the original image resolution.

Coordinates: image pixels, x right, y down, origin at the top-left corner of the top-left pixel (pixel
centres at i + 0.5). Dense maps are torch tensors (on the predictor's `output_device`, CPU by default), or, where
the engine asked for it on a very large photo, maps read in row bands (`DenseMap`); keypoints and boxes are small
numpy arrays / tuples so they serialise directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from ..formats.row_bands import RowBands
from .errors import PipelineError
from .postprocess import MATTE_EPS
from .seg_groups import labels_to_mask

BoxSource = Literal["given", "seg", "image"]

# A normal, albedo or point map: a tensor, or (only where the engine asked for it, on a map above its size limit)
# the same values made a band of rows at a time when read, never held whole (`formats.row_bands.RowBands`)
DenseMap = Tensor | RowBands


@dataclass
class PersonPose:
    """One person: box used for the crop and 308 keypoints (x, y, score) in image pixels."""

    bbox: tuple[float, float, float, float]
    keypoints: np.ndarray  # (308, 3) float32
    bbox_source: BoxSource = "given"
    track_id: int | None = None  # set by temporal smoothing (same person across frames)

    @property
    def xy(self) -> np.ndarray:
        return self.keypoints[:, :2]

    @property
    def scores(self) -> np.ndarray:
        return self.keypoints[:, 2]


@dataclass
class PoseResult:
    people: list[PersonPose]
    image_size: tuple[int, int]  # (W, H)
    warnings: list[str] = field(default_factory=list)


@dataclass
class SegResult:
    labels: Tensor  # (H, W) int64 class ids 0..28
    logits: Tensor | None = None  # (29, H, W) float32 when requested
    nonfinite: int = (
        0  # NaN/inf values in the network's logits (labels cannot show them: argmax picks one anyway)
    )

    @property
    def image_size(self) -> tuple[int, int]:
        return int(self.labels.shape[1]), int(self.labels.shape[0])

    def mask(self, selection: str | int | Iterable[str | int]) -> Tensor:
        """Bool (H, W) mask of class names/ids and/or group names (see `SEG_GROUPS`)."""
        return labels_to_mask(self.labels, selection)

    def foreground(self) -> Tensor:
        """label > 0, the mask the reference demos use."""
        return self.labels > 0


@dataclass
class NormalResult:
    # (H, W, 3) float32 unit vectors, canonical OpenCV frame (x right, y down, z forward); see `DenseMap`
    normals: DenseMap
    mask: Tensor | None = None  # (H, W) bool


@dataclass
class AlbedoResult:
    albedo: DenseMap  # (H, W, 3) float32 in [0, 1], sRGB-encoded as the model outputs it (as normals)
    mask: Tensor | None = None


@dataclass
class PointmapResult:
    points: DenseMap  # (H, W, 3) float32 metric XYZ, OpenCV camera frame (as normals)
    scale: float  # the predicted canonical scale (metric = canonical / scale)
    intrinsics: tuple[float, float, float, float]  # (fx, fy, cx, cy) in original-image pixels
    mask: Tensor | None = None
    # "pointmap": implied by the predicted scale; otherwise "default (…reason…)": a scale ≤ 0 or not finite gives no
    # focal length, and `intrinsics` follow the default camera rule (fx = fy = 1.2·max(W, H), image centre).
    intrinsics_source: str = "pointmap"

    @property
    def depth(self) -> Tensor:
        """(H, W) metric depth = Z."""
        if isinstance(self.points, RowBands):
            return torch.from_numpy(self.points[:, :, 2])
        return self.points[..., 2]


@dataclass
class MattingResult:
    """Soft alpha and foreground of the matting model at the original resolution.

    Colours are in the input image's encoding (sRGB for ordinary images), pre-multiplied in that encoding, as the
    model predicts them; the reference demo and Transformers composite them there: `composite()`.
    """

    alpha: Tensor  # (H, W) float32 in [0, 1]
    foreground_premultiplied: Tensor  # (H, W, 3) float32 in [0, 1]: colour × alpha, as predicted
    foreground: Tensor  # (H, W, 3) float32 in [0, 1]: straight colour, premultiplied / alpha where alpha > eps, else 0
    eps: float = MATTE_EPS  # the un-premultiply threshold used for `foreground`
    mask: Tensor | None = None  # (H, W) bool, from a segmentation when one was given

    @property
    def image_size(self) -> tuple[int, int]:
        """(W, H)."""
        return int(self.alpha.shape[1]), int(self.alpha.shape[0])

    def rgba(self, *, premultiplied: bool = False) -> Tensor:
        """(H, W, 4): straight (default) or pre-multiplied colour with alpha as the fourth channel."""
        colour = self.foreground_premultiplied if premultiplied else self.foreground
        return torch.cat([colour, self.alpha[..., None]], dim=-1)

    def composite(self, background: Tensor | Sequence[float]) -> Tensor:
        """(H, W, 3) = foreground_premultiplied + (1 − alpha) · background, clipped to [0, 1].

        background: an (H, W, 3) image or one RGB colour in [0, 1], in the same encoding as the input image."""
        bg = torch.as_tensor(background, dtype=torch.float32, device=self.alpha.device)
        if bg.ndim == 1:
            bg = bg.reshape(1, 1, -1)
        if bg.shape[-1] != 3 or (bg.ndim == 3 and bg.shape[:2] not in ((1, 1), tuple(self.alpha.shape))):
            raise PipelineError(
                f"background must be an RGB colour or an {self.alpha.shape[0]}×{self.alpha.shape[1]}×3 image, "
                f"got shape {tuple(bg.shape)}"
            )
        return (self.foreground_premultiplied + (1.0 - self.alpha[..., None]) * bg).clamp(0.0, 1.0)
