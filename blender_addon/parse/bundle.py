"""Read capture bundle v1 (one frame = ``<name>.json`` + ``<name>.exr``; a sequence = ``<name>.sequence.json``).

The whole bundle is read and validated here, before any Blender data is created, so a bad file never leaves a
half-built import behind. The reader follows the contract in ``docs/formats.md``: it refuses a newer major
version and accepts newer minor versions.

Sequences: every frame names the run that wrote it (``run.id``, version 1.1); ``read_sequence`` refuses a sequence
whose frames name different runs, so a half re-run folder is never imported as one take.

Normals: version 1.1+ stores them in the OpenCV camera frame. Version 1.0 files hold the normal model's own
OpenGL-frame output (x right, y up, z toward the viewer) under the label "opencv"; ``load_layers`` converts
them (y and z negated) and the capture's ``notes`` say so, once per file or sequence, for the import report.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import BundleError, NotACaptureError
from .exr import read_exr_channels
from .layers import Layers
from .task_layers import TaskChannel, check_task_channels, parse_task_layers

FRAME_FORMAT = "sapiens2-capture"
SEQUENCE_FORMAT = "sapiens2-capture-sequence"
SUPPORTED_MAJOR = 1
CANONICAL_NORMALS_SINCE = (1, 1)  # older bundles hold the model's OpenGL-frame normals
LEGACY_NORMAL_CHANNELS = ("N.Y", "N.Z")  # negated to turn those into OpenCV-frame normals


@dataclass
class Camera:
    """Pinhole intrinsics in image pixels, corner-origin (pixel centres at i + 0.5)."""

    fx: float
    fy: float
    cx: float
    cy: float
    source: str = "default"


@dataclass
class Person:
    id: int
    bbox: tuple[float, float, float, float] | None
    keypoints: np.ndarray  # (K, 3) x, y, score in image pixels
    keypoints_3d: np.ndarray | None  # (K, 3) OpenCV camera frame metres, NaN where invalid
    track_id: int | None = None  # same person in every frame of a tracked sequence (``id`` is per frame)

    @property
    def identity(self) -> int:
        """Who this is across a sequence: the tracking id when the bundle has one, else the per-frame index."""
        return self.id if self.track_id is None else self.track_id


@dataclass
class Capture:
    """One parsed frame: metadata, people and the EXR layers that were present."""

    json_path: Path
    name: str
    width: int
    height: int
    camera: Camera
    people: list[Person]
    keypoint_names: list[str]
    skeleton: list[tuple[int, int]]
    seg_classes: list[dict[str, Any]]
    metadata: dict[str, Any]
    frame: int | None = None
    exr_path: Path | None = None
    layers: Layers = field(
        default_factory=Layers
    )  # "rgb", "P", "N", "albedo", "seg", "mask", "alpha", "matte", "A", "confidence"
    legacy_normals: bool = False  # a 1.0 bundle with normals: load_layers converts them to OpenCV
    notes: list[str] = field(default_factory=list)  # what the reader converted, for the import report
    # channels of tasks the add-on does not know, declared in the JSON's task_layers: mesh attributes by name
    task_channels: list[TaskChannel] = field(default_factory=list)


@dataclass
class Sequence:
    path: Path
    name: str
    fps: float
    frames: list[Capture]
    notes: list[str] = field(default_factory=list)  # one line for all frames (frames keep their own)


def _load_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise BundleError(f"File not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise BundleError(f"{path.name} is not UTF-8 text; choose the bundle's .json file.") from exc
    except json.JSONDecodeError as exc:
        raise BundleError(
            f"{path.name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
            "The file is damaged; re-export the capture bundle."
        ) from exc
    if not isinstance(data, dict):
        raise BundleError(
            f"{path.name}: expected a JSON object at the top level, found {type(data).__name__}."
        )
    return data


def legacy_normals_note(name: str, frames: int = 1) -> str:
    """The import report's line for converted 1.0 normals (``frames`` > 1: a sequence)."""
    what = (
        f"{frames} frames of capture bundle version 1.0 store"
        if frames > 1
        else "capture bundle version 1.0 stores"
    )
    return (
        f"{name}: {what} the normal model's OpenGL-frame output labelled 'opencv'; the normals were "
        "converted to the OpenCV frame (y and z negated). Re-export with Sapiens2 Studio to write version 1.1."
    )


def _version_tuple(version: str) -> tuple[int, int]:
    parts = [*version.split("."), "0"][:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return (SUPPORTED_MAJOR, 0)


def _has_legacy_normals(data: dict[str, Any], path: Path) -> bool:
    """True for a 1.0 bundle with a normal layer; refuses a 1.1+ bundle that declares another normal frame."""
    if "N" not in (data.get("layers") or []):
        return False
    if _version_tuple(str(data.get("version", ""))) < CANONICAL_NORMALS_SINCE:
        return True
    declared = (data.get("conventions") or {}).get("normals_frame", "opencv")
    if declared != "opencv":
        raise BundleError(
            f"{path.name}: normals_frame is {declared!r}; this add-on reads version 1.x normals in 'opencv'."
        )
    return False


def _check_version(data: dict[str, Any], path: Path, expected_format: str) -> None:
    fmt = data.get("format")
    if fmt != expected_format:
        raise BundleError(
            f"{path.name} is not a Sapiens2 capture (format is {fmt!r}, expected {expected_format!r})."
        )
    version = str(data.get("version", ""))
    try:
        major = int(version.split(".")[0])
    except ValueError as exc:
        raise BundleError(f"{path.name}: version {version!r} is not of the form 'MAJOR.MINOR'.") from exc
    if major > SUPPORTED_MAJOR:
        raise BundleError(
            f"{path.name} uses bundle version {version}, newer than this add-on supports "
            f"({SUPPORTED_MAJOR}.x). Update the Sapiens2 Capture add-on."
        )


def _number(value: Any, what: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BundleError(f"{path.name}: {what} must be a finite number, found {value!r}.")
    return float(value)


def _safe_sibling(path: Path, name: Any) -> Path:
    """The file ``name`` next to ``path``; bare file names only, so a bundle cannot point elsewhere."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name:
        raise BundleError(f"{path.name}: file name {name!r} must be a bare file name in the same folder.")
    return path.parent / name


def _parse_camera(data: dict[str, Any], width: int, height: int, path: Path) -> Camera:
    cam = data.get("camera")
    if cam is None:
        focal = max(width, height) * 1.2
        return Camera(focal, focal, width / 2.0, height / 2.0, "default")
    if not isinstance(cam, dict):
        raise BundleError(f"{path.name}: 'camera' must be an object with fx, fy, cx, cy.")
    values = {k: _number(cam.get(k), f"camera.{k}", path) for k in ("fx", "fy", "cx", "cy")}
    if values["fx"] <= 0 or values["fy"] <= 0:
        raise BundleError(
            f"{path.name}: camera focal lengths must be positive, found fx={values['fx']}, fy={values['fy']}."
        )
    return Camera(source=str(cam.get("source", "user")), **values)


def _parse_people(data: dict[str, Any], num_keypoints: int, path: Path) -> list[Person]:
    people = []
    for index, raw in enumerate(data.get("people") or []):
        if not isinstance(raw, dict):
            raise BundleError(f"{path.name}: people[{index}] must be an object.")
        try:
            kps = np.asarray(raw.get("keypoints", []), dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise BundleError(
                f"{path.name}: people[{index}].keypoints must be rows of [x, y, score]."
            ) from exc
        if kps.ndim != 2 or kps.shape[1] != 3 or (num_keypoints and kps.shape[0] != num_keypoints):
            raise BundleError(
                f"{path.name}: people[{index}].keypoints has shape {kps.shape}, expected ({num_keypoints}, 3)."
            )
        kps = kps.copy()
        # A keypoint without finite coordinates or score was not found: score 0 (hidden, re-filled in time).
        kps[~np.isfinite(kps).all(axis=1), 2] = 0.0
        kps3d = None
        if raw.get("keypoints_3d") is not None:
            rows = raw["keypoints_3d"]
            if len(rows) != kps.shape[0]:
                raise BundleError(
                    f"{path.name}: people[{index}].keypoints_3d has {len(rows)} rows, expected {kps.shape[0]}."
                )
            kps3d = np.full((len(rows), 3), np.nan, dtype=np.float32)
            for k, row in enumerate(rows):
                if row is not None:
                    try:
                        kps3d[k] = row
                    except (TypeError, ValueError) as exc:
                        raise BundleError(
                            f"{path.name}: people[{index}].keypoints_3d[{k}] must be [X, Y, Z] or null, "
                            f"found {row!r}."
                        ) from exc
        bbox = raw.get("bbox")
        track_id = raw.get("track_id")
        people.append(
            Person(
                id=int(raw.get("id", index)),
                bbox=tuple(float(v) for v in bbox) if bbox else None,
                keypoints=kps,
                keypoints_3d=kps3d,
                track_id=None if track_id is None else int(track_id),
            )
        )
    return people


def _parse_layers(channels: dict[str, np.ndarray], width: int, height: int, path: Path) -> Layers:
    for name, array in channels.items():
        if array.shape != (height, width):
            raise BundleError(
                f"{path.name}: EXR channel {name!r} is {array.shape[1]}x{array.shape[0]} but the JSON says "
                f"{width}x{height}. The EXR belongs to another capture."
            )
    return Layers(channels)


def read_capture(
    json_path: Path | str, *, read_pixels: bool = True, exr_backend: str | None = None
) -> Capture:
    """Parse and validate one frame; with ``read_pixels`` the EXR layers are loaded too."""
    path = Path(json_path)
    data = _load_json(path)
    _check_version(data, path, FRAME_FORMAT)
    image = data.get("image")
    if not isinstance(image, dict):
        raise BundleError(f"{path.name}: missing 'image' with width and height.")
    width, height = image.get("width"), image.get("height")
    if not isinstance(width, int) or not isinstance(height, int) or width <= 0 or height <= 0:
        raise BundleError(
            f"{path.name}: image width/height must be positive integers, found {width!r}x{height!r}."
        )
    names = data.get("keypoint_names") or []
    if not isinstance(names, list) or len({str(n) for n in names}) != len(names):
        raise BundleError(
            f"{path.name}: 'keypoint_names' must be a list of distinct names (they become bone names)."
        )
    too_long = next((str(n) for n in names if len(str(n).encode("utf-8")) > 63), None)
    if too_long is not None:
        raise BundleError(
            f"{path.name}: keypoint name {too_long!r} is longer than Blender's bone names allow (63 bytes)."
        )
    skeleton_raw = data.get("skeleton") or []
    try:
        skeleton = [(int(a), int(b)) for a, b in skeleton_raw]
    except (TypeError, ValueError) as exc:
        raise BundleError(f"{path.name}: 'skeleton' must be a list of [i, j] index pairs.") from exc
    if any(not (0 <= a < len(names) and 0 <= b < len(names)) for a, b in skeleton):
        raise BundleError(f"{path.name}: a skeleton link points outside the {len(names)} keypoint names.")
    people = _parse_people(data, len(names), path)
    if people and not names:
        raise BundleError(f"{path.name}: people are present but 'keypoint_names' is missing.")
    exr_name = data.get("exr")
    exr_path = _safe_sibling(path, exr_name) if exr_name else None
    if exr_path is not None and not exr_path.is_file():
        raise BundleError(
            f"{path.name}: its EXR {exr_name!r} is missing from {path.parent}. Keep the .exr next to the .json."
        )
    frame = data.get("frame")
    capture = Capture(
        json_path=path,
        name=str(data.get("name") or path.stem),
        width=width,
        height=height,
        camera=_parse_camera(data, width, height, path),
        people=people,
        keypoint_names=[str(n) for n in names],
        skeleton=skeleton,
        seg_classes=list(data.get("seg_classes") or []),
        metadata={
            k: data.get(k)
            for k in ("version", "models", "pointmap_scale", "conventions", "image", "layers", "run")
        },
        frame=int(frame) if isinstance(frame, int) else None,
        exr_path=exr_path,
        legacy_normals=_has_legacy_normals(data, path),
        task_channels=parse_task_layers(data, path),
    )
    if capture.legacy_normals:
        capture.notes.append(legacy_normals_note(path.name))
    if read_pixels:
        load_layers(capture, exr_backend)
    return capture


def load_layers(capture: Capture, exr_backend: str | None = None) -> Capture:
    """Read the capture's EXR into ``capture.layers`` (a no-op for a bundle without an EXR)."""
    if capture.exr_path is not None and not capture.layers:
        channels = read_exr_channels(capture.exr_path, exr_backend)
        if capture.legacy_normals:
            for name in LEGACY_NORMAL_CHANNELS:
                if name in channels:
                    channels[name] = -channels[name]
        check_task_channels(capture.task_channels, set(channels), capture.json_path)
        capture.layers = _parse_layers(channels, capture.width, capture.height, capture.json_path)
    return capture


def read_sequence(path: Path | str, *, read_pixels: bool = True, exr_backend: str | None = None) -> Sequence:
    """Parse a ``.sequence.json`` and every frame it lists, in order."""
    path = Path(path)
    data = _load_json(path)
    _check_version(data, path, SEQUENCE_FORMAT)
    entries = data.get("frames")
    if not isinstance(entries, list) or not entries:
        raise BundleError(f"{path.name}: 'frames' must be a non-empty list of {{frame, json}} entries.")
    fps = _number(data.get("fps", 24.0), "fps", path)
    if fps <= 0:
        raise BundleError(f"{path.name}: fps must be positive, found {fps}.")
    frames = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise BundleError(
                f"{path.name}: every entry of 'frames' must be an object with 'frame' and 'json'."
            )
        capture = read_capture(
            _safe_sibling(path, entry.get("json")), read_pixels=read_pixels, exr_backend=exr_backend
        )
        capture.frame = int(entry.get("frame", len(frames) + 1))
        if frames and len(capture.keypoint_names) != len(frames[0].keypoint_names):
            raise BundleError(
                f"{path.name}: frame {capture.frame} has {len(capture.keypoint_names)} keypoints but the first frame "
                f"has {len(frames[0].keypoint_names)}; a sequence must use one keypoint set."
            )
        frames.append(capture)
    _check_one_run(path, data, frames)
    name = path.name[: -len(".sequence.json")] if path.name.endswith(".sequence.json") else path.stem
    legacy = sum(1 for f in frames if f.legacy_normals)
    notes = [legacy_normals_note(path.name, legacy)] if legacy > 1 else [n for f in frames for n in f.notes]
    return Sequence(path=path, name=name, fps=fps, frames=frames, notes=notes)


def run_id(data: dict[str, Any] | None) -> str | None:
    """The run id a frame or index names (``run.id``); None for files written before runs were recorded (1.0)."""
    run = (data or {}).get("run")
    value = run.get("id") if isinstance(run, dict) else None
    return value if isinstance(value, str) and value else None


def _check_one_run(path: Path, index: dict[str, Any], frames: list[Capture]) -> None:
    """Refuse a sequence whose frames come from different runs (a re-run or an interrupted run mixed them).

    Frames and an index that name no run (version 1.0, older writers) are accepted, as long as none names one."""
    index_run = run_id(index)
    seen: dict[str | None, str] = {}
    for capture in frames:
        seen.setdefault(run_id(capture.metadata), capture.json_path.name)
    if index_run is not None:
        seen.setdefault(index_run, path.name)
    if len(seen) <= 1:
        return
    shown = "; ".join(
        f"{name} from {'an older writer (no run id)' if run is None else 'run ' + run}"
        for run, name in list(seen.items())[:3]
    )
    raise BundleError(
        f"{path.name}: the frames come from different runs ({shown}). The sequence was re-run or interrupted "
        "part-way and mixes results; run it again with Sapiens2 Studio (an interrupted run completes with "
        "--skip-existing) and import the new index."
    )


def read_any(
    path: Path | str, *, read_pixels: bool = True, exr_backend: str | None = None
) -> Capture | Sequence:
    """Read a frame or a sequence, chosen by the file's ``format`` field."""
    path = Path(path)
    data = _load_json(path)
    fmt = data.get("format")
    if fmt == SEQUENCE_FORMAT:
        return read_sequence(path, read_pixels=read_pixels, exr_backend=exr_backend)
    if fmt != FRAME_FORMAT:
        raise NotACaptureError(
            f"{path.name} is not a Sapiens2 capture (format is {fmt!r}). Pick the bundle's <name>.json or "
            "<name>.sequence.json, not the .keypoints.json / .openpose.json files written beside it."
        )
    return read_capture(path, read_pixels=read_pixels, exr_backend=exr_backend)
