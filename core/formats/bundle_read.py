"""Reading one frame bundle back into a `CaptureFrame`: every built-in layer the JSON lists (1.0 and 1.1 channel
names), a 1.0 file's normals converted to the OpenCV frame, and the declared task layers of plug-in tasks.

The reader reports exactly which file is wrong and why (a `BundleError` naming it): the bundle is the contract
between the writers and Blender/Nuke/a user's script.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from . import task_layers
from .bundle_frame import CaptureFrame
from .bundle_json import parse_people
from .bundle_pixels import stack, straight_foreground
from .bundle_spec import (
    ALBEDO,
    ALPHA,
    CANONICAL_NORMALS_SINCE,
    FORMAT_NAME,
    LAYER_FROM_JSON,
    LEGACY_NORMAL_SIGNS,
    MASK,
    MATTE,
    NORMALS,
    POINTS,
    RGBA,
    SEGMENTATION,
    LegacyNormalsWarning,
    layer_channels,
    legacy_normals_note,
)
from .documents import MAJOR, check_version, load_json
from .errors import BundleError
from .exr import ExrError, linear_to_srgb, read_exr


def _version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def _legacy_normals(path: Path, doc: dict[str, Any], version: str) -> bool:
    """True when the stored normals are the 1.0 legacy model frame; refuses a frame this reader cannot use."""
    if _version_tuple(version) < CANONICAL_NORMALS_SINCE:
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
        layers = [LAYER_FROM_JSON.get(str(x), str(x)) for x in doc.get("layers", [])]
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
    names = {layer: layer_channels(channels, layer)[0] for layer in layers}
    for layer in layers:
        missing = layer_channels(channels, layer)[1]
        if missing:
            raise BundleError(
                f"{exr_path}: layer {layer!r} is listed in the JSON but channels {missing} are missing"
            )
    frame = CaptureFrame(width=width, height=height, name=str(doc.get("name", path.stem)), version=version)
    if RGBA.name in layers:
        frame.image = linear_to_srgb(stack(channels, RGBA.channels[:3]))
    if POINTS.name in layers:
        frame.points = stack(channels, names[POINTS.name][:3])
    if NORMALS.name in layers:
        frame.normals = stack(channels, NORMALS.channels)
        if _legacy_normals(path, doc, version):
            frame.normals *= np.asarray(LEGACY_NORMAL_SIGNS, dtype=np.float32)
            frame.notes.append(legacy_normals_note(path.name))
            if warn:
                warnings.warn(frame.notes[-1], LegacyNormalsWarning, stacklevel=2)
    if ALBEDO.name in layers:
        frame.albedo = linear_to_srgb(stack(channels, ALBEDO.channels))
    if SEGMENTATION.name in layers:
        frame.seg = np.rint(channels[names[SEGMENTATION.name][0]]).astype(np.int64)
    if MASK.name in layers:
        frame.mask = channels[names[MASK.name][0]].astype(np.float32)
    if ALPHA.name in layers or MATTE.name in layers:
        frame.alpha = channels[ALPHA.channels[0]].astype(np.float32)
    if MATTE.name in layers:
        frame.foreground = straight_foreground(stack(channels, MATTE.channels[:3]), frame.alpha)
    frame.camera = doc.get("camera")
    frame.people = parse_people(path, doc.get("people", []))
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
    frame.extra, frame.task_layers = task_layers.read(str(path), doc, channels)
    return frame
