"""The data a USD stage is authored from, in the stage's frame, without `pxr`: the 308-joint skeleton's topology,
each frame's camera lens and triangulated mesh with its primvars, and each person's joints over time.

Why apart from the writer (`usd.py`): this is all the maths of the export, numpy only (testable without usd-core,
as every module of formats); the writer only hands these arrays to USD. Layout, units and primvars: docs/formats.md
§6.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .arrays import host_array
from .bundle import CaptureFrame, CapturePerson, default_camera, metadata_tables, read_bundle
from .bundle_pixels import sample_points  # the bundle's keypoint → 3D rule, shared
from .errors import FormatError
from .exr import srgb_to_linear
from .mesh import OPENCV_TO_FILE, pointmap_to_mesh, vertex_pixels
from .sequence import read_sequence

# OpenCV camera frame → the stage's frame (USD camera: looks down −Z, +Y up): (x, y, z) → (x, −y, −z).
OPENCV_TO_USD = OPENCV_TO_FILE
# A 36 mm film back across the image width. USD measures focal length and apertures in tenths of a scene unit
# (UsdGeomCamera; Blender's importer and exporter follow it), so with metres as the unit 36 mm is 0.36.
FILM_BACK_MM = 36.0
TENTH_UNIT_MM = 100.0  # one tenth of a metre


class UsdExportError(FormatError):
    """A capture cannot be written as USD (usd-core missing, nothing to export, a bad target path)."""


@dataclass(frozen=True)
class JointTree:
    """The USD skeleton of the 308 keypoints, in joint order (every parent before its children, as UsdSkel
    requires): `paths[j]` names joint j with all its ancestors, `parents[j]` is its parent joint (−1: the root),
    `keypoints[j]` the bundle keypoint index it carries."""

    paths: tuple[str, ...]
    parents: tuple[int, ...]
    keypoints: tuple[int, ...]


@lru_cache(maxsize=1)
def joint_tree() -> JointTree:
    """The joint hierarchy: the root is the neck; the bundle's skeleton links (less the ear–shoulder and
    shoulder–shoulder ones, which would close loops) give the body, feet and hands; elbow and shoulder landmarks
    hang from their joint, the face points from the nose. USD joint paths name every ancestor
    (`neck/left_shoulder/left_elbow`)."""
    names, links, _ = metadata_tables()
    index = {n: i for i, n in enumerate(names)}
    skipped = {frozenset(("left_ear", "left_shoulder")), frozenset(("right_ear", "right_shoulder"))}
    skipped.add(frozenset(("left_shoulder", "right_shoulder")))
    neighbours: dict[int, list[int]] = {i: [] for i in range(len(names))}
    for a, b in links:
        if frozenset((names[a], names[b])) not in skipped:
            neighbours[a].append(b)
            neighbours[b].append(a)
    root = index["neck"]
    parent = [-2] * len(names)
    parent[root] = -1
    queue = [index["nose"], index["left_shoulder"], index["right_shoulder"]]
    for child in queue:
        parent[child] = root
    while queue:
        current = queue.pop(0)
        for nxt in neighbours[current]:
            if parent[nxt] == -2:
                parent[nxt] = current
                queue.append(nxt)
    for i, name in enumerate(names):
        if parent[i] != -2:
            continue
        side = "left" if name.startswith("left_") else "right"
        if "olecranon" in name or "cubital_fossa" in name:
            parent[i] = index[f"{side}_elbow"]
        elif "acromion" in name:
            parent[i] = index[f"{side}_shoulder"]
        else:
            parent[i] = index["nose"]
    paths: list[str] = [""] * len(names)

    def path_of(i: int) -> str:
        if not paths[i]:
            paths[i] = names[i] if parent[i] < 0 else f"{path_of(parent[i])}/{names[i]}"
        return paths[i]

    for i in range(len(names)):
        path_of(i)
    order = sorted(range(len(names)), key=lambda i: (paths[i].count("/"), i))  # parents first
    joint_of = {k: j for j, k in enumerate(order)}
    return JointTree(
        paths=tuple(paths[k] for k in order),
        parents=tuple(-1 if parent[k] < 0 else joint_of[parent[k]] for k in order),
        keypoints=tuple(order),
    )


def frames_of(source: Any) -> tuple[Iterator[CaptureFrame], float | None, str]:
    """(frames, fps or None, name) from a bundle or sequence JSON path, a CaptureFrame or an iterable."""
    if isinstance(source, CaptureFrame):
        return iter([source]), None, source.name or "capture"
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.name.endswith(".sequence.json"):
            seq = read_sequence(path)
            if not len(seq):
                raise UsdExportError(f"{path}: the sequence lists no frames; nothing to export")
            return iter(seq), seq.fps, seq.name
        if path.suffix.lower() == ".json":
            frame = read_bundle(path)
            return iter([frame]), None, frame.name or path.stem
        raise UsdExportError(
            f"{path}: give a capture bundle (<name>.json) or a sequence index (<name>.sequence.json)"
        )
    return iter(source), None, "capture"


def camera_of(frame: CaptureFrame) -> dict[str, float]:
    cam = frame.camera or default_camera(frame.width, frame.height)
    try:
        return {k: float(cam[k]) for k in ("fx", "fy", "cx", "cy")}
    except (KeyError, TypeError, ValueError) as exc:
        raise UsdExportError(
            f"frame {frame.name or frame.frame}: camera needs fx, fy, cx, cy ({exc})"
        ) from exc


def camera_lens(camera: dict[str, float], width: int, height: int) -> dict[str, float]:
    """USD camera values (tenths of a metre) reproducing pinhole intrinsics on a `width` × `height` image.

    A USD camera projects x / −z = (u_ndc · aperture / 2 + offset) / focal, so the image centre sits at
    offset / focal; OpenCV puts it at (W/2 − cx) / fx across and, with y flipped, (cy − H/2) / fy up."""
    fx, fy, cx, cy = camera["fx"], camera["fy"], camera["cx"], camera["cy"]
    if not all(math.isfinite(v) for v in (fx, fy, cx, cy)) or fx <= 0 or fy <= 0:
        raise UsdExportError(f"camera intrinsics must be finite with fx, fy > 0, got {camera}")
    horizontal = FILM_BACK_MM / TENTH_UNIT_MM
    focal = fx * horizontal / width
    return {
        "focalLength": focal,
        "horizontalAperture": horizontal,
        "verticalAperture": focal * height / fy,
        "horizontalApertureOffset": focal * (width / 2.0 - cx) / fx,
        "verticalApertureOffset": focal * (cy - height / 2.0) / fy,
    }


@dataclass
class MeshData:
    """One frame's mesh in the stage's frame, with its per-vertex primvars (numpy arrays)."""

    points: np.ndarray
    indices: np.ndarray
    normals: np.ndarray
    st: np.ndarray
    primvars: dict[str, np.ndarray]  # name → values (see PRIMVARS)


@dataclass(frozen=True)
class Primvar:
    """One per-vertex primvar of the mesh: its name, Sdf value type name, the `CaptureFrame` attribute it is made
    from and how (`values(array, valid)`: the values of the frame's valid pixels, in vertex order)."""

    name: str
    type_name: str
    source: str
    values: Callable[[np.ndarray, np.ndarray], np.ndarray]


# The mesh's primvars, in the order they are authored. All have vertex interpolation.
MESH_PRIMVARS = (
    Primvar("displayColor", "Color3fArray", "image", lambda image, valid: _linear_rgb(image)[valid]),
    Primvar(
        "displayOpacity",
        "FloatArray",
        "alpha",
        lambda alpha, valid: np.clip(np.asarray(alpha, np.float32)[valid], 0.0, 1.0),
    ),
    Primvar("albedo", "Color3fArray", "albedo", lambda albedo, valid: _linear_rgb(albedo)[valid]),
    Primvar("bodyPartId", "IntArray", "seg", lambda seg, valid: np.asarray(seg)[valid].astype(np.int32)),
)
PRIMVARS = {p.name: p.type_name for p in MESH_PRIMVARS}  # primvar name → Sdf value type name


def _vertex_normals(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted vertex normals of a triangle mesh (for vertices without a stored normal)."""
    out = np.zeros_like(points, dtype=np.float64)
    if len(faces):
        p = points.astype(np.float64)
        a, b, c = p[faces[:, 0]], p[faces[:, 1]], p[faces[:, 2]]
        face_n = np.cross(b - a, c - a)
        for k in range(3):
            np.add.at(out, faces[:, k], face_n)
    return out


def _unit_normals(stored: np.ndarray | None, points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Unit normals in the stage's frame: the bundle's where it has one, else from the faces, else facing the
    camera (+z), so every vertex has a unit normal."""
    n = np.zeros_like(points, dtype=np.float64) if stored is None else stored.astype(np.float64)
    length = np.linalg.norm(n, axis=1)
    missing = ~(length > 1e-6)
    if missing.any():
        n[missing] = _vertex_normals(points, faces)[missing]
        length = np.linalg.norm(n, axis=1)
        still = ~(length > 1e-12)
        n[still] = (0.0, 0.0, 1.0)
        length[still] = 1.0
    return (n / length[:, None]).astype(np.float32)


def mesh_data(frame: CaptureFrame, max_edge_ratio: float) -> MeshData | None:
    """The frame's pointmap triangulated by the GLB/PLY rule (mesh.pointmap_to_mesh), in the stage's frame."""
    if frame.points is None:
        return None
    points = np.asarray(frame.points, dtype=np.float32)
    mask = frame.mask
    mesh = pointmap_to_mesh(points, mask=mask, normals=frame.normals, max_edge_ratio=max_edge_ratio)
    valid = vertex_pixels(points, mask)
    rows, cols = np.nonzero(valid)
    height, width = valid.shape
    pts = np.ascontiguousarray(mesh.vertices * OPENCV_TO_USD)
    stored = None if mesh.normals is None else mesh.normals * OPENCV_TO_USD
    st = np.stack([(cols + 0.5) / width, 1.0 - (rows + 0.5) / height], axis=1).astype(np.float32)
    primvars = {
        p.name: p.values(getattr(frame, p.source), valid)
        for p in MESH_PRIMVARS
        if getattr(frame, p.source) is not None
    }
    return MeshData(
        pts,
        np.ascontiguousarray(mesh.faces.astype(np.int32).reshape(-1)),
        _unit_normals(stored, pts, mesh.faces.astype(np.int64)),
        st,
        primvars,
    )


def _linear_rgb(image: np.ndarray) -> np.ndarray:
    """sRGB-encoded (float 0..1 or uint8) colour → scene-linear float32 RGB, as USD colour primvars are."""
    arr = np.asarray(image)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)
    arr = arr[..., :3]
    values = arr.astype(np.float32) / 255.0 if arr.dtype == np.uint8 else arr.astype(np.float32)
    return srgb_to_linear(np.clip(values, 0.0, 1.0)).astype(np.float32)


@dataclass
class Track:
    """One person over the sequence: joint positions (stage frame) per time code, NaN rows where unknown."""

    key: int
    times: list[float] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    scores: list[np.ndarray] = field(default_factory=list)


def keypoints_3d(person: CapturePerson, frame: CaptureFrame) -> np.ndarray | None:
    """The person's (308, 3) keypoints in the camera frame: the bundle's, or, for frames built in memory (ComfyUI,
    the Python API), sampled from the frame's points by the bundle writer's own rule, so a stage written from
    memory holds the same joints as one written from the bundle of the same frame."""
    if person.keypoints_3d is not None:
        return np.asarray(person.keypoints_3d, np.float64)
    if frame.points is None:
        return None
    keypoints = np.asarray(person.keypoints, np.float32)
    return sample_points(np.asarray(host_array(frame.points)), keypoints).astype(np.float64)


def filled(positions: np.ndarray) -> np.ndarray:
    """(T, J, 3) in joint order with NaN rows → every joint at its nearest known position in time (earlier first), joints never
    known at their parent's position: USD joints always have a transform; `sapiens2:keypointValid` says which
    are measured."""
    out = positions.copy()
    count = out.shape[0]
    for j in range(out.shape[1]):
        known = np.flatnonzero(np.isfinite(out[:, j]).all(axis=1))
        if len(known) == 0 or len(known) == count:
            continue
        nearest = known[np.clip(np.searchsorted(known, np.arange(count), side="right") - 1, 0, None)]
        after = known[np.clip(np.searchsorted(known, np.arange(count)), None, len(known) - 1)]
        before_ok = nearest <= np.arange(count)
        take = np.where(before_ok, nearest, after)
        out[:, j] = out[take, j]
    parents = joint_tree().parents
    for j in range(out.shape[1]):  # joint order: a parent is filled before its children
        unknown = ~np.isfinite(out[:, j]).all(axis=1)
        if unknown.any():
            out[unknown, j] = 0.0 if parents[j] < 0 else out[unknown, parents[j]]
    return out
