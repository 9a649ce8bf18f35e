"""Capture bundle v1 (docs/formats.md): one frame = `<name>.exr` + `<name>.json`, sequences add an index.

Version 1.1 stores normals in the canonical OpenCV camera frame and may hold the cross-task `checks` and the
matting layer (`matte.R/G/B/A`; a file without it reads with no alpha). Version 1.0 files (written before the
normal models' frame was settled) hold the model's raw OpenGL-frame normals under the label "opencv"; the reader
converts them and says so once (`LegacyNormalsWarning`, `frame.notes`).

The bundle is the contract between the CLI/ComfyUI (writers) and Blender/Nuke (readers), so the writer is
strict about shapes and the reader reports exactly which file is wrong and why. Writes are atomic: both files go
to temporary names first and the JSON is renamed last, so an existing `<name>.json` always has its EXR.
"""

from __future__ import annotations

import json
import math
import os
import re
import unicodedata
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..data import keypoints308, seg29
from . import task_layers as _task_layers
from .arrays import BandedArray, all_finite, host_array, to_numpy, zero_where_invalid
from .compressions import DEFAULT_EXR_COMPRESSION, EXR_COMPRESSIONS
from .documents import MAJOR, check_version, load_json, remove_quietly
from .errors import BundleError
from .exr import COMPRESSIONS as EXR_CODE_NAMES
from .exr import ExrError, linear_to_srgb, read_exr, srgb_to_linear, write_exr, write_exr_bands

__all__ = [
    "EXR_COMPRESSIONS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "SEQUENCE_FORMAT_NAME",
    "BundleError",
    "CaptureFrame",
    "CapturePerson",
    "LegacyNormalsWarning",
    "canonical_points",
    "check_exr_compression",
    "default_camera",
    "dump_document",
    "frame_name",
    "metadata_tables",
    "point_channels",
    "read_bundle",
    "restage_bundle",
    "sanitize_name",
    "stage_bundle",
    "stored_points",
    "write_bundle",
]

FORMAT_NAME = "sapiens2-capture"
SEQUENCE_FORMAT_NAME = "sapiens2-capture-sequence"
FORMAT_VERSION = "1.1"
# Normals of bundles older than this hold the model's frame (OpenGL: x right, y up, z toward the viewer)
# under the label "opencv". Converting them to OpenCV negates y and z; this must equal
# `core.shading.conventions.frame_signs(MODEL_NORMAL_FRAME, CANONICAL_FRAME)` (formats stay numpy-only, so the
# signs are written out here; tests/test_normal_frame.py checks that they agree).
_CANONICAL_NORMALS_SINCE = (1, 1)
LEGACY_NORMAL_SIGNS = (1.0, -1.0, -1.0)
# Layer (the JSON's `layers`) → its EXR channels, as written since 1.1. Every channel but the image's R, G, B, A and
# the depth Z sits in a `layer.channel` layer, so OpenImageIO, Nuke and Blender list the layers by name; `Z` is the
# standard depth channel name (OpenImageIO's z_channel, Blender's Depth pass). P.A marks the pixels that have a
# point (1) or none (0; their P and Z are 0).
# The matte is one EXR layer `matte` (R, G, B, A) as compositors expect it: colour pre-multiplied by alpha in
# linear light. JSON layer "alpha" = its A alone; "matte" = the whole layer (the straight foreground is RGB / A).
_LAYER_ORDER = ("rgba", "depth", "P", "N", "albedo", "seg", "mask", "alpha", "matte")
_MATTE_EPS = 1.0 / 255.0  # = core.pipeline.postprocess.MATTE_EPS: at or below it the straight colour is 0
_LAYER_CHANNELS = {
    "rgba": ("R", "G", "B", "A"),
    "depth": ("Z",),
    "P": ("P.X", "P.Y", "P.Z", "P.A"),
    "N": ("N.X", "N.Y", "N.Z"),
    "albedo": ("albedo.R", "albedo.G", "albedo.B"),
    "seg": ("seg.id",),
    "mask": ("mask.A",),
    "alpha": ("matte.A",),
    "matte": ("matte.R", "matte.G", "matte.B", "matte.A"),
}
# Channels of a layer that a 1.0 file may lack, and the 1.0 names of renamed channels (read, never written).
_SINCE_1_1 = frozenset({"P.A"})
_CHANNELS_1_0 = {"seg.id": "seg", "mask.A": "mask"}
# The JSON names of the layers whose channels were renamed in 1.1. A new name means a 1.0 reader skips the layer
# it cannot find (and reads the rest of the file) instead of refusing the file; 1.0 files list "seg" / "mask".
_JSON_LAYER_NAMES = {"seg": "segmentation", "mask": "person_mask"}
_LAYER_FROM_JSON = {v: k for k, v in _JSON_LAYER_NAMES.items()}


@dataclass(frozen=True)
class ExrEncoding:
    """How a bundle's EXR stores its layers: a pixel type per layer (float16 → HALF, float32 → FLOAT) and the
    file's default compression (one per file: a single-part EXR compresses all its channels alike; writers take
    any of EXR_COMPRESSIONS)."""

    pixel_types: Mapping[str, type[np.floating]]
    compression: str


# The one place where the bundle's EXR encoding is chosen; measured per layer by benchmarks/bench_exr.py, what
# each layer keeps is in docs/formats.md. Readers take any pixel type, so files written before and after read
# the same way.
LAYER_ENCODING = ExrEncoding(
    pixel_types={
        "rgba": np.float16,  # 8-bit sRGB decoded to linear: half keeps all 256 levels apart (smallest step 3e-4)
        "depth": np.float32,  # metres, as P
        "P": np.float32,  # metres: half would step 2 mm at 2 m and 4 mm at 5 m, which terraces a mesh
        "N": np.float16,  # unit vectors: half's 2^-11 relative step is < 0.06° of direction
        "albedo": np.float16,  # as rgba
        "seg": np.float32,  # class ids: FLOAT, as id channels are read by compositors (exact in half too)
        "mask": np.float16,  # 0..1; P.A (0 or 1) likewise
        "alpha": np.float16,  # 0..1: 2^-11 relative step, far below an 8-bit matte's
        "matte": np.float16,  # pre-multiplied linear colour, as rgba
    },
    compression=DEFAULT_EXR_COMPRESSION,
)
_CONVENTIONS = {
    "camera_frame": "opencv",
    "normals_frame": "opencv",
    "units": "meters",
    "pixel_origin": "top-left corner",
    "color": "scene-linear (sRGB primaries)",
}


class LegacyNormalsWarning(UserWarning):
    """A version-1.0 bundle's normals were converted to the OpenCV frame while reading."""


def legacy_normals_note(name: str) -> str:
    """The one message a host shows when it converted a 1.0 bundle's normals (`name`: file or sequence)."""
    return (
        f"{name}: capture bundle version 1.0 stores the normal model's OpenGL-frame output labelled 'opencv'; "
        "its normals were converted to the OpenCV frame (y and z negated) while reading. Re-export it to write "
        f"version {FORMAT_VERSION}."
    )


@dataclass
class CapturePerson:
    """One person: bbox (x1, y1, x2, y2), keypoints (308, 3) = x, y, score in image pixels."""

    bbox: tuple[float, float, float, float]
    keypoints: np.ndarray
    bbox_source: str = "image"
    keypoints_3d: np.ndarray | None = None  # (308, 3) metric XYZ, NaN rows where invalid
    id: int = 0
    track_id: int | None = None  # same person across the frames of a sequence (when tracked)

    @classmethod
    def coerce(cls, person: Any, index: int) -> CapturePerson:
        """Accept a CapturePerson, a dict, or any object with bbox/keypoints attributes (e.g. PersonPose)."""
        if isinstance(person, CapturePerson):
            return person
        get = (
            person.get
            if isinstance(person, dict)
            else lambda key, default=None: getattr(person, key, default)
        )
        keypoints = get("keypoints")
        bbox = get("bbox")
        if keypoints is None or bbox is None:
            raise BundleError(f"person {index}: needs 'bbox' and 'keypoints'")
        kp3d = get("keypoints_3d")
        return cls(
            bbox=tuple(float(v) for v in to_numpy(bbox).reshape(-1)[:4]),
            keypoints=to_numpy(keypoints).astype(np.float32),
            bbox_source=str(get("bbox_source", "image") or "image"),
            keypoints_3d=None if kp3d is None else to_numpy(kp3d).astype(np.float32),
            id=index,
            track_id=None if get("track_id") is None else int(get("track_id")),
        )


@dataclass
class CaptureFrame:
    """Everything one bundle holds, in memory. Arrays are (H, W[, C]) with row 0 = top.

    `image` and `albedo` are sRGB-encoded 0..1 (float) or uint8; points are metric OpenCV-frame XYZ;
    normals are unit OpenCV-frame vectors (the canonical frame); seg holds class ids; mask is 0..1.
    `alpha` is the matting model's soft alpha (0..1) and `foreground` its straight (un-premultiplied) colour,
    sRGB-encoded like `image`; a foreground needs its alpha (the EXR stores them pre-multiplied, see above).
    `checks`: the cross-task geometry report (`core.studio.checks.GeometryReport` or its `to_dict()`), stored
    as the JSON's `checks` object when given. `notes`: what the reader did to bring an older file up to date.
    """

    width: int
    height: int
    image: np.ndarray | None = None
    points: np.ndarray | None = None
    normals: np.ndarray | None = None
    albedo: np.ndarray | None = None
    seg: np.ndarray | None = None
    mask: np.ndarray | None = None
    alpha: np.ndarray | None = None
    foreground: np.ndarray | None = None
    camera: dict[str, Any] | None = None
    people: list[Any] = field(default_factory=list)
    models: list[dict[str, Any]] = field(default_factory=list)
    pointmap_scale: float | None = None
    frame: int | None = None
    source_name: str | None = None
    checks: Any = None
    # `run`: the run record of the writer's transaction (JSON object `run`, docs/formats.md §2.2: run id, tasks,
    # files); readers use it to tell frames of different runs apart. None: not written (e.g. a version 1.0 file).
    run: dict[str, Any] | None = None
    name: str | None = None  # set by read_bundle
    version: str = FORMAT_VERSION  # set by read_bundle (the file's version, before any conversion)
    notes: list[str] = field(default_factory=list)  # set by read_bundle
    # Layers of tasks the bundle format does not name (plug-in tasks): layer -> channel -> (H, W) array, each
    # layer declared in `task_layers` (layer -> `task_layers.TaskLayer`; core/formats/task_layers.py).
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_layers: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------- helpers


@lru_cache(maxsize=1)
def metadata_tables() -> tuple[list[str], list[list[int]], list[dict[str, Any]]]:
    """(keypoint names, skeleton links, seg classes) as written into every bundle."""
    kp, seg = keypoints308(), seg29()
    return kp["keypoint_names"], [list(map(int, link)) for link in kp["skeleton_links"]], seg["classes"]


# Characters no output name holds: path separators, what Windows forbids in a name, control characters, and `#`
# and `%`, which image-sequence tools read as frame-number patterns (Nuke's `plate.####.exr`, printf's `%04d`).
_UNSAFE_NAME = re.compile(r'[/\\:*?"<>|#%\x00-\x1f\x7f]')
NAME_MAX_BYTES = (
    120  # UTF-8 bytes of a base name: `<name>_0001.foreground.png` and temporaries stay under 255
)


def sanitize_name(name: str) -> str:
    """Make a user-given name safe as a file base name while keeping it recognisable: Unicode NFC (so a name
    typed on macOS and on Linux is one name), only path-unsafe characters replaced by `_`, no directories, no
    traversal, no leading dot (a hidden file) and no trailing dot or space (Windows drops them). The same name
    always gives the same result, and `sanitize_name(sanitize_name(x)) == sanitize_name(x)`."""
    text = unicodedata.normalize("NFC", str(name)).replace("\\", "/").split("/")[-1]
    base = _UNSAFE_NAME.sub("_", text).lstrip(". ").rstrip(". ")
    if len(base.encode("utf-8")) > NAME_MAX_BYTES:
        base = base.encode("utf-8")[:NAME_MAX_BYTES].decode("utf-8", "ignore").rstrip(". ")
    if not base or set(base) <= {"_", ".", " "}:
        raise BundleError(
            f"bundle name {name!r} has no usable characters; use letters, digits, '_', '-' or '.'"
        )
    return base


def frame_name(name: str, number: int) -> str:
    """Base name of frame `number` (1-based) of sequence `name`: `<name>_0001`."""
    return f"{sanitize_name(name)}_{int(number):04d}"


def check_exr_compression(compression: str | None) -> str:
    """The compression a bundle's EXR is written with: `compression`, or the default when None."""
    if compression is None:
        return LAYER_ENCODING.compression
    if compression not in EXR_COMPRESSIONS:
        raise BundleError(
            f"unknown EXR compression {compression!r} for a capture bundle; choose one of {', '.join(EXR_COMPRESSIONS)}"
        )
    return compression


def _stored_compression(header: Mapping[str, Any]) -> str:
    """The bundle compression an EXR header (as `read_exr` returns it) names; the default for any other."""
    code = getattr(header.get("compression"), "name", None)
    names = {EXR_CODE_NAMES[name]: name for name in EXR_COMPRESSIONS}
    return names.get(code, LAYER_ENCODING.compression)


def default_camera(width: int, height: int) -> dict[str, Any]:
    """Camera used when no pointmap gives one: fx = fy = 1.2 * max(W, H), principal point at the centre."""
    focal = 1.2 * max(width, height)
    return {
        "model": "pinhole",
        "fx": focal,
        "fy": focal,
        "cx": width / 2,
        "cy": height / 2,
        "source": "default",
    }


def _f32(value: Any) -> float | None:
    """Float32-precision value as a short JSON float (None for NaN/inf)."""
    v = float(np.float32(value))
    return float(str(np.float32(v))) if math.isfinite(v) else None


def _rows(array: np.ndarray) -> list[Any]:
    return [None if row is None else [_f32(v) for v in row] for row in array]


def _check_shape(name: str, array: np.ndarray | None, height: int, width: int, channels: int | None) -> None:
    if array is None:
        return
    expected = (height, width) if channels is None else (height, width, channels)
    if array.shape != expected:
        raise BundleError(f"CaptureFrame.{name} has shape {array.shape}, expected {expected} (H, W[, C])")


def _as_srgb_float(name: str, array: np.ndarray) -> np.ndarray:
    arr = to_numpy(array)
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)
    if arr.ndim == 3 and arr.shape[2] == 4:
        arr = arr[..., :3]
    if arr.dtype == np.uint8:
        return arr.astype(np.float32) / 255.0
    if arr.dtype == np.uint16:
        return arr.astype(np.float32) / 65535.0
    if not np.issubdtype(arr.dtype, np.floating):
        raise BundleError(f"CaptureFrame.{name} must be uint8, uint16 or float 0..1, got {arr.dtype}")
    return np.nan_to_num(arr.astype(np.float32), nan=0.0, posinf=1.0, neginf=0.0)  # NaN would smear in comp


@lru_cache(maxsize=2)
def _srgb_u8_table(dtype: Any = np.float32) -> np.ndarray:
    """The linear value of each 8-bit sRGB level, computed exactly as `_as_linear`'s float path computes it, then
    cast to `dtype` (as `astype` would cast the float path's result)."""
    return srgb_to_linear(np.arange(256, dtype=np.float32) / 255.0).astype(dtype)


def _as_linear(name: str, array: np.ndarray, dtype: Any = np.float32) -> np.ndarray:
    """sRGB image → scene-linear (H, W, 3) in `dtype` (float32, or the EXR's float16). 8-bit colour goes through a
    256-entry table: the same values as the float path, one lookup per pixel instead of a power (the bundle
    writer's costliest numpy step)."""
    arr = to_numpy(array)
    if arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] in (3, 4):
        return _srgb_u8_table(np.dtype(dtype))[arr[..., :3]]
    return srgb_to_linear(_as_srgb_float(name, arr)).astype(dtype, copy=False)


def _sample_points(points: np.ndarray, keypoints: np.ndarray) -> np.ndarray:
    """Pointmap value at the pixel containing each keypoint; NaN rows where outside or invalid."""
    height, width = points.shape[:2]
    out = np.full((keypoints.shape[0], 3), np.nan, dtype=np.float32)
    xy = keypoints[:, :2]
    ok = np.isfinite(xy).all(axis=1)
    cols = np.floor(np.where(ok, xy[:, 0], -1)).astype(np.int64)
    rows = np.floor(np.where(ok, xy[:, 1], -1)).astype(np.int64)
    ok &= (cols >= 0) & (cols < width) & (rows >= 0) & (rows < height)
    values = points[rows[ok], cols[ok]].astype(np.float32)
    valid = np.isfinite(values).all(axis=1) & (values[:, 2] > 0)
    idx = np.flatnonzero(ok)[valid]
    out[idx] = values[valid]
    return out


# --------------------------------------------------------------------------------------------------- writing


def stored_points(points: Any) -> tuple[np.ndarray, np.ndarray]:
    """(points as the EXR stores them, valid): float32, non-finite points and points behind the camera (Z ≤ 0)
    replaced by 0, 0, 0; valid is (H, W, 1) bool. Applying it twice changes nothing."""
    pts = to_numpy(points).astype(np.float32, copy=False)  # read only: the masking makes the stored copy
    valid = all_finite(pts) & (pts[..., 2] > 0)  # behind the camera = invalid
    return zero_where_invalid(pts, valid), valid[..., None]


def canonical_points(points: Any, *, in_place: bool = False) -> np.ndarray:
    """`stored_points(points)[0]` without full-size temporaries (a 9000×6000 pointmap is 648 MB): computed in row
    bands, in place when `points` is a writable float32 array that owns its memory (built by the caller, e.g.
    `capture_frames` or `read_bundle`) or `in_place` says the caller gives its memory up (a model result the
    engine drops after capture), else into one new array."""
    if isinstance(points, BandedArray):  # stays banded: each band is stored as it is made
        return points.then(lambda band, rows: stored_points(band)[0])
    pts = to_numpy(points)
    own = (
        isinstance(pts, np.ndarray)
        and pts.dtype == np.float32
        and (pts.base is None or in_place)
        and pts.flags.writeable
    )
    if pts.ndim != 3 or pts.shape[2] != 3:
        raise BundleError(f"points must be (H, W, 3), got shape {pts.shape}")
    out = pts if own else np.empty(pts.shape, np.float32)
    step = 4 * EXR_BAND_ROWS
    for y in range(0, pts.shape[0], step):
        np.copyto(out[y : y + step], stored_points(pts[y : y + step])[0])
    return out


def point_channels(points: Any) -> dict[str, np.ndarray]:
    """The EXR channels of a pointmap: depth `Z`, `P.X/Y/Z` and the validity `P.A` (docs/formats.md §2.1)."""
    pts, valid = stored_points(points)
    pixel = LAYER_ENCODING.pixel_types
    # 0 where no point: "zero is infinitely far"
    channels = {"Z": pts[..., 2].astype(pixel["depth"], copy=False)}  # views: writers copy them once
    for i, axis in enumerate("XYZ"):
        channels[f"P.{axis}"] = pts[..., i].astype(pixel["P"], copy=False)
    flags = valid[..., 0]
    channels["P.A"] = _half_flags(flags) if pixel["mask"] == np.float16 else flags.astype(pixel["mask"])
    return channels


_HALF_ZERO_ONE = np.array([0x0000, 0x3C00], np.uint16)  # the bits of float16 0.0 and 1.0


def _half_flags(flags: np.ndarray) -> np.ndarray:
    """bool → float16 0/1 by table (numpy's bool → float16 cast goes one value at a time: 16 vs 4 ms per 1080p)."""
    return np.take(_HALF_ZERO_ONE, np.asarray(flags, dtype=bool).view(np.uint8)).view(np.float16)


# Rows per band of the EXR: a multiple of ZIP's 16-line chunk; a band's temporaries are a few MB even on a
# 9000-pixel-wide photo, so a frame's channels never exist at full size (docs/performance.md).
EXR_BAND_ROWS = 64

Band = dict[str, np.ndarray]


def _colour_input(name: str, array: Any, height: int, width: int) -> Any:
    arr = host_array(array)  # a BandedArray (a huge photo's albedo) is read band by band
    if (
        arr.shape[:2] != (height, width)
        or arr.ndim not in (2, 3)
        or (arr.ndim == 3 and arr.shape[2] not in (3, 4))
    ):
        raise BundleError(
            f"CaptureFrame.{name} has shape {arr.shape}, expected {(height, width, 3)} (H, W[, C])"
        )
    return arr


def _colour_band(name: str, arr: np.ndarray, rows: slice, prefix: str, dtype: Any) -> Band:
    """Linear colour channels of rows of an sRGB image, in the layer's pixel type. 8-bit colour: one table
    lookup per channel, on the table's bits (numpy's `take` of raw 16/32-bit words is faster than of floats)."""
    band = to_numpy(arr[rows])
    if band.dtype == np.uint8 and band.ndim == 3 and band.shape[2] in (3, 4):
        table = _srgb_u8_table(np.dtype(dtype))
        bits = table.view(f"u{table.itemsize}")
        return {f"{prefix}{ch}": np.take(bits, band[..., i]).view(table.dtype) for i, ch in enumerate("RGB")}
    linear = _as_linear(name, band, dtype)
    return {f"{prefix}{ch}": linear[..., i] for i, ch in enumerate("RGB")}


def _exr_plan(
    frame: CaptureFrame,
) -> tuple[list[tuple[str, np.dtype]], list[str], list[Callable[[slice], Band]]]:
    """(channel layout, layers, band makers) of the frame's EXR; `_exr_band(makers, rows)` computes the channels
    of a slice of rows, so the writer never needs the whole frame's channels at once. Every shape is checked here, before
    the file is opened."""
    h, w = frame.height, frame.width
    pixel = LAYER_ENCODING.pixel_types
    layout: list[tuple[str, np.dtype]] = []
    layers: list[str] = []
    makers: list[Callable[[slice], Band]] = []

    def add(
        names: Sequence[str], channels: Sequence[tuple[str, str]], maker: Callable[[slice], Band]
    ) -> None:
        """Layers `names` with their (channel, LAYER_ENCODING kind) list, made per band by `maker`."""
        layers.extend(names)
        layout.extend((channel, np.dtype(pixel[kind])) for channel, kind in channels)
        makers.append(maker)

    def opaque(rows: slice) -> np.ndarray:
        return np.ones((rows.stop - rows.start, w), np.float16)

    if frame.image is not None:
        image = _colour_input("image", frame.image, h, w)
        rgba = [(ch, "rgba") for ch in "RGBA"]
        add(
            ["rgba"],
            rgba,
            lambda rows: {**_colour_band("image", image, rows, "", pixel["rgba"]), "A": opaque(rows)},
        )
    if frame.points is not None:
        points = host_array(frame.points)
        _check_shape("points", points, h, w, 3)
        channels = [("Z", "depth"), ("P.X", "P"), ("P.Y", "P"), ("P.Z", "P"), ("P.A", "mask")]
        add(["depth", "P"], channels, lambda rows: point_channels(points[rows]))
    if frame.normals is not None:
        normals = host_array(frame.normals)
        _check_shape("normals", normals, h, w, 3)

        def normal_band(rows: slice) -> Band:
            # a normal with a NaN/inf component is stored as (0, 0, 0), no normal, as points are (an inf would
            # become a half-float infinity)
            nrm = np.asarray(normals[rows], dtype=np.float32)
            finite = all_finite(nrm)
            if not finite.all():
                nrm = zero_where_invalid(nrm, finite)
            return {f"N.{axis}": nrm[..., i] for i, axis in enumerate("XYZ")}

        add(["N"], [(f"N.{axis}", "N") for axis in "XYZ"], normal_band)
    if frame.albedo is not None:
        albedo = _colour_input("albedo", frame.albedo, h, w)
        channels = [(f"albedo.{ch}", "albedo") for ch in "RGB"]
        add(
            ["albedo"],
            channels,
            lambda rows: _colour_band("albedo", albedo, rows, "albedo.", pixel["albedo"]),
        )
    if frame.seg is not None:
        seg = to_numpy(frame.seg)
        _check_shape("seg", seg, h, w, None)
        add(["seg"], [("seg.id", "seg")], lambda rows: {"seg.id": seg[rows]})
    if frame.mask is not None:
        mask = to_numpy(frame.mask)
        _check_shape("mask", mask, h, w, None)
        add(["mask"], [("mask.A", "mask")], lambda rows: {"mask.A": _unit(mask[rows])})
    if frame.alpha is not None:
        _matte_plan(frame, add)
    elif frame.foreground is not None:
        raise BundleError("CaptureFrame.foreground needs its alpha (CaptureFrame.alpha)")
    for task_layout, task_maker in _task_layers.plan(frame):  # declared in the JSON's task_layers, not layers
        layout.extend(task_layout)
        makers.append(task_maker)
    if not layout:  # an EXR needs at least one channel; an opaque alpha keeps the file valid and tiny
        layout.append(("A", np.dtype(np.float16)))
        makers.append(lambda rows: {"A": opaque(rows)})

    return layout, layers, makers


def _exr_band(makers: list[Callable[[slice], Band]], rows: slice) -> Band:
    """The channels of one band of rows (`_exr_plan`)."""
    out: Band = {}
    for maker in makers:
        out.update(maker(rows))
    return out


def _unit(values: np.ndarray) -> np.ndarray:
    """0..1 float32, NaN → 0 (masks and mattes)."""
    return np.clip(np.nan_to_num(np.asarray(values, dtype=np.float32), nan=0.0), 0.0, 1.0)


def _matte_plan(frame: CaptureFrame, add: Callable[..., None]) -> None:
    """`matte.A` = alpha; with a foreground also `matte.R/G/B` = its linear colour × alpha (pre-multiplied)."""
    alpha = to_numpy(frame.alpha)
    _check_shape("alpha", alpha, frame.height, frame.width, None)
    if frame.foreground is None:
        add(["alpha"], [("matte.A", "alpha")], lambda rows: {"matte.A": _unit(alpha[rows])})
        return
    foreground = _colour_input("foreground", frame.foreground, frame.height, frame.width)

    def matte_band(rows: slice) -> Band:
        a = _unit(alpha[rows])
        colour = srgb_to_linear(np.clip(_as_srgb_float("foreground", foreground[rows]), 0.0, 1.0))
        band = {f"matte.{ch}": colour[..., i] * a for i, ch in enumerate("RGB")}
        band["matte.A"] = a
        return band

    channels = [("matte.A", "alpha")] + [(f"matte.{ch}", "matte") for ch in "RGB"]
    add(["alpha", "matte"], channels, matte_band)


def _straight_foreground(premultiplied: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """sRGB straight colour from the EXR's linear pre-multiplied matte: RGB / A where A > 1/255, else 0."""
    safe = np.where(alpha > _MATTE_EPS, alpha, 1.0)[..., None]
    straight = np.clip(premultiplied / safe, 0.0, 1.0)
    return np.where((alpha > _MATTE_EPS)[..., None], linear_to_srgb(straight), 0.0).astype(np.float32)


def _checks_json(checks: Any) -> dict[str, Any] | None:
    """The `checks` object: a mapping or anything with `to_dict()` (a GeometryReport), strict JSON."""
    if checks is None:
        return None
    data = checks.to_dict() if hasattr(checks, "to_dict") else checks
    if not isinstance(data, Mapping):
        raise BundleError(
            f"CaptureFrame.checks must be a mapping or have to_dict(), got {type(checks).__name__}"
        )
    try:
        return json.loads(json.dumps(dict(data), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise BundleError(f"CaptureFrame.checks is not JSON data ({exc})") from exc


def _frame_json(frame: CaptureFrame, name: str, people: list[CapturePerson], layers: list[str]) -> dict:
    names, skeleton, classes = metadata_tables()
    camera = dict(frame.camera) if frame.camera else default_camera(frame.width, frame.height)
    for key in ("fx", "fy", "cx", "cy"):
        if key not in camera:
            raise BundleError(f"CaptureFrame.camera is missing {key!r} (needs fx, fy, cx, cy)")
    camera_json = {"model": str(camera.get("model", "pinhole"))}
    camera_json.update({k: float(camera[k]) for k in ("fx", "fy", "cx", "cy")})
    if (
        not all(math.isfinite(camera_json[k]) for k in ("fx", "fy", "cx", "cy"))
        or min(camera_json["fx"], camera_json["fy"]) <= 0
    ):
        raise BundleError(f"CaptureFrame.camera needs finite fx, fy > 0, cx, cy; got {camera_json}")
    camera_json["source"] = str(camera.get("source", "user"))
    if camera.get("reason"):
        camera_json["reason"] = str(camera["reason"])
    people_json = []
    for person in people:
        entry: dict[str, Any] = {
            "id": person.id,
            "bbox": [_f32(v) for v in person.bbox],
            "bbox_source": person.bbox_source,
            "keypoints": _rows(person.keypoints),
        }
        if person.track_id is not None:
            entry["track_id"] = int(person.track_id)
        if person.keypoints_3d is not None:
            entry["keypoints_3d"] = [
                [_f32(v) for v in row] if np.isfinite(row).all() else None for row in person.keypoints_3d
            ]
        people_json.append(entry)
    source = Path(str(frame.source_name)).name if frame.source_name else None
    checks = _checks_json(frame.checks)
    doc = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": name,
        "exr": f"{name}.exr",
        "frame": None if frame.frame is None else int(frame.frame),
        "image": {"width": int(frame.width), "height": int(frame.height), "source": source},
        "camera": camera_json,
        "conventions": dict(_CONVENTIONS),
        "layers": [_JSON_LAYER_NAMES.get(layer, layer) for layer in layers],
        "models": [
            {
                "task": str(m.get("task")),
                "size": None if m.get("size") is None else str(m.get("size")),
                "checkpoint": None if not m.get("checkpoint") else Path(str(m["checkpoint"])).name,
                "sha256": m.get("sha256"),
                # the file is not the size its official name promises (checkpoints.loader.size_contradiction)
                **({"warning": str(m["warning"])} if m.get("warning") else {}),
                # who ran the forward pass, where it was not PyTorch (docs/deploy.md)
                **{k: str(m[k]) for k in ("runtime", "provider") if m.get(k)},
            }
            for m in frame.models
        ],
        "pointmap_scale": None if frame.pointmap_scale is None else _f32(frame.pointmap_scale),
        "people": people_json,
        "keypoint_names": names,
        "skeleton": skeleton,
        "seg_classes": classes,
    }
    if checks is not None:
        doc["checks"] = checks
    if frame.run is not None:
        doc["run"] = _strict_object("run", frame.run)
    declared = _task_layers.declarations(frame)
    if declared is not None:
        doc["task_layers"] = declared
    return doc


def _strict_object(field_name: str, value: Any) -> dict[str, Any]:
    """A mapping as strict JSON data (no NaN), or a BundleError naming the field."""
    if not isinstance(value, Mapping):
        raise BundleError(f"CaptureFrame.{field_name} must be a mapping, got {type(value).__name__}")
    try:
        return json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise BundleError(f"CaptureFrame.{field_name} is not JSON data ({exc})") from exc


def dump_document(doc: Mapping[str, Any]) -> str:
    """A bundle JSON document as text: compact, UTF-8, and never NaN (invalid JSON; writers store null instead)."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _prepare_people(frame: CaptureFrame) -> list[CapturePerson]:
    people = []
    points = None if frame.points is None else host_array(frame.points)  # sampled at the keypoints only
    for index, raw in enumerate(frame.people):
        person = CapturePerson.coerce(raw, index)
        person.id = index
        kp = person.keypoints
        if kp.ndim != 2 or kp.shape[1] != 3:
            raise BundleError(f"person {index}: keypoints must be (K, 3) = x, y, score, got {kp.shape}")
        person.keypoints_3d = None if points is None else _sample_points(points, kp)
        people.append(person)
    return people


def stage_bundle(
    exr_tmp: str | os.PathLike[str], name: str, frame: CaptureFrame, *, compression: str | None = None
) -> dict[str, Any]:
    """Write the frame's EXR to the temporary `exr_tmp` and return its JSON document, committing nothing.

    The hook for writers that commit a bundle together with other files (`core.studio.transaction` renames the
    EXR and the other files and writes the JSON last); `write_bundle` is this plus the JSON and the renames.
    `compression`: one of EXR_COMPRESSIONS (None: the default)."""
    compression = check_exr_compression(compression)
    if frame.width <= 0 or frame.height <= 0:
        raise BundleError(f"CaptureFrame size must be positive, got {frame.width}x{frame.height}")
    layout, layers, makers = _exr_plan(frame)
    people = _prepare_people(frame)
    doc = _frame_json(frame, sanitize_name(name), people, layers)
    rows = range(0, frame.height, EXR_BAND_ROWS)
    bands = (_exr_band(makers, slice(y, min(y + EXR_BAND_ROWS, frame.height))) for y in rows)
    write_exr_bands(
        exr_tmp,
        layout,
        frame.height,
        frame.width,
        bands,
        {"sapiens2Capture": FORMAT_VERSION},
        compression=compression,
    )
    return doc


def _layers_of(frame: CaptureFrame) -> list[str]:
    """The layers `_exr_channels` writes for `frame`, in its order."""
    held = {
        "rgba": frame.image,
        "depth": frame.points,
        "P": frame.points,
        "N": frame.normals,
        "albedo": frame.albedo,
        "seg": frame.seg,
        "mask": frame.mask,
        "alpha": frame.alpha,
        "matte": frame.foreground if frame.alpha is not None else None,
    }
    return [layer for layer in _LAYER_ORDER if held[layer] is not None]


def restage_bundle(
    exr_tmp: str | os.PathLike[str],
    source_exr: str | os.PathLike[str],
    name: str,
    frame: CaptureFrame,
    *,
    points_changed: bool,
) -> dict[str, Any]:
    """`stage_bundle` for a frame read back from its bundle and changed only in its people, camera, scale and
    (when `points_changed`) its points: the EXR's other channels are copied from `source_exr` exactly as stored
    (re-encoding half-float colour read back as sRGB could move a value by one step), the pointmap channels are
    encoded from `frame.points` as `stage_bundle` would. The source's compression is kept (a farm's chunks
    chose it; one the writer does not know becomes the default). Returns the JSON document."""
    channels, header = read_exr(source_exr)
    compression = _stored_compression(header)
    if points_changed and frame.points is not None:
        channels.update(point_channels(frame.points))
    order = [c for layer in _LAYER_ORDER for c in _LAYER_CHANNELS[layer] if c in channels]
    ordered = {c: channels[c] for c in [*order, *sorted(set(channels) - set(order))]}
    doc = _frame_json(frame, sanitize_name(name), _prepare_people(frame), _layers_of(frame))
    write_exr(exr_tmp, ordered, {"sapiens2Capture": FORMAT_VERSION}, compression=compression)
    return doc


def write_bundle(
    folder: str | os.PathLike[str], name: str, frame: CaptureFrame, *, compression: str | None = None
) -> Path:
    """Write `<folder>/<name>.exr` and `<name>.json` atomically (`compression`: one of EXR_COMPRESSIONS, None:
    the default); returns the JSON path."""
    compression = check_exr_compression(compression)
    if frame.width <= 0 or frame.height <= 0:
        raise BundleError(f"CaptureFrame size must be positive, got {frame.width}x{frame.height}")
    base = sanitize_name(name)
    out_dir = Path(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    exr_path, json_path = out_dir / f"{base}.exr", out_dir / f"{base}.json"
    token = uuid.uuid4().hex[:8]
    tmp_exr, tmp_json = out_dir / f".{base}.{token}.tmp.exr", out_dir / f".{base}.{token}.tmp.json"
    try:
        doc = stage_bundle(tmp_exr, base, frame, compression=compression)
        tmp_json.write_text(dump_document(doc), encoding="utf-8")
        remove_quietly(json_path)  # an old JSON must never describe the new EXR half-way
        os.replace(tmp_exr, exr_path)
        os.replace(tmp_json, json_path)
    except BaseException:
        remove_quietly(tmp_exr)
        remove_quietly(tmp_json)
        raise
    return json_path


# --------------------------------------------------------------------------------------------------- reading


def _stack(channels: dict[str, np.ndarray], names: Sequence[str]) -> np.ndarray:
    return np.stack([channels[n].astype(np.float32) for n in names], axis=-1)


def _layer_channels(channels: Mapping[str, np.ndarray], layer: str) -> tuple[list[str], list[str]]:
    """(the file's names for the channels of `layer`, the channels it lacks): 1.1 names, else 1.0 names; the
    channels added in 1.1 are not required."""
    found, missing = [], []
    for name in _LAYER_CHANNELS.get(layer, ()):
        old = _CHANNELS_1_0.get(name)
        if name in channels:
            found.append(name)
        elif old is not None and old in channels:
            found.append(old)
        elif name not in _SINCE_1_1:
            missing.append(name)
    return found, missing


def _parse_people(path: Path, raw_people: Any) -> list[CapturePerson]:
    if not isinstance(raw_people, list):
        raise BundleError(f"{path}: 'people' must be a list")
    people = []
    for index, raw in enumerate(raw_people):
        try:
            kp = np.asarray(raw["keypoints"], dtype=np.float32)
            bbox = tuple(float(v) for v in raw["bbox"])
            kp3d = raw.get("keypoints_3d")
            kp3d_arr = None
            if kp3d is not None:
                kp3d_arr = np.array([[np.nan] * 3 if r is None else r for r in kp3d], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{path}: person {index} is malformed ({exc})") from exc
        if kp.ndim != 2 or kp.shape[1] != 3 or len(bbox) != 4:
            raise BundleError(f"{path}: person {index} needs keypoints (K, 3) and a 4-value bbox")
        people.append(
            CapturePerson(
                bbox=bbox,  # type: ignore[arg-type]
                keypoints=kp,
                bbox_source=str(raw.get("bbox_source", "image")),
                keypoints_3d=kp3d_arr,
                id=int(raw.get("id", index)),
                track_id=None if raw.get("track_id") is None else int(raw["track_id"]),
            )
        )
    return people


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def _legacy_normals(path: Path, doc: dict[str, Any], version: str) -> bool:
    """True when the stored normals are the 1.0 legacy model frame; refuses a frame this reader cannot use."""
    if _version_tuple(version) < _CANONICAL_NORMALS_SINCE:
        return True
    declared = (doc.get("conventions") or {}).get("normals_frame", "opencv")
    if declared != "opencv":
        raise BundleError(
            f"{path}: normals_frame is {declared!r}; version {MAJOR}.x bundles store normals in 'opencv'"
        )
    return False


def read_bundle(json_path: str | os.PathLike[str], *, warn: bool = True) -> CaptureFrame:
    """Read one frame bundle; raises BundleError naming the file and the problem.

    Normals come back in the OpenCV frame whatever the file's version: a 1.0 file's are converted, noted in
    `frame.notes`, and (unless `warn` is False, e.g. for the later frames of a sequence) announced with a
    `LegacyNormalsWarning`."""
    path = Path(json_path)
    doc = load_json(path, "capture bundle JSON")
    version = check_version(path, doc, FORMAT_NAME)
    try:
        width, height = int(doc["image"]["width"]), int(doc["image"]["height"])
        exr_name = str(doc["exr"])
        layers = [_LAYER_FROM_JSON.get(str(x), str(x)) for x in doc.get("layers", [])]
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{path}: missing or malformed field ({exc})") from exc
    if Path(exr_name).name != exr_name or exr_name in ("", ".", ".."):
        raise BundleError(f"{path}: 'exr' must be a plain file name in the same folder, got {exr_name!r}")
    exr_path = path.parent / exr_name
    if not exr_path.is_file():
        raise BundleError(f"{path}: its EXR file {exr_path.name!r} is missing (expected at {exr_path})")
    try:
        channels, _ = read_exr(exr_path)
    except ExrError as exc:
        raise BundleError(str(exc)) from exc
    for name, arr in channels.items():
        if arr.shape != (height, width):
            raise BundleError(
                f"{exr_path}: channel {name!r} is {arr.shape[1]}x{arr.shape[0]}, JSON says {width}x{height}"
            )
    names = {layer: _layer_channels(channels, layer)[0] for layer in layers}
    for layer in layers:
        missing = _layer_channels(channels, layer)[1]
        if missing:
            raise BundleError(
                f"{exr_path}: layer {layer!r} is listed in the JSON but channels {missing} are missing"
            )
    frame = CaptureFrame(width=width, height=height, name=str(doc.get("name", path.stem)), version=version)
    if "rgba" in layers:
        frame.image = linear_to_srgb(_stack(channels, ("R", "G", "B")))
    if "P" in layers:
        frame.points = _stack(channels, names["P"][:3])
    if "N" in layers:
        frame.normals = _stack(channels, _LAYER_CHANNELS["N"])
        if _legacy_normals(path, doc, version):
            frame.normals *= np.asarray(LEGACY_NORMAL_SIGNS, dtype=np.float32)
            frame.notes.append(legacy_normals_note(path.name))
            if warn:
                warnings.warn(frame.notes[-1], LegacyNormalsWarning, stacklevel=2)
    if "albedo" in layers:
        frame.albedo = linear_to_srgb(_stack(channels, _LAYER_CHANNELS["albedo"]))
    if "seg" in layers:
        frame.seg = np.rint(channels[names["seg"][0]]).astype(np.int64)
    if "mask" in layers:
        frame.mask = channels[names["mask"][0]].astype(np.float32)
    if "alpha" in layers or "matte" in layers:
        frame.alpha = channels["matte.A"].astype(np.float32)
    if "matte" in layers:
        frame.foreground = _straight_foreground(_stack(channels, _LAYER_CHANNELS["matte"][:3]), frame.alpha)
    frame.camera = doc.get("camera")
    frame.people = _parse_people(path, doc.get("people", []))
    frame.models = list(doc.get("models", []))
    frame.pointmap_scale = doc.get("pointmap_scale")
    frame.frame = doc.get("frame")
    frame.source_name = (doc.get("image") or {}).get("source")
    checks = doc.get("checks")
    if checks is not None and not isinstance(checks, dict):
        raise BundleError(f"{path}: 'checks' must be a JSON object when present")
    frame.checks = checks
    run = doc.get("run")
    if run is not None and not isinstance(run, dict):
        raise BundleError(f"{path}: 'run' must be a JSON object when present")
    frame.run = run
    frame.extra, frame.task_layers = _task_layers.read(str(path), doc, channels)
    return frame
