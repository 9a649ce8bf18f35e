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


def bounding_box_input(name: str, tooltip: str) -> io.Input:
    """Optional ``BOUNDING_BOX`` socket (core RT-DETR / SDPose boxes); a typed socket where the host has one."""
    typed = getattr(io, "BoundingBox", None)
    if typed is not None:
        try:
            return typed.Input(name, optional=True, force_input=True, tooltip=tooltip)
        except TypeError:  # a host whose BoundingBox.Input has another signature
            pass
    return io.Custom(t.BOUNDING_BOX).Input(name, optional=True, tooltip=tooltip)


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
