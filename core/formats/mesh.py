"""Pointmap → coloured triangle mesh, written as binary PLY or GLB (numpy + struct only).

A pointmap is a grid, so the mesh is two triangles per pixel quad; triangles that straddle a depth
discontinuity (a silhouette edge in front of the background) would be long "rubber sheets", so they are
dropped when their depth range is large relative to their depth. Vertices stay in the OpenCV camera frame for
PLY (like the bundle) and are converted to glTF's y-up, −z-forward frame for GLB, as glTF requires.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import FormatError
from .exr import srgb_to_linear

__all__ = ["Mesh", "pointmap_to_mesh", "write_glb", "write_mesh", "write_ply"]


@dataclass
class Mesh:
    """Triangle mesh: vertices (N, 3) float32, faces (M, 3) uint32, optional colours (N, 3) uint8 sRGB and normals."""

    vertices: np.ndarray
    faces: np.ndarray
    colors: np.ndarray | None = None
    normals: np.ndarray | None = None


def _as_uint8_rgb(colors: Any) -> np.ndarray:
    arr = np.asarray(colors)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)
    arr = arr[..., :3]
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.uint16:
        return (arr // 257).astype(np.uint8)
    return np.clip(np.rint(arr.astype(np.float32) * 255.0), 0, 255).astype(np.uint8)


def pointmap_to_mesh(
    points: np.ndarray,
    colors: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    normals: np.ndarray | None = None,
    max_edge_ratio: float = 0.05,
) -> Mesh:
    """Triangulate an (H, W, 3) OpenCV-frame pointmap.

    A pixel is a vertex when its point is finite with Z > 0 and it is inside `mask` (if given). A triangle is kept
    when its three pixels are vertices and (max Z − min Z) ≤ `max_edge_ratio` × mean Z. Triangles face the camera.
    """
    pts = np.asarray(points, dtype=np.float32)
    if pts.ndim != 3 or pts.shape[2] != 3:
        raise FormatError(f"points must be (H, W, 3), got {pts.shape}")
    height, width = pts.shape[:2]
    valid = np.isfinite(pts).all(axis=2) & (pts[..., 2] > 0)
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != (height, width):
            raise FormatError(f"mask must be (H, W) = {(height, width)}, got {m.shape}")
        valid &= m > 0.5 if m.dtype != bool else m
    index = np.full((height, width), -1, dtype=np.int64)
    index[valid] = np.arange(int(valid.sum()))
    depth = np.where(valid, pts[..., 2], np.nan)

    # Corners of each quad: a = (r, c), b = (r, c+1), c = (r+1, c), d = (r+1, c+1).
    corners = {
        "a": (slice(0, -1), slice(0, -1)),
        "b": (slice(0, -1), slice(1, None)),
        "c": (slice(1, None), slice(0, -1)),
        "d": (slice(1, None), slice(1, None)),
    }
    faces = []
    # (a, c, b) and (b, c, d) have normal −Z in the OpenCV frame, i.e. they face the camera.
    for tri in (("a", "c", "b"), ("b", "c", "d")):
        idx = [index[corners[k]] for k in tri]
        zs = np.stack([depth[corners[k]] for k in tri])
        with np.errstate(invalid="ignore"):
            keep = (idx[0] >= 0) & (idx[1] >= 0) & (idx[2] >= 0)
            keep &= (zs.max(axis=0) - zs.min(axis=0)) <= max_edge_ratio * zs.mean(axis=0)
        faces.append(np.stack([i[keep] for i in idx], axis=1))
    face_array = np.concatenate(faces).astype(np.uint32) if faces else np.zeros((0, 3), np.uint32)

    vert_colors = None
    if colors is not None:
        rgb = _as_uint8_rgb(colors)
        if rgb.shape[:2] != (height, width):
            raise FormatError(f"colors must be (H, W, 3) = {(height, width)}, got {rgb.shape}")
        vert_colors = np.ascontiguousarray(rgb[valid])
    vert_normals = None
    if normals is not None:
        nrm = np.asarray(normals, dtype=np.float32)
        if nrm.shape != pts.shape:
            raise FormatError(f"normals must be (H, W, 3) = {pts.shape}, got {nrm.shape}")
        vert_normals = np.ascontiguousarray(np.nan_to_num(nrm[valid]))
    return Mesh(np.ascontiguousarray(pts[valid]), face_array, vert_colors, vert_normals)


def write_ply(path: str | os.PathLike[str], mesh: Mesh) -> Path:
    """Binary little-endian PLY: vertex x y z [nx ny nz] [red green blue], face list uchar int."""
    n_vert, n_face = len(mesh.vertices), len(mesh.faces)
    fields = [("x", "<f4"), ("y", "<f4"), ("z", "<f4")]
    props = ["property float x", "property float y", "property float z"]
    if mesh.normals is not None:
        fields += [("nx", "<f4"), ("ny", "<f4"), ("nz", "<f4")]
        props += ["property float nx", "property float ny", "property float nz"]
    if mesh.colors is not None:
        fields += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
        props += ["property uchar red", "property uchar green", "property uchar blue"]
    vertex = np.empty(n_vert, dtype=np.dtype(fields))
    vertex["x"], vertex["y"], vertex["z"] = mesh.vertices.T
    if mesh.normals is not None:
        vertex["nx"], vertex["ny"], vertex["nz"] = mesh.normals.T
    if mesh.colors is not None:
        vertex["red"], vertex["green"], vertex["blue"] = mesh.colors.T
    face = np.empty(n_face, dtype=np.dtype([("n", "u1"), ("i", "<i4", (3,))]))
    face["n"] = 3
    face["i"] = mesh.faces.astype(np.int32)
    header = "\n".join(
        [
            "ply",
            "format binary_little_endian 1.0",
            "comment sapiens2-studio pointmap mesh, OpenCV camera frame (x right, y down, z forward), meters",
            f"element vertex {n_vert}",
            *props,
            f"element face {n_face}",
            "property list uchar int vertex_indices",
            "end_header",
        ]
    )
    out = Path(path)
    with open(out, "wb") as fh:
        fh.write(header.encode("ascii") + b"\n")
        fh.write(vertex.tobytes())
        fh.write(face.tobytes())
    return out


def _pad4(data: bytes, fill: bytes) -> bytes:
    return data + fill * ((4 - len(data) % 4) % 4)


def write_glb(path: str | os.PathLike[str], mesh: Mesh) -> Path:
    """glTF 2.0 binary with one mesh: POSITION, optional NORMAL and COLOR_0 (linear float RGB), uint32 indices."""
    if len(mesh.vertices) == 0 or len(mesh.faces) == 0:
        raise FormatError(
            f"{path}: the mesh is empty (no valid points inside the mask); glTF needs at least one triangle"
        )
    flip = np.array([1.0, -1.0, -1.0], dtype=np.float32)  # OpenCV → glTF (rotation: winding preserved)
    positions = np.ascontiguousarray(mesh.vertices.astype(np.float32) * flip)
    blobs: list[bytes] = []
    views: list[dict[str, Any]] = []
    accessors: list[dict[str, Any]] = []

    def add(array: np.ndarray, acc_type: str, component: int, target: int, **extra: Any) -> int:
        offset = sum(len(b) for b in blobs)
        data = _pad4(np.ascontiguousarray(array).tobytes(), b"\x00")
        blobs.append(data)
        views.append({"buffer": 0, "byteOffset": offset, "byteLength": array.nbytes, "target": target})
        count = len(array) if acc_type != "SCALAR" else array.size
        accessors.append(
            {
                "bufferView": len(views) - 1,
                "componentType": component,
                "count": count,
                "type": acc_type,
                **extra,
            }
        )
        return len(accessors) - 1

    float_type, uint_type, array_buffer, element_buffer = 5126, 5125, 34962, 34963
    bounds = {}
    if len(positions):
        bounds = {"min": positions.min(axis=0).tolist(), "max": positions.max(axis=0).tolist()}
    attributes = {"POSITION": add(positions, "VEC3", float_type, array_buffer, **bounds)}
    if mesh.normals is not None:
        attributes["NORMAL"] = add(mesh.normals.astype(np.float32) * flip, "VEC3", float_type, array_buffer)
    if mesh.colors is not None:
        linear = srgb_to_linear(mesh.colors.astype(np.float32) / 255.0)
        attributes["COLOR_0"] = add(linear, "VEC3", float_type, array_buffer)
    indices = add(mesh.faces.astype(np.uint32).reshape(-1), "SCALAR", uint_type, element_buffer)
    binary = b"".join(blobs)
    doc = {
        "asset": {"version": "2.0", "generator": "sapiens2-studio"},
        "scene": 0,
        "scenes": [{"nodes": [0]}],
        "nodes": [{"mesh": 0, "name": "sapiens2_pointmap"}],
        "meshes": [
            {"primitives": [{"attributes": attributes, "indices": indices, "material": 0, "mode": 4}]}
        ],
        # The default glTF material is fully metallic (renders dark); a rough dielectric shows the vertex colours.
        "materials": [
            {"pbrMetallicRoughness": {"metallicFactor": 0.0, "roughnessFactor": 1.0}, "doubleSided": True}
        ],
        "buffers": [{"byteLength": len(binary)}],
        "bufferViews": views,
        "accessors": accessors,
    }
    json_chunk = _pad4(json.dumps(doc, separators=(",", ":")).encode("utf-8"), b" ")
    total = 12 + 8 + len(json_chunk) + 8 + len(binary)
    out = Path(path)
    with open(out, "wb") as fh:
        fh.write(struct.pack("<4sII", b"glTF", 2, total))
        fh.write(struct.pack("<I4s", len(json_chunk), b"JSON") + json_chunk)
        fh.write(struct.pack("<I4s", len(binary), b"BIN\x00") + binary)
    return out


def write_mesh(path: str | os.PathLike[str], mesh: Mesh) -> Path:
    """Write `.ply` or `.glb` by the file's extension."""
    suffix = Path(path).suffix.lower()
    if suffix == ".ply":
        return write_ply(path, mesh)
    if suffix == ".glb":
        return write_glb(path, mesh)
    raise FormatError(f"unknown mesh format {suffix!r} for {path}; use .ply or .glb")
