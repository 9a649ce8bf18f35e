"""Turn what users hand us (numpy arrays, PIL images, ComfyUI tensors) into RGB tensors in 0–255 units (uint8 for
8-bit data, float32 otherwise).

Why 0–255: the released models normalise with ImageNet statistics expressed in 8-bit units, and the reference
pipelines resample the *uint8* image. We keep a per-image ``quantized`` flag so the resamplers can round back
to integers exactly where the reference does (8-bit sources, including float images that hold 8-bit values,
like ComfyUI's IMAGE from a PNG) and keep full precision otherwise (16-bit, continuous float).
Conversion is lazy (per chunk) so a long ComfyUI batch never sits on the GPU all at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from ..errors import Sapiens2Error

AlphaMode = Literal["composite", "drop"]

# Float images whose values ×255 are within this of integers are 8-bit data (a PNG loaded as 0..1, as
# ComfyUI does): they are snapped to integers and resampled exactly like the reference resamples uint8.
_GRID_TOLERANCE = 1e-3


class ImageInputError(Sapiens2Error, ValueError):
    """An input image has a shape, dtype or mode we cannot interpret."""


@dataclass
class PreparedImage:
    """One image as a (3, H, W) tensor in 0–255 units (RGB): uint8 when `quantized` (8-bit data, a quarter of
    the memory of float32: 162 MB instead of 648 MB for a 54-megapixel photo, held while every task of a chunk
    runs), float32 otherwise. The resamplers read either and return float32 (`resample.py`)."""

    pixels: Tensor
    quantized: bool  # True when the source was 8-bit: resampled values are rounded like cv2 does on uint8
    # Pre-processing results shared by the tasks that run on this image (e.g. the dense tasks' resize + pad):
    # computed by the first task that needs them, kept as long as the prepared image lives (one chunk).
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def size(self) -> tuple[int, int]:
        """(W, H)."""
        return int(self.pixels.shape[2]), int(self.pixels.shape[1])


def _composite(rgb: np.ndarray, alpha: np.ndarray, alpha_mode: AlphaMode, background: float) -> np.ndarray:
    if alpha_mode == "drop":
        return rgb
    a = alpha.astype(np.float32)[..., None]
    return rgb.astype(np.float32) * a + background * (1.0 - a)


def _from_numpy(arr: np.ndarray, index: int, alpha_mode: AlphaMode) -> tuple[np.ndarray, bool]:
    """Return (H, W, 3) float32 in 0–255 and whether the source was 8-bit."""
    if arr.ndim == 2:
        arr = arr[..., None]
    if arr.ndim != 3 or arr.shape[2] not in (1, 2, 3, 4):
        raise ImageInputError(
            f"image {index}: expected an H×W×3 (or H×W, H×W×1, H×W×4) array, got shape {tuple(arr.shape)}; "
            "pass images channel-last in RGB order"
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ImageInputError(f"image {index}: empty image of shape {tuple(arr.shape)}")
    if arr.dtype == np.uint8:
        scale, quantized = 1.0, True
    elif arr.dtype == np.uint16:
        scale, quantized = 255.0 / 65535.0, False
    elif arr.dtype in (np.float16, np.float32, np.float64):
        finite_max = float(np.nanmax(arr)) if arr.size else 0.0
        if finite_max > 1.5:
            raise ImageInputError(
                f"image {index}: float images must hold values in 0..1, found a maximum of {finite_max:g}; "
                "pass uint8 data or divide by 255 first"
            )
        scale, quantized = 255.0, False
    elif arr.dtype == bool:
        scale, quantized = 255.0, True
    else:
        raise ImageInputError(
            f"image {index}: unsupported dtype {arr.dtype}; use uint8, uint16 or float in 0..1"
        )
    data = np.nan_to_num(arr.astype(np.float32) * np.float32(scale), nan=0.0)
    channels = data.shape[2]
    if channels == 1:
        data = np.repeat(data, 3, axis=2)
    elif channels == 2:  # grey + alpha
        data = _composite(np.repeat(data[..., :1], 3, axis=2), data[..., 1] / 255.0, alpha_mode, 0.0)
    elif channels == 4:
        data = _composite(data[..., :3], data[..., 3] / 255.0, alpha_mode, 0.0)
    if channels in (2, 4) and alpha_mode == "composite":
        quantized = False
    data = np.clip(data, 0.0, 255.0)
    if not quantized and arr.dtype in (np.float16, np.float32, np.float64) and channels in (1, 3):
        snapped = np.round(data)
        if data.size and float(np.abs(data - snapped).max()) < _GRID_TOLERANCE:
            return snapped, True  # 8-bit data stored as float (e.g. a PNG loaded as 0..1)
    return data, quantized


def _from_pil(img: Any, index: int, alpha_mode: AlphaMode) -> tuple[np.ndarray, bool]:
    mode = img.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N"):
        return _from_numpy(np.asarray(img, dtype=np.uint16), index, alpha_mode)
    if mode == "I":
        arr = np.asarray(img, dtype=np.int64)
        high = int(arr.max()) if arr.size else 0
        if high > 255:
            return _from_numpy(np.clip(arr, 0, 65535).astype(np.uint16), index, alpha_mode)
        return _from_numpy(np.clip(arr, 0, 255).astype(np.uint8), index, alpha_mode)
    if mode == "F":
        arr = np.asarray(img, dtype=np.float32)
        if arr.size and float(arr.max()) > 1.5:
            arr = arr / 255.0
        return _from_numpy(arr, index, alpha_mode)
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif mode in ("PA", "La") or mode == "RGBa":
        img = img.convert("RGBA")
    elif mode not in ("RGB", "RGBA", "L", "LA"):
        img = img.convert("RGB")  # 1, CMYK, YCbCr, LAB, HSV …
    return _from_numpy(np.asarray(img), index, alpha_mode)


def _uint8_pixels(arr: np.ndarray, device: torch.device) -> Tensor:
    """(H, W, 3) uint8 → (3, H, W) uint8 on `device`.

    The same values as the general path (`_from_numpy`: every step after the float conversion is the identity on
    8-bit RGB) without its four full-size float temporaries (2.6 GB for a 54-megapixel photo). On the CPU the
    pixels are a channels-first *view* of the caller's array (no copy: the resamplers read any strides and never
    write their input); an accelerator receives the 8-bit data."""
    if not arr.flags.writeable:  # e.g. np.asarray(PIL image); torch wraps only writable memory (8-bit: cheap)
        arr = arr.copy()
    return torch.from_numpy(np.ascontiguousarray(arr)).to(device).permute(2, 0, 1)


def _channels_first(hwc: Tensor, quantized: bool) -> Tensor:
    """(H, W, 3) 0–255 → the (3, H, W) pixels of a `PreparedImage`: uint8 when the values are 8-bit integers."""
    return hwc.permute(2, 0, 1).to(torch.uint8 if quantized else torch.float32).contiguous()


def _is_pil(obj: Any) -> bool:
    return type(obj).__module__.startswith("PIL.") and hasattr(obj, "mode") and hasattr(obj, "size")


class ImageSource:
    """A lazily converted list of images: a list/tuple of arrays/PIL images, or a (B,H,W,C) tensor/array.

    ComfyUI IMAGE tensors are (B, H, W, C) float in 0..1; they are sliced per chunk and moved to the device
    only when needed.
    """

    def __init__(self, images: Any, *, alpha: AlphaMode = "composite") -> None:
        if alpha not in ("composite", "drop"):
            raise ImageInputError(f"alpha must be 'composite' or 'drop', got {alpha!r}")
        self.alpha: AlphaMode = alpha
        if isinstance(images, Tensor):
            if images.ndim == 3:
                images = images.unsqueeze(0)
            if images.ndim != 4 or images.shape[-1] not in (1, 3, 4):
                raise ImageInputError(
                    f"expected a (B, H, W, C) image tensor (ComfyUI IMAGE layout), got shape {tuple(images.shape)}"
                )
            self._batch: Tensor | None = images
            self._items: Sequence[Any] = ()
        elif isinstance(images, np.ndarray) and images.ndim == 4:
            self._batch = torch.from_numpy(np.ascontiguousarray(images))
            self._items = ()
        elif isinstance(images, np.ndarray) or _is_pil(images):
            self._batch, self._items = None, [images]
        elif isinstance(images, Sequence) and not isinstance(images, (str, bytes)):
            self._batch, self._items = None, list(images)
        else:
            raise ImageInputError(
                f"unsupported image container {type(images).__name__}; pass a list of H×W×3 arrays or PIL "
                "images, or a (B, H, W, 3) tensor"
            )
        if len(self) == 0:
            raise ImageInputError("no images given")

    def __len__(self) -> int:
        return int(self._batch.shape[0]) if self._batch is not None else len(self._items)

    def subset(self, start: int, stop: int) -> Any:
        """Images `start:stop` in a form `ImageSource` (and so every predictor) accepts, without copying."""
        return self._batch[start:stop] if self._batch is not None else list(self._items[start:stop])

    def _tensor_item(self, i: int, device: torch.device) -> PreparedImage:
        assert self._batch is not None
        item = self._batch[i]
        if item.dtype == torch.uint8:
            x = item.to(device=device, dtype=torch.float32)
            quantized = True
        else:
            x = item.to(device=device, dtype=torch.float32)
            high = float(x.max()) if x.numel() else 0.0
            if high > 1.5:
                raise ImageInputError(
                    f"image {i}: float image tensors must hold values in 0..1 (ComfyUI IMAGE), found {high:g}"
                )
            x = x * 255.0
            quantized = False
        channels = x.shape[-1]
        if channels == 1:
            x = x.expand(*x.shape[:-1], 3)
        elif channels == 4:
            if self.alpha == "composite":
                x = x[..., :3] * (x[..., 3:] / 255.0)
                quantized = False
            else:
                x = x[..., :3]
        x = torch.nan_to_num(x, nan=0.0).clamp_(0.0, 255.0)
        if not quantized and channels in (1, 3) and x.numel():
            snapped = torch.round(x)
            if float((x - snapped).abs().max()) < _GRID_TOLERANCE:
                x, quantized = snapped, True  # ComfyUI IMAGE from an 8-bit file: exact reference resampling
        return PreparedImage(_channels_first(x, quantized), quantized)

    def get(self, i: int, device: torch.device | str = "cpu") -> PreparedImage:
        device = torch.device(device)
        if self._batch is not None:
            return self._tensor_item(i, device)
        item = self._items[i]
        if isinstance(item, PreparedImage):  # prepared once by the engine and shared by every task
            return (
                item
                if item.pixels.device == device
                else PreparedImage(item.pixels.to(device), item.quantized)
            )
        if isinstance(item, Tensor):
            arr = item.detach().cpu().numpy()
        elif _is_pil(item):
            data, quantized = _from_pil(item, i, self.alpha)
            return PreparedImage(_channels_first(torch.from_numpy(data).to(device), quantized), quantized)
        elif isinstance(item, np.ndarray):
            if item.dtype == np.uint8 and item.ndim == 3 and item.shape[2] == 3 and min(item.shape[:2]) > 0:
                return PreparedImage(_uint8_pixels(item, device), True)
            arr = item
        else:
            raise ImageInputError(
                f"image {i}: unsupported type {type(item).__name__}; use an H×W×3 numpy array or a PIL image"
            )
        data, quantized = _from_numpy(arr, i, self.alpha)
        return PreparedImage(_channels_first(torch.from_numpy(data).to(device), quantized), quantized)

    def size(self, i: int) -> tuple[int, int]:
        """(W, H) of image i without converting it."""
        if self._batch is not None:
            return int(self._batch.shape[2]), int(self._batch.shape[1])
        item = self._items[i]
        if isinstance(item, PreparedImage):
            return item.size
        if _is_pil(item):
            return int(item.size[0]), int(item.size[1])
        shape = tuple(item.shape)
        if len(shape) < 2:
            raise ImageInputError(f"image {i}: expected an H×W×3 array, got shape {shape}")
        return int(shape[1]), int(shape[0])


def prepare_image(
    image: Any, device: torch.device | str = "cpu", *, alpha: AlphaMode = "composite"
) -> PreparedImage:
    """Convert one image (numpy, PIL or (H, W, C) tensor) to a `PreparedImage`."""
    return ImageSource([image], alpha=alpha).get(0, device)
