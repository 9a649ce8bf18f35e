"""What one capture bundle holds, in memory: `CaptureFrame` and its `CapturePerson`s, with the defaults a writer
fills in (the camera when no pointmap gives one, the keypoint and class tables every bundle carries).

Kept apart from the writer and reader so the many modules that only build or read frames need neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ..data import keypoints308, seg29
from .arrays import to_numpy
from .bundle_spec import FORMAT_VERSION
from .errors import BundleError


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
    `checks`: the cross-task geometry report (`core.studio.compute.geometry_checks.GeometryReport` or its `to_dict()`), stored
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


@lru_cache(maxsize=1)
def metadata_tables() -> tuple[list[str], list[list[int]], list[dict[str, Any]]]:
    """(keypoint names, skeleton links, seg classes) as written into every bundle."""
    kp, seg = keypoints308(), seg29()
    return kp["keypoint_names"], [list(map(int, link)) for link in kp["skeleton_links"]], seg["classes"]


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
