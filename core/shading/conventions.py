"""Normal-map conventions: the frame the model predicts in, the project's one canonical frame, and one named,
invertible function per conversion (torch or numpy, channel-last).

Two constants fix the frames (evidence and derivations: docs/conventions.md):
- `MODEL_NORMAL_FRAME` = "opengl": what the Sapiens2 normal models predict. The official code never states the
  y/z signs; three independent users of real predictions found x right, y up, z toward the viewer (a
  silhouette check, a co-author's supervision code that flips rendered OpenCV normals in y and z to match,
  and a sign sweep against rendered normals), and the visualiser's (n + 1) / 2 only looks lilac with z toward
  the viewer. Post-processing converts from this frame exactly once (`model_to_canonical`).
- `CANONICAL_FRAME` = "opencv": what every result, bundle and consumer in this project uses — the pointmap's
  frame, so normals and points never need a conversion between each other.

Frames (all camera-space, unit vectors, channel order x, y, z):
- OpenCV (canonical): x right, y down, z forward (into the scene). A surface facing the camera has
  n ≈ (0, 0, −1); a surface facing up (e.g. the top of the head) has n ≈ (0, −1, 0).
- OpenGL / Blender camera (the model's frame): x right, y up, z toward the viewer — OpenCV rotated 180° about
  x: (x, −y, −z). A surface facing the camera has n ≈ (0, 0, +1).
- DirectX (left-handed, y down in normal-map textures): x right, y down, z toward the viewer: (x, y, −z).
- ControlNet / BAE colour (what `control_v11p_sd15_normalbae` was trained on): R = left, G = up, B = toward
  the viewer, i.e. the OpenGL-frame vector with x negated, (−x, y, z), mapped to RGB as (n + 1) / 2. A
  camera-facing surface is (0.5, 0.5, 1.0) — the lilac of ControlNet normal maps — and a surface facing image
  right is dark in R. (ControlNet 1.0's MiDaS normals, Sobel of inverse depth, have the same orientation;
  tools that render normalbae conditioning from Blender view normals write 1 − R for the same reason.) For
  a consumer that wants R = right, use `normals_to_rgb(n, "opengl")`.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import numpy as np
import torch

from .errors import ShadingError

Array = TypeVar("Array", np.ndarray, torch.Tensor)
Convention = Literal["opencv", "opengl", "blender", "directx"]

MODEL_NORMAL_FRAME: Convention = "opengl"  # what Sapiens2 normal models predict (docs/conventions.md)
CANONICAL_FRAME: Convention = "opencv"  # what the project stores and consumes: the pointmap's frame

# Sign of each axis relative to OpenCV; the map is its own inverse.
_SIGNS: dict[str, tuple[float, float, float]] = {
    "opencv": (1.0, 1.0, 1.0),
    "opengl": (1.0, -1.0, -1.0),
    "blender": (1.0, -1.0, -1.0),
    "directx": (1.0, 1.0, -1.0),
}
_CONTROLNET_SIGNS = (-1.0, -1.0, -1.0)  # OpenCV → (−x, y, z) of the OpenGL frame: R left, G up, B to viewer


def _scale(n: Array, signs: tuple[float, float, float]) -> Array:
    if n.shape[-1] != 3:
        raise ShadingError(f"normals must be channel-last (..., 3), got shape {tuple(n.shape)}")
    if isinstance(n, torch.Tensor):
        return n * torch.tensor(signs, dtype=n.dtype, device=n.device)
    return n * np.asarray(signs, dtype=n.dtype if np.issubdtype(n.dtype, np.floating) else np.float32)


def frame_signs(source: Convention, target: Convention) -> tuple[float, float, float]:
    """Per-axis signs taking `source`-frame vectors to `target` (all frames here differ only by axis signs)."""
    for name in (source, target):
        if name not in _SIGNS:
            raise ShadingError(f"unknown normal convention {name!r}; use one of {', '.join(_SIGNS)}")
    s, t = _SIGNS[source], _SIGNS[target]
    return (s[0] * t[0], s[1] * t[1], s[2] * t[2])


def model_to_canonical(n: Array, *, dim: int = -1, inplace: bool = False) -> Array:
    """Normals as the model predicts them (`MODEL_NORMAL_FRAME`) → `CANONICAL_FRAME`, along axis `dim`.

    The pipeline's one conversion (`core.pipeline.postprocess.normals_to_image` calls it with dim=−3 on
    (B, 3, H, W), `inplace` on its own full-resolution result: a sign flip is exact either way, and a 54-megapixel
    map is 650 MB); everything downstream is canonical."""
    signs = frame_signs(MODEL_NORMAL_FRAME, CANONICAL_FRAME)
    if n.shape[dim] != 3:
        raise ShadingError(f"normals need 3 components along dim {dim}, got shape {tuple(n.shape)}")
    shape = [1] * n.ndim
    shape[dim] = 3
    if isinstance(n, torch.Tensor):
        factors = torch.tensor(signs, dtype=n.dtype, device=n.device).reshape(shape)
        return n.mul_(factors) if inplace else n * factors
    factors_np = np.asarray(signs, dtype=np.float32).reshape(shape)
    if inplace:
        n *= factors_np
        return n
    return n * factors_np


def opencv_to_opengl(n: Array) -> Array:
    """OpenCV camera (x right, y down, z forward) → OpenGL/Blender camera (x right, y up, z to viewer)."""
    return _scale(n, _SIGNS["opengl"])


def opengl_to_opencv(n: Array) -> Array:
    return _scale(n, _SIGNS["opengl"])


opencv_to_blender = opencv_to_opengl
blender_to_opencv = opengl_to_opencv


def opencv_to_directx(n: Array) -> Array:
    """OpenCV camera → DirectX (x right, y down, z toward the viewer)."""
    return _scale(n, _SIGNS["directx"])


def directx_to_opencv(n: Array) -> Array:
    return _scale(n, _SIGNS["directx"])


def opencv_to_controlnet(n: Array) -> Array:
    """OpenCV-frame unit normals → ControlNet/BAE RGB in [0, 1]: (R, G, B) = ((−x, y, z)_OpenGL + 1) / 2."""
    rgb = (_scale(n, _CONTROLNET_SIGNS) + 1.0) * 0.5
    return rgb.clamp(0.0, 1.0) if isinstance(rgb, torch.Tensor) else np.clip(rgb, 0.0, 1.0)


def controlnet_to_opencv(rgb: Array) -> Array:
    """ControlNet/BAE RGB in [0, 1] → OpenCV-frame normals (re-normalised; 8-bit maps are not exactly unit)."""
    n = _scale(rgb * 2.0 - 1.0, _CONTROLNET_SIGNS)
    if isinstance(n, torch.Tensor):
        return n / n.norm(dim=-1, keepdim=True).clamp(min=1e-8)
    return n / np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-8)


def convert_normals(
    n: Array,
    source: Convention = "opencv",
    target: Convention = "opengl",
    *,
    flip_axes: tuple[bool, bool, bool] = (False, False, False),
) -> Array:
    """Between named frames, then optional per-axis flips (for consumers with their own conventions)."""
    base = frame_signs(source, target)
    signs = tuple(b * (-1.0 if f else 1.0) for b, f in zip(base, flip_axes))
    return _scale(n, signs)  # type: ignore[arg-type]


def normals_to_rgb(n: Array, convention: str = "opengl") -> Array:
    """OpenCV-frame unit normals → an RGB image in [0, 1] in the chosen convention:
    "opencv" / "opengl" / "blender" / "directx" → (n' + 1) / 2 in that frame; "controlnet" → ControlNet/BAE."""
    if convention == "controlnet":
        return opencv_to_controlnet(n)
    rgb: Any = (convert_normals(n, "opencv", convention) + 1.0) * 0.5  # type: ignore[arg-type]
    return rgb.clamp(0.0, 1.0) if isinstance(rgb, torch.Tensor) else np.clip(rgb, 0.0, 1.0)
