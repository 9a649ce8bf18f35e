"""Exports from task results: capture bundles (a frame, or a numbered sequence for a batch) and meshes."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ...formats import bundle as bundle_format
from ...formats import mesh as mesh_format
from ...formats.arrays import to_numpy
from ...formats.sequence import SequenceWriter
from ..errors import StudioError
from ..runtime.half_cast import torch_half
from ..runtime.host import Host
from ..sources.batches import TaskBatch, check_batch_count, check_image, check_mask, require_batch

MESH_FORMATS = mesh_format.MESH_FORMATS


def save_capture_bundle(
    folder: str | os.PathLike,
    name: str,
    frames: list[bundle_format.CaptureFrame],
    *,
    fps: float = 24.0,
    host: Host | None = None,
    compression: str | None = None,
) -> Path:
    """Write one bundle (a single image) or a sequence (a batch); returns the JSON to open in Blender.
    `compression`: the EXRs' (`bundle.EXR_COMPRESSIONS`; None: the default)."""
    host = host or Host()
    if len(frames) == 1:
        return bundle_format.write_bundle(folder, name, frames[0], compression=compression, half=torch_half)
    writer = SequenceWriter(folder, name, fps, compression=compression, half=torch_half)
    for i, frame in enumerate(frames):
        host.check_cancel()
        writer.add(frame)
        host.progress(i + 1, len(frames))
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
    """One mesh file per pointmap (`name.glb`, or `name_0001.glb`… for a batch), coloured by the image if given."""
    if fmt not in MESH_FORMATS:
        raise StudioError(f"unknown mesh format {fmt!r}; choose one of {', '.join(MESH_FORMATS)}")
    pointmap = require_batch(pointmap, "pointmap", "", "pointmap")
    w, h = pointmap.size
    count = len(pointmap)
    rgb = None
    if image is not None:
        rgb = check_image(image, "")
        if tuple(rgb.shape[1:3]) != (h, w):
            raise StudioError(
                f"the image is {rgb.shape[2]}x{rgb.shape[1]} but the pointmap is {w}x{h}; use the image the "
                "pointmap was computed from"
            )
        check_batch_count("image", rgb.shape[0], count, "", of="the pointmap batch")
    if mask is not None:  # only the shape of the reference is read: an empty (count, h, w, 0) tensor
        mask = check_mask(mask, torch.empty(count, h, w, 0), "", of="the pointmap batch")
    if normals is not None:
        normals = require_batch(normals, "normal", "", "normals")
        check_batch_count("normals", len(normals), count, "", of="the pointmap batch")
        if tuple(normals.size) != (w, h):
            raise StudioError(f"normals are {normals.size[0]}x{normals.size[1]}, the pointmap {w}x{h}")
    base = bundle_format.sanitize_name(name)
    paths = []
    for i, result in enumerate(pointmap.results):
        m = None
        if mask is not None:
            m = to_numpy(mask[min(i, mask.shape[0] - 1)]) > 0.5
        elif result.mask is not None:
            m = to_numpy(result.mask).astype(bool)
        mesh = mesh_format.pointmap_to_mesh(
            to_numpy(result.points),
            colors=None if rgb is None else to_numpy(rgb[min(i, rgb.shape[0] - 1)]),
            mask=m,
            normals=None if normals is None else to_numpy(normals[i].normals),
            max_edge_ratio=max_edge_ratio,
        )
        if len(mesh.faces) == 0:
            raise StudioError(
                f"image {i + 1} gives an empty mesh (no valid depth inside the mask); check the mask, or raise "
                "max_edge_ratio"
            )
        file_name = f"{base}.{fmt}" if count == 1 else f"{base}_{i + 1:04d}.{fmt}"
        paths.append(mesh_format.write_mesh(Path(folder) / file_name, mesh))
    return paths
