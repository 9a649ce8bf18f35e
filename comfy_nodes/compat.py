"""Feature detection over ComfyUI's V3 API, so the pack loads on 0.3.64 and on newer hosts.

Type strings are the contract (``BOUNDING_BOX``, ``FILE_3D``...), so where an older host lacks a typed class we
fall back to ``io.Custom(<same string>)``: workflows stay compatible either way.  Schema fields that only newer
hosts know (``search_aliases``) are dropped rather than breaking the node.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from comfy_api.latest import io

from . import types as t

log = logging.getLogger("sapiens2")

Sapiens2Model = io.Custom(t.MODEL)
PoseData = io.Custom(t.POSE)
SegData = io.Custom(t.SEG)
NormalData = io.Custom(t.NORMAL)
PointmapData = io.Custom(t.POINTMAP)
MattingData = io.Custom(t.MATTING)
Lights = io.Custom(t.LIGHTS)
PoseKeypoint = io.Custom(t.POSE_KEYPOINT)
TaskResults = io.Custom(t.TASK_RESULTS)

CATEGORY = "Sapiens2"
_SCHEMA_FIELDS = (
    {f.name for f in dataclasses.fields(io.Schema)} if dataclasses.is_dataclass(io.Schema) else set()
)


def schema(**kwargs: Any) -> io.Schema:
    """``io.Schema`` without the fields this host does not know (logged once per node at debug level)."""
    if _SCHEMA_FIELDS:
        unknown = [k for k in kwargs if k not in _SCHEMA_FIELDS]
        for key in unknown:
            log.debug("Sapiens2: this ComfyUI has no Schema.%s; %s loses it", key, kwargs.get("node_id"))
            kwargs.pop(key)
    kwargs.setdefault("category", CATEGORY)
    return io.Schema(**kwargs)


BOUNDING_BOXES = "BOUNDING_BOXES"  # newer cores: a list of boxes with metadata (io.BoundingBoxes)


def bounding_box_types() -> str:
    """The socket's type string: ``BOUNDING_BOX``, plus ``BOUNDING_BOXES`` where this host has that type.

    ComfyUI matches comma-separated types by overlap (backend and frontend alike), so one socket takes either;
    ``boxes.boxes_per_image`` reads both values (a per-frame list, or one flat list of box dicts)."""
    return f"{t.BOUNDING_BOX},{BOUNDING_BOXES}" if hasattr(io, "BoundingBoxes") else t.BOUNDING_BOX


def bounding_box_input(name: str, tooltip: str) -> io.Input:
    """Optional person-box socket (core RT-DETR / SDPose ``BOUNDING_BOX``, ``BOUNDING_BOXES`` where it exists).

    Declared the same way on every host, always with ``forceInput``: frontends from 1.3x on have a BoundingBox
    *widget*, and on a backend without a typed BoundingBox (0.3.64) they drew the socket as that widget, which
    shifted every saved widget value and sent the widget's string to the node ("must be a BOUNDING_BOX value,
    got str"). A forced input stays a socket with every backend/frontend pair."""
    return io.Custom(bounding_box_types()).Input(
        name, optional=True, tooltip=tooltip, extra_dict={"forceInput": True}
    )


def file3d_output_type() -> Any | None:
    """ComfyUI's generic 3D-file socket type (``FILE_3D``) where the host has it, else None."""
    return getattr(io, "File3DAny", None)


def make_file3d(path: str, fmt: str) -> Any | None:
    """A host ``File3D`` value for a written file, or None where the host has no such type or builds it
    differently (the file is saved either way; only the typed 3D output is lost, with a warning)."""
    try:
        from comfy_api.latest import Types
    except ImportError:
        return None
    cls = getattr(Types, "File3D", None)
    if cls is None:
        return None
    import io as _io

    with open(path, "rb") as handle:
        data = _io.BytesIO(handle.read())
    try:
        return cls(data, fmt)  # every known File3D constructor takes (source, format) positionally
    except Exception as exc:  # a host whose File3D has another signature must not fail every export
        log.warning(
            "Sapiens2: this ComfyUI's File3D type cannot be built (%s: %s); 'model_3d' is empty, use "
            "'mesh_path' with Preview 3D",
            type(exc).__name__,
            exc,
        )
        return None


# ComfyUI's core video type (LoadVideo, CreateVideo, GetVideoComponents), where the host has it
VIDEO = "VIDEO"


def image_types() -> str:
    """The type string of a frames socket: ``IMAGE``, plus ``VIDEO`` where this host has core video (a
    comma-separated type matches either, in the backend and the frontend, like the box sockets)."""
    return f"IMAGE,{VIDEO}" if hasattr(io, "Video") else "IMAGE"


def frames_input(name: str, tooltip: str) -> io.Input:
    """A required socket taking an IMAGE batch, or a VIDEO where the host has one (its frames and rate)."""
    if not hasattr(io, "Video"):
        return io.Image.Input(name, tooltip=tooltip)
    return io.Custom(image_types()).Input(name, tooltip=tooltip + " A VIDEO gives its frames and frame rate.")


def frames_of(value: Any) -> tuple[Any, float | None]:
    """(IMAGE batch, frame rate or None) of a frames socket's value: an IMAGE tensor as it is, a VIDEO as
    ``GetVideoComponents`` gives it (``get_components()``: images and frame_rate, a Fraction)."""
    if hasattr(value, "shape"):
        return value, None
    components = getattr(value, "get_components", None)
    if components is None:
        from ..core.studio.errors import StudioError

        raise StudioError(f"expected an IMAGE batch or a VIDEO, got {type(value).__name__}")
    parts = components()
    rate = getattr(parts, "frame_rate", None)
    return parts.images, (float(rate) if rate is not None and float(rate) > 0 else None)
