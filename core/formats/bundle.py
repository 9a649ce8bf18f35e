"""Capture bundle v1 (docs/formats.md): one frame = `<name>.exr` + `<name>.json`, sequences add an index.

Version 1.1 stores normals in the canonical OpenCV camera frame and may hold the cross-task `checks` and the
matting layer (`matte.R/G/B/A`; a file without it reads with no alpha). Version 1.0 files (written before the
normal models' frame was settled) hold the model's raw OpenGL-frame normals under the label "opencv"; the reader
converts them and says so once (`LegacyNormalsWarning`, `frame.notes`).

The bundle is the contract between the CLI/ComfyUI (writers) and Blender/Nuke (readers), so the writer is
strict about shapes and the reader reports exactly which file is wrong and why. Writes are atomic: both files go
to temporary names first and the JSON is renamed last, so an existing `<name>.json` always has its EXR.

The format is split by concern: `bundle_spec` (names, version, layers, encoding), `bundle_frame` (the in-memory
frame), `bundle_pixels` (pixel encoding), `bundle_json` (the JSON document), `bundle_read` (the reader) and
`names` (file names); this module writes (plans a frame's EXR, stages and commits a bundle) and re-exports the
public names of the others, so `core.formats.bundle` stays the one import for users of the format.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..timing import stage
from . import bundle_pixels, bundle_spec
from . import task_layers as _task_layers
from .arrays import all_finite, host_array, to_numpy, zero_where_invalid
from .bundle_frame import CaptureFrame, CapturePerson, default_camera, metadata_tables
from .bundle_json import dump_document, frame_json, prepare_people
from .bundle_pixels import (
    EXR_BAND_ROWS,
    Band,
    as_srgb_float,
    canonical_points,
    check_shape,
    colour_band,
    colour_input,
    point_channels,
    stored_points,
    unit,
)
from .bundle_read import read_bundle
from .bundle_spec import (
    ALBEDO,
    ALPHA,
    BUNDLE_LAYERS,
    DEPTH,
    FORMAT_NAME,
    FORMAT_VERSION,
    LAYER_ENCODING,
    LEGACY_NORMAL_SIGNS,
    MASK,
    MATTE,
    NORMALS,
    POINTS,
    RGBA,
    SEGMENTATION,
    SEQUENCE_FORMAT_NAME,
    BundleLayer,
    ExrEncoding,
    LegacyNormalsWarning,
    layers_of,
    legacy_normals_note,
)
from .casting import HalfCast
from .compressions import EXR_COMPRESSIONS
from .documents import remove_quietly
from .errors import BundleError
from .exr import COMPRESSIONS as EXR_CODE_NAMES
from .exr import read_exr, srgb_to_linear, write_exr, write_exr_bands
from .names import frame_name, sanitize_name

__all__ = [
    "EXR_COMPRESSIONS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "LAYER_ENCODING",
    "LEGACY_NORMAL_SIGNS",
    "SEQUENCE_FORMAT_NAME",
    "BundleError",
    "CaptureFrame",
    "CapturePerson",
    "ExrEncoding",
    "LegacyNormalsWarning",
    "canonical_points",
    "check_exr_compression",
    "default_camera",
    "dump_document",
    "frame_name",
    "legacy_normals_note",
    "metadata_tables",
    "point_channels",
    "read_bundle",
    "restage_bundle",
    "sanitize_name",
    "stage_bundle",
    "stored_points",
    "write_bundle",
]
# What other modules and tests read under this module's older private names (re-exported, unused here).
_sample_points = bundle_pixels.sample_points  # the USD export's keypoint → 3D rule
_srgb_u8_table = bundle_pixels.srgb_u8_table
_as_linear = bundle_pixels.as_linear
_colour_band = colour_band
_CONVENTIONS = bundle_spec.CONVENTIONS
_LAYER_CHANNELS = bundle_spec.LAYER_CHANNELS


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


def _exr_plan(
    frame: CaptureFrame,
) -> tuple[list[tuple[str, np.dtype]], list[str], list[Callable[[slice], Band]]]:
    """(channel layout, layers, band makers) of the frame's EXR; `_exr_band(makers, rows)` computes the channels
    of a slice of rows, so the writer never needs the whole frame's channels at once. Every shape is checked here,
    before the file is opened."""
    h, w = frame.height, frame.width
    layout: list[tuple[str, np.dtype]] = []
    layers: list[str] = []
    makers: list[Callable[[slice], Band]] = []

    def add(
        names: Sequence[BundleLayer],
        channels: Sequence[tuple[str, BundleLayer]],
        maker: Callable[[slice], Band],
    ) -> None:
        """Layers `names` with their (channel, layer whose pixel type it takes) list, made per band by `maker`."""
        layers.extend(layer.name for layer in names)
        layout.extend((channel, np.dtype(layer.pixel_type)) for channel, layer in channels)
        makers.append(maker)

    def opaque(rows: slice) -> np.ndarray:
        return np.ones((rows.stop - rows.start, w), np.float16)

    if frame.image is not None:
        image = colour_input("image", frame.image, h, w)
        add(
            [RGBA],
            [(ch, RGBA) for ch in RGBA.channels],
            lambda rows: {**colour_band("image", image, rows, "", RGBA.pixel_type), "A": opaque(rows)},
        )
    if frame.points is not None:
        points = host_array(frame.points)
        check_shape("points", points, h, w, 3)
        # P.A (0 or 1) takes the mask's pixel type
        channels = [(DEPTH.channels[0], DEPTH), *((c, POINTS) for c in POINTS.channels[:3]), ("P.A", MASK)]
        add([DEPTH, POINTS], channels, lambda rows: point_channels(points[rows]))
    if frame.normals is not None:
        normals = host_array(frame.normals)
        check_shape("normals", normals, h, w, 3)

        def normal_band(rows: slice) -> Band:
            # a normal with a NaN/inf component is stored as (0, 0, 0), no normal, as points are (an inf would
            # become a half-float infinity)
            nrm = np.asarray(normals[rows], dtype=np.float32)
            finite = all_finite(nrm)
            if not finite.all():
                nrm = zero_where_invalid(nrm, finite)
            return {channel: nrm[..., i] for i, channel in enumerate(NORMALS.channels)}

        add([NORMALS], [(c, NORMALS) for c in NORMALS.channels], normal_band)
    if frame.albedo is not None:
        albedo = colour_input("albedo", frame.albedo, h, w)
        add(
            [ALBEDO],
            [(c, ALBEDO) for c in ALBEDO.channels],
            lambda rows: colour_band("albedo", albedo, rows, "albedo.", ALBEDO.pixel_type),
        )
    if frame.seg is not None:
        seg = to_numpy(frame.seg)
        check_shape("seg", seg, h, w, None)
        seg_id = SEGMENTATION.channels[0]
        add([SEGMENTATION], [(seg_id, SEGMENTATION)], lambda rows: {seg_id: seg[rows]})
    if frame.mask is not None:
        mask = to_numpy(frame.mask)
        check_shape("mask", mask, h, w, None)
        add([MASK], [(MASK.channels[0], MASK)], lambda rows: {MASK.channels[0]: unit(mask[rows])})
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
    with stage("bundle.channels"):
        for maker in makers:
            out.update(maker(rows))
    return out


def _matte_plan(frame: CaptureFrame, add: Callable[..., None]) -> None:
    """`matte.A` = alpha; with a foreground also `matte.R/G/B` = its linear colour × alpha (pre-multiplied)."""
    alpha = to_numpy(frame.alpha)
    check_shape("alpha", alpha, frame.height, frame.width, None)
    if frame.foreground is None:
        add([ALPHA], [("matte.A", ALPHA)], lambda rows: {"matte.A": unit(alpha[rows])})
        return
    foreground = colour_input("foreground", frame.foreground, frame.height, frame.width)

    def matte_band(rows: slice) -> Band:
        a = unit(alpha[rows])
        colour = srgb_to_linear(np.clip(as_srgb_float("foreground", foreground[rows]), 0.0, 1.0))
        band = {f"matte.{ch}": colour[..., i] * a for i, ch in enumerate("RGB")}
        band["matte.A"] = a
        return band

    channels = [("matte.A", ALPHA)] + [(f"matte.{ch}", MATTE) for ch in "RGB"]
    add([ALPHA, MATTE], channels, matte_band)


def stage_bundle(
    exr_tmp: str | os.PathLike[str],
    name: str,
    frame: CaptureFrame,
    *,
    compression: str | None = None,
    half: HalfCast | None = None,
) -> dict[str, Any]:
    """Write the frame's EXR to the temporary `exr_tmp` and return its JSON document, committing nothing.

    The hook for writers that commit a bundle together with other files (`core.studio.store.transaction` renames the
    EXR and the other files and writes the JSON last); `write_bundle` is this plus the JSON and the renames.
    `compression`: one of EXR_COMPRESSIONS (None: the default); `half`: the float16 converter the caller hands
    in (core/formats/casting.py; None: numpy's, to the same bits)."""
    compression = check_exr_compression(compression)
    if frame.width <= 0 or frame.height <= 0:
        raise BundleError(f"CaptureFrame size must be positive, got {frame.width}x{frame.height}")
    with stage("bundle.channels"):
        layout, layers, makers = _exr_plan(frame)
    people = prepare_people(frame)
    doc = frame_json(frame, sanitize_name(name), people, layers)
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
        half=half,
    )
    return doc


def restage_bundle(
    exr_tmp: str | os.PathLike[str],
    source_exr: str | os.PathLike[str],
    name: str,
    frame: CaptureFrame,
    *,
    points_changed: bool,
    half: HalfCast | None = None,
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
    order = [c for layer in BUNDLE_LAYERS for c in layer.channels if c in channels]
    ordered = {c: channels[c] for c in [*order, *sorted(set(channels) - set(order))]}
    doc = frame_json(frame, sanitize_name(name), prepare_people(frame), layers_of(frame))
    write_exr(exr_tmp, ordered, {"sapiens2Capture": FORMAT_VERSION}, compression=compression, half=half)
    return doc


def write_bundle(
    folder: str | os.PathLike[str],
    name: str,
    frame: CaptureFrame,
    *,
    compression: str | None = None,
    half: HalfCast | None = None,
) -> Path:
    """Write `<folder>/<name>.exr` and `<name>.json` atomically (`compression`: one of EXR_COMPRESSIONS, None:
    the default; `half`: as for `stage_bundle`); returns the JSON path."""
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
        doc = stage_bundle(tmp_exr, base, frame, compression=compression, half=half)
        tmp_json.write_text(dump_document(doc), encoding="utf-8")
        remove_quietly(json_path)  # an old JSON must never describe the new EXR half-way
        os.replace(tmp_exr, exr_path)
        os.replace(tmp_json, json_path)
    except BaseException:
        remove_quietly(tmp_exr)
        remove_quietly(tmp_json)
        raise
    return json_path
