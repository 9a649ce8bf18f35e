"""PNG previews of predictions: pose drawing, seg colours, normal colours, depth colour map, albedo.

Previews are for looking, not for data (the capture bundle holds the data), so they favour clarity: background is
black for normals/depth, keypoints below a score threshold are not drawn.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..core.data import keypoints308, seg29
from ..core.shading.conventions import normals_to_rgb

# Control points of a perceptual dark-to-bright colour ramp (near = bright yellow, far = dark purple).
_RAMP = np.array(
    [
        [0.05, 0.03, 0.20],
        [0.30, 0.05, 0.45],
        [0.60, 0.15, 0.45],
        [0.87, 0.35, 0.25],
        [0.98, 0.65, 0.10],
        [0.99, 0.95, 0.55],
    ],
    dtype=np.float32,
)


@lru_cache(maxsize=1)
def _palette() -> np.ndarray:
    return np.array(seg29()["palette_rgb"], dtype=np.uint8)


def seg_colors(labels: np.ndarray) -> np.ndarray:
    """Class ids (H, W) → the official 29-class palette, (H, W, 3) uint8."""
    palette = _palette()
    return palette[np.clip(np.asarray(labels, dtype=np.int64), 0, len(palette) - 1)]


def normal_colors(normals: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """OpenCV-frame unit normals → RGB = (n + 1) / 2 in the OpenGL frame (y up, z to the viewer: the familiar
    lilac of a camera-facing surface, as the official demo shows the model's own output)."""
    rgb = normals_to_rgb(np.nan_to_num(np.asarray(normals, np.float32)), "opengl")
    out = np.rint(rgb * 255.0).astype(np.uint8)
    if mask is not None:
        out[~np.asarray(mask, bool)] = 0
    return out


def depth_colors(depth: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Depth → colour ramp normalised over the valid (masked, Z > 0) pixels; near is bright, invalid is black."""
    z = np.asarray(depth, np.float32)
    valid = np.isfinite(z) & (z > 0)
    if mask is not None:
        valid &= np.asarray(mask, bool)
    out = np.zeros((*z.shape, 3), np.uint8)
    if not valid.any():
        return out
    lo, hi = np.percentile(z[valid], [1, 99])
    t = 1.0 - np.clip((z[valid] - lo) / max(hi - lo, 1e-6), 0.0, 1.0)
    pos = t * (len(_RAMP) - 1)
    i0 = np.minimum(pos.astype(np.int64), len(_RAMP) - 2)
    frac = (pos - i0)[:, None]
    colors = _RAMP[i0] * (1 - frac) + _RAMP[i0 + 1] * frac
    out[valid] = np.rint(colors * 255.0).astype(np.uint8)
    return out


def to_uint8(image: np.ndarray) -> np.ndarray:
    """uint8 / uint16 / float 0..1 image → uint8 (for drawing and previews)."""
    arr = np.asarray(image)
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.uint16:
        return (arr // 257).astype(np.uint8)
    return srgb_uint8(arr)


def srgb_uint8(values: np.ndarray) -> np.ndarray:
    """sRGB-encoded 0..1 floats (e.g. albedo) → uint8."""
    return np.rint(np.clip(np.asarray(values, np.float32), 0.0, 1.0) * 255.0).astype(np.uint8)


def draw_pose(image: np.ndarray, people: list[Any], score_threshold: float = 0.3) -> np.ndarray:
    """Draw boxes, skeleton links and keypoints (official colours) over a copy of the image."""
    from PIL import Image, ImageDraw

    meta = keypoints308()
    links = meta["skeleton_links"]
    link_colors = [tuple(c) for c in meta["skeleton_link_colors_rgb"]]
    point_colors = [tuple(c) for c in meta["keypoint_colors_rgb"]]
    canvas = Image.fromarray(to_uint8(image)).convert("RGB")
    draw = ImageDraw.Draw(canvas)
    scale = max(canvas.size) / 1000.0
    width = max(1, round(3 * scale))
    radius = max(1.0, 3.0 * scale)
    for person in people:
        kp = np.asarray(person["keypoints"] if isinstance(person, dict) else person.keypoints, np.float32)
        bbox = person["bbox"] if isinstance(person, dict) else person.bbox
        draw.rectangle([float(v) for v in bbox], outline=(0, 255, 0), width=width)
        for (i, j), color in zip(links, link_colors):
            if kp[i, 2] >= score_threshold and kp[j, 2] >= score_threshold:
                draw.line([(kp[i, 0], kp[i, 1]), (kp[j, 0], kp[j, 1])], fill=color, width=width)
        for index, (x, y, score) in enumerate(kp):
            if score >= score_threshold:
                r = radius if index < 70 else radius * 0.5  # face points are dense: draw them smaller
                draw.ellipse([x - r, y - r, x + r, y + r], fill=point_colors[index % len(point_colors)])
    return np.asarray(canvas)


def save_png(path: Path, array: np.ndarray) -> None:
    """Write an (H, W[, 3]) uint8 array as PNG."""
    from PIL import Image

    Image.fromarray(np.ascontiguousarray(array)).save(path, format="PNG")
