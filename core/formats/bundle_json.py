"""The bundle's JSON document: built from a frame (camera, people with their 3D keypoints, models, checks, run,
task layers) and its people parsed back; numbers at float32 precision as short JSON floats, never NaN.

Kept apart from the EXR writer: the JSON is what readers in other hosts parse first (docs/formats.md §2.2), and
`restage_bundle` rebuilds it without touching most pixels.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from . import task_layers
from .arrays import host_array
from .bundle_frame import CaptureFrame, CapturePerson, default_camera, metadata_tables
from .bundle_pixels import sample_points
from .bundle_spec import CONVENTIONS, FORMAT_NAME, FORMAT_VERSION, JSON_LAYER_NAMES
from .errors import BundleError


def _f32(value: Any) -> float | None:
    """Float32-precision value as a short JSON float (None for NaN/inf)."""
    v = float(np.float32(value))
    return float(str(np.float32(v))) if math.isfinite(v) else None


def _rows(array: np.ndarray) -> list[Any]:
    return [None if row is None else [_f32(v) for v in row] for row in array]


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


def frame_json(frame: CaptureFrame, name: str, people: list[CapturePerson], layers: list[str]) -> dict:
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
        "conventions": dict(CONVENTIONS),
        "layers": [JSON_LAYER_NAMES.get(layer, layer) for layer in layers],
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
    declared = task_layers.declarations(frame)
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


def prepare_people(frame: CaptureFrame) -> list[CapturePerson]:
    people = []
    points = None if frame.points is None else host_array(frame.points)  # sampled at the keypoints only
    for index, raw in enumerate(frame.people):
        person = CapturePerson.coerce(raw, index)
        person.id = index
        kp = person.keypoints
        if kp.ndim != 2 or kp.shape[1] != 3:
            raise BundleError(f"person {index}: keypoints must be (K, 3) = x, y, score, got {kp.shape}")
        person.keypoints_3d = None if points is None else sample_points(points, kp)
        people.append(person)
    return people


def parse_people(path: Path, raw_people: Any) -> list[CapturePerson]:
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
