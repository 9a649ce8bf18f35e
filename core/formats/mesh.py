"""Pointmap → coloured triangle mesh, written as binary PLY or GLB (numpy, struct and zlib only).

A pointmap is a grid, so the mesh is two triangles per pixel quad; triangles that straddle a depth
discontinuity (a silhouette edge in front of the background) would be long "rubber sheets", so they are
dropped when their depth range is large relative to their depth.

Both files are in one frame, glTF's: x right, y up, z toward the viewer, metres, the camera at the origin looking
down −z (OpenCV (x, y, z) → (x, −y, −z)). glTF requires it, and y-up viewers (three.js and so ComfyUI's 3D
preview, trimesh, MeshLab) show a PLY in it upright too. The `Mesh` itself stays in the OpenCV frame, like every
array the project keeps.

Colours: the PLY has per-vertex colours. The GLB carries the image as its material's base-colour texture, with
each vertex at its pixel's centre: trimesh ignores COLOR_0 whenever a primitive has a material, and three.js draws
a primitive without one with glTF's default, fully metallic material (nearly black without an environment map),
so a texture is the one form both show.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import all_finite
from .errors import FormatError
from .exr import srgb_to_linear

# The mesh files every front-end offers (`--mesh`, the ComfyUI export node, PredictJob): listed once.
MESH_FORMATS = ("glb", "ply")

__all__ = [
    "OPENCV_TO_FILE",
    "Mesh",
    "encode_png",
    "pointmap_to_mesh",
    "vertex_pixels",
    "write_glb",
    "write_mesh",
    "write_ply",
]

# OpenCV camera frame → the files' frame (glTF: y up, z toward the viewer): a rotation of 180° about x, so
# triangle winding is preserved.
OPENCV_TO_FILE = np.array([1.0, -1.0, -1.0], dtype=np.float32)


@dataclass
class Mesh:
    """Triangle mesh in the OpenCV camera frame: vertices (N, 3) float32, faces (M, 3) uint32, optional per-vertex
    colours (N, 3) uint8 sRGB and normals; optionally a texture (H, W, 3) uint8 sRGB with per-vertex `uv` (N, 2)
    (glTF convention: (0, 0) is the texture's top-left corner)."""

    vertices: np.ndarray
    faces: np.ndarray
    colors: np.ndarray | None = None
    normals: np.ndarray | None = None
    texture: np.ndarray | None = None
    uv: np.ndarray | None = None


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


def vertex_pixels(points: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """(H, W) bool: the pixels that become vertices of `pointmap_to_mesh` (finite point, Z > 0, inside `mask`),
    in the mesh's vertex order when read row-major, so other writers can attach per-pixel data to its vertices."""
    pts = np.asarray(points, dtype=np.float32)
    if pts.ndim != 3 or pts.shape[2] != 3:
        raise FormatError(f"points must be (H, W, 3), got {pts.shape}")
    height, width = pts.shape[:2]
    valid = all_finite(pts) & (pts[..., 2] > 0)
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != (height, width):
            raise FormatError(f"mask must be (H, W) = {(height, width)}, got {m.shape}")
        valid &= m > 0.5 if m.dtype != bool else m
    return valid


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
    valid = vertex_pixels(pts, mask)
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

    vert_colors = texture = uv = None
    if colors is not None:
        rgb = _as_uint8_rgb(colors)
        if rgb.shape[:2] != (height, width):
            raise FormatError(f"colors must be (H, W, 3) = {(height, width)}, got {rgb.shape}")
        vert_colors = np.ascontiguousarray(rgb[valid])
        texture = np.ascontiguousarray(rgb)
        rows, cols = np.nonzero(valid)
        uv = np.stack([(cols + 0.5) / width, (rows + 0.5) / height], axis=1).astype(np.float32)
    vert_normals = None
    if normals is not None:
        nrm = np.asarray(normals, dtype=np.float32)
        if nrm.shape != pts.shape:
            raise FormatError(f"normals must be (H, W, 3) = {pts.shape}, got {nrm.shape}")
        vert_normals = np.ascontiguousarray(np.nan_to_num(nrm[valid]))
    return Mesh(np.ascontiguousarray(pts[valid]), face_array, vert_colors, vert_normals, texture, uv)


def write_ply(path: str | os.PathLike[str], mesh: Mesh) -> Path:
    """Binary little-endian PLY: vertex x y z [nx ny nz] [red green blue], face list uchar int; glTF's frame."""
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
    vertex["x"], vertex["y"], vertex["z"] = (mesh.vertices.astype(np.float32) * OPENCV_TO_FILE).T
    if mesh.normals is not None:
        vertex["nx"], vertex["ny"], vertex["nz"] = (mesh.normals.astype(np.float32) * OPENCV_TO_FILE).T
    if mesh.colors is not None:
        vertex["red"], vertex["green"], vertex["blue"] = mesh.colors.T
    face = np.empty(n_face, dtype=np.dtype([("n", "u1"), ("i", "<i4", (3,))]))
    face["n"] = 3
    face["i"] = mesh.faces.astype(np.int32)
    header = "\n".join(
        [
            "ply",
            "format binary_little_endian 1.0",
            "comment sapiens2-studio pointmap mesh, meters, y up: x right, y up, z toward the viewer (glTF frame; "
            "the camera at the origin looks down -z)",
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


def encode_png(rgb: np.ndarray) -> bytes:
    """An (H, W, 3) uint8 image as an 8-bit RGB PNG (stdlib zlib: core/formats stays numpy-only)."""
    image = np.ascontiguousarray(_as_uint8_rgb(rgb))
    height, width = image.shape[:2]
    rows = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # filter byte 0 (none) before each row
    rows[:, 1:] = image.reshape(height, -1)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, truecolour, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
        + chunk(b"IEND", b"")
    )


def write_glb(path: str | os.PathLike[str], mesh: Mesh) -> Path:
    """glTF 2.0 binary with one mesh: POSITION, optional NORMAL, uint32 indices, and the colours as a PNG
    base-colour texture with TEXCOORD_0 (or, for a mesh with vertex colours only, COLOR_0 in linear float RGB)."""
    if len(mesh.vertices) == 0 or len(mesh.faces) == 0:
        raise FormatError(
            f"{path}: the mesh is empty (no valid points inside the mask); glTF needs at least one triangle"
        )
    positions = np.ascontiguousarray(mesh.vertices.astype(np.float32) * OPENCV_TO_FILE)
    blobs: list[bytes] = []
    views: list[dict[str, Any]] = []
    accessors: list[dict[str, Any]] = []

    def view(data: bytes, target: int | None = None) -> int:
        entry: dict[str, Any] = {
            "buffer": 0,
            "byteOffset": sum(len(b) for b in blobs),
            "byteLength": len(data),
        }
        if target is not None:
            entry["target"] = target
        blobs.append(_pad4(data, b"\x00"))
        views.append(entry)
        return len(views) - 1

    def add(array: np.ndarray, acc_type: str, component: int, target: int, **extra: Any) -> int:
        data = np.ascontiguousarray(array)
        count = len(data) if acc_type != "SCALAR" else data.size
        index = view(data.tobytes(), target)
        accessors.append(
            {"bufferView": index, "componentType": component, "count": count, "type": acc_type, **extra}
        )
        return len(accessors) - 1

    float_type, uint_type, array_buffer, element_buffer = 5126, 5125, 34962, 34963
    bounds = {"min": positions.min(axis=0).tolist(), "max": positions.max(axis=0).tolist()}
    attributes = {"POSITION": add(positions, "VEC3", float_type, array_buffer, **bounds)}
    if mesh.normals is not None:
        normals = mesh.normals.astype(np.float32) * OPENCV_TO_FILE
        attributes["NORMAL"] = add(normals, "VEC3", float_type, array_buffer)
    # A rough dielectric: glTF's default material is fully metallic and renders nearly black in most viewers.
    material: dict[str, Any] = {
        "pbrMetallicRoughness": {"metallicFactor": 0.0, "roughnessFactor": 1.0},
        "doubleSided": True,
    }
    extra: dict[str, Any] = {}
    textured = mesh.texture is not None and mesh.uv is not None
    if textured:
        attributes["TEXCOORD_0"] = add(mesh.uv.astype(np.float32), "VEC2", float_type, array_buffer)
        image_view = view(encode_png(mesh.texture))
        material["pbrMetallicRoughness"]["baseColorTexture"] = {"index": 0, "texCoord": 0}
        extra = {
            "images": [{"bufferView": image_view, "mimeType": "image/png"}],
            "samplers": [
                {"magFilter": 9729, "minFilter": 9729, "wrapS": 33071, "wrapT": 33071}
            ],  # linear, clamp
            "textures": [{"sampler": 0, "source": 0}],
        }
    elif (
        mesh.colors is not None
    ):  # no texture to carry them: vertex colours (three.js shows them, trimesh not)
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
        "materials": [material],
        **extra,
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
