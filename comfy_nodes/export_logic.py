"""Export node logic: capture bundles for Blender (one frame, or a numbered sequence for batches) and meshes.

Writers live in ``core.formats``; this module only assembles per-image ``CaptureFrame``s from the node inputs and
checks that everything describes the same images.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..core.formats import bundle as bundle_format
from ..core.formats import mesh as mesh_format
from ..core.formats.exr import ExrError, require_openexr
from .imaging import check_batch_count, check_image, check_mask, check_same_size
from .loader_logic import checkpoint_sha256
from .runtime import Runtime
from .types import TaskBatch, require_batch

BUNDLE_NODE = "Sapiens2 Save Capture Bundle"
MESH_NODE = "Sapiens2 Export Mesh"
MESH_FORMATS = ("glb", "ply")


def require_exr_support(python: str = "python") -> None:
    """Fail early, before any work, when the optional OpenEXR package is missing."""
    try:
        require_openexr()
    except ExrError as exc:
        raise RuntimeError(
            f"{BUNDLE_NODE}: capture bundles are EXR files and need the 'openexr' package in ComfyUI's Python. "
            f"Install it with:  {python} -m pip install openexr   then restart ComfyUI."
        ) from exc


def _np(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return (
            value.detach().to("cpu", torch.float32).numpy()
            if value.is_floating_point()
            else value.cpu().numpy()
        )
    return np.asarray(value)


def _check_batch(name: str, batch: TaskBatch | None, task: str, count: int, size: tuple[int, int]):
    if batch is None:
        return None
    batch = require_batch(batch, task, BUNDLE_NODE, name)
    if len(batch) not in (1, count):
        raise ValueError(f"{BUNDLE_NODE}: '{name}' has {len(batch)} results for {count} images")
    if tuple(batch.size) != size:
        raise ValueError(
            f"{BUNDLE_NODE}: '{name}' is {batch.size[0]}x{batch.size[1]} but the image is {size[0]}x{size[1]}; "
            "connect results computed from this same image"
        )
    return batch


def _models(*batches: TaskBatch | None) -> list[dict[str, Any]]:
    records = []
    for b in batches:
        if b is not None and b.model:
            record = dict(b.model)
            record["sha256"] = checkpoint_sha256(record)
            records.append(record)
    return records


def capture_frames(
    image: torch.Tensor,
    *,
    pose: TaskBatch | None = None,
    seg: TaskBatch | None = None,
    normals: TaskBatch | None = None,
    albedo: torch.Tensor | None = None,
    pointmap: TaskBatch | None = None,
    mask: torch.Tensor | None = None,
    source_name: str | None = None,
) -> list[bundle_format.CaptureFrame]:
    """One ``CaptureFrame`` per image, every layer checked to match the image size."""
    rgb = check_image(image, BUNDLE_NODE)
    b, h, w = rgb.shape[:3]
    size = (w, h)
    pose = _check_batch("pose", pose, "pose", b, size)
    seg = _check_batch("seg", seg, "seg", b, size)
    normals = _check_batch("normals", normals, "normal", b, size)
    pointmap = _check_batch("pointmap", pointmap, "pointmap", b, size)
    albedo = check_same_size("albedo", albedo, rgb, BUNDLE_NODE) if albedo is not None else None
    mask = check_mask(mask, rgb, BUNDLE_NODE)
    models = _models(pose, seg, normals, pointmap)

    def pick(batch: TaskBatch | None, i: int):
        return None if batch is None else batch.results[min(i, len(batch) - 1)]

    frames = []
    for i in range(b):
        pm = pick(pointmap, i)
        camera = None
        if pm is not None and all(np.isfinite(pm.intrinsics)):
            fx, fy, cx, cy = (float(v) for v in pm.intrinsics)
            camera = {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy, "source": "pointmap"}
        n = pick(normals, i)
        s = pick(seg, i)
        p = pick(pose, i)
        frame_mask = mask[i] if mask is not None else None
        if frame_mask is None and s is not None:
            frame_mask = (s.labels > 0).to(torch.float32)
        frames.append(
            bundle_format.CaptureFrame(
                width=w,
                height=h,
                image=_np(rgb[i]),
                points=None if pm is None else _np(pm.points),
                normals=None if n is None else _np(n.normals),
                albedo=None if albedo is None else _np(albedo[i]),
                seg=None if s is None else _np(s.labels).astype(np.int32),
                mask=None if frame_mask is None else _np(frame_mask),
                camera=camera,
                people=[] if p is None else list(p.people),
                models=models,
                pointmap_scale=None if pm is None else float(pm.scale),
                source_name=source_name,
            )
        )
    return frames


def save_capture_bundle(
    folder: str | os.PathLike,
    name: str,
    frames: list[bundle_format.CaptureFrame],
    *,
    fps: float = 24.0,
    runtime: Runtime | None = None,
) -> Path:
    """Write one bundle (single image) or a sequence (batch); returns the JSON to open in Blender."""
    runtime = runtime or Runtime()
    if len(frames) == 1:
        return bundle_format.write_bundle(folder, name, frames[0])
    writer = bundle_format.SequenceWriter(folder, name, fps)
    for i, frame in enumerate(frames):
        runtime.check_interrupt()
        writer.add(frame)
        runtime.progress(i + 1, len(frames))
    return writer.close()


def export_meshes(
    pointmap: TaskBatch,
    folder: str | os.PathLike,
    name: str,
    *,
    fmt: str = "glb",
    image: torch.Tensor | None = None,
    mask: torch.Tensor | None = None,
    normals: TaskBatch | None = None,
    max_edge_ratio: float = 0.05,
) -> list[Path]:
    """One mesh file per pointmap (``name.glb`` or ``name_0001.glb``...), coloured by the image when given."""
    if fmt not in MESH_FORMATS:
        raise ValueError(f"{MESH_NODE}: unknown format {fmt!r}; choose one of {', '.join(MESH_FORMATS)}")
    pointmap = require_batch(pointmap, "pointmap", MESH_NODE, "pointmap")
    w, h = pointmap.size
    count = len(pointmap)
    rgb = None
    if image is not None:
        rgb = check_image(image, MESH_NODE)
        if tuple(rgb.shape[1:3]) != (h, w):
            raise ValueError(
                f"{MESH_NODE}: the image is {rgb.shape[2]}x{rgb.shape[1]} but the pointmap is {w}x{h}; use the image "
                "the pointmap was computed from"
            )
        check_batch_count("image", rgb.shape[0], count, MESH_NODE, of="the pointmap batch")
    if mask is not None:  # only the shape of the reference is read: an empty (count, h, w, 0) tensor
        mask = check_mask(mask, torch.empty(count, h, w, 0), MESH_NODE, of="the pointmap batch")
    if normals is not None:
        normals = require_batch(normals, "normal", MESH_NODE, "normals")
        check_batch_count("normals", len(normals), count, MESH_NODE, of="the pointmap batch")
        if tuple(normals.size) != (w, h):
            raise ValueError(
                f"{MESH_NODE}: normals are {normals.size[0]}x{normals.size[1]}, pointmap {w}x{h}"
            )
    base = bundle_format.sanitize_name(name)
    paths = []
    for i, result in enumerate(pointmap.results):
        m = None
        if mask is not None:
            m = _np(mask[min(i, mask.shape[0] - 1)]) > 0.5
        elif result.mask is not None:
            m = _np(result.mask).astype(bool)
        mesh = mesh_format.pointmap_to_mesh(
            _np(result.points),
            colors=None if rgb is None else _np(rgb[min(i, rgb.shape[0] - 1)]),
            mask=m,
            normals=None if normals is None else _np(normals.results[min(i, len(normals) - 1)].normals),
            max_edge_ratio=max_edge_ratio,
        )
        if len(mesh.faces) == 0:
            raise ValueError(
                f"{MESH_NODE}: image {i} gives an empty mesh (no valid depth inside the mask); check the mask, or "
                "raise max_edge_ratio"
            )
        file_name = f"{base}.{fmt}" if count == 1 else f"{base}_{i + 1:04d}.{fmt}"
        paths.append(mesh_format.write_mesh(Path(folder) / file_name, mesh))
    return paths
