"""The bundle's layers of tasks a reader may not know (plug-in tasks, docs/tasks.md; docs/formats.md §2.1).

A task outside the project stores its per-pixel output in `CaptureFrame.extra[layer][channel]` and declares the
layer in `CaptureFrame.task_layers[layer]` (a `TaskLayer`). The writer stores every channel as the EXR channel
`<layer>.<channel>` in the declared pixel type and lists the declaration in the JSON's `task_layers` object, never
in `layers`: a reader that does not know the task finds nothing it must read (older readers ignore the unknown
EXR channels and the unknown JSON field), and one that does, `read_bundle`, puts them back into `frame.extra`.

Why a declaration rather than a naming rule: a reader (Blender, Nuke, a user's script) needs to know what a
channel holds without the task's code: its meaning (`class_id` values are integers, e.g. garment classes, with
their `classes` table; anything else is a float value) and its pixel type. Numpy only, like all of formats.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .arrays import host_array, to_numpy
from .errors import BundleError

__all__ = ["PIXEL_TYPES", "RESERVED_LAYERS", "TaskLayer", "declarations", "plan", "read"]

# Pixel type names of the JSON (the EXR's own names, lower case) -> numpy types.
PIXEL_TYPES: dict[str, type[np.floating]] = {"half": np.float16, "float": np.float32}
# EXR layer prefixes the bundle itself uses (docs/formats.md §2.1): a task layer never takes one of them.
RESERVED_LAYERS = frozenset({"P", "N", "albedo", "seg", "mask", "matte", "R", "G", "B", "A", "Z", "depth"})
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
# Meanings a reader acts on; any other string is allowed and read as a float value.
CLASS_ID = "class_id"


@dataclass(frozen=True)
class TaskLayer:
    """What one task layer holds: the `task` that wrote it, its `channels` (names after the dot), `pixel_type`
    ("half" or "float"), `meaning` ("class_id": integer ids stored exactly as floats, listed in `classes`;
    otherwise a float value such as "probability" or "value"), and a one-line `description` for people."""

    task: str
    channels: tuple[str, ...]
    pixel_type: str = "float"
    meaning: str = "value"
    classes: tuple[Mapping[str, Any], ...] | None = None
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        """The JSON object of `task_layers[<layer>]`."""
        doc: dict[str, Any] = {
            "task": self.task,
            "channels": list(self.channels),
            "pixel_type": self.pixel_type,
            "meaning": self.meaning,
        }
        if self.classes is not None:
            doc["classes"] = [dict(c) for c in self.classes]
        if self.description:
            doc["description"] = self.description
        return doc

    @classmethod
    def from_json(cls, where: str, layer: str, raw: Any) -> TaskLayer:
        """Parse `task_layers[<layer>]`; a malformed entry is a BundleError naming it."""
        if not isinstance(raw, Mapping):
            raise BundleError(f"{where}: task_layers[{layer!r}] must be a JSON object")
        try:
            channels = tuple(str(c) for c in raw["channels"])
            classes = raw.get("classes")
            spec = cls(
                task=str(raw.get("task", layer)),
                channels=channels,
                pixel_type=str(raw.get("pixel_type", "float")),
                meaning=str(raw.get("meaning", "value")),
                classes=None if classes is None else tuple(dict(c) for c in classes),
                description=str(raw.get("description", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BundleError(f"{where}: task_layers[{layer!r}] is malformed ({exc})") from exc
        return spec.checked(where, layer)

    def checked(self, where: str, layer: str) -> TaskLayer:
        """This declaration, or a BundleError naming what a reader could not use."""
        if not _NAME.match(layer) or layer in RESERVED_LAYERS:
            reserved = ", ".join(sorted(RESERVED_LAYERS))
            raise BundleError(
                f"{where}: task layer name {layer!r} must be a letter then letters, digits or '_' (at most 63) "
                f"and none of the bundle's own layers ({reserved})"
            )
        if not self.channels or len(set(self.channels)) != len(self.channels):
            raise BundleError(
                f"{where}: task layer {layer!r} needs distinct channel names, got {self.channels}"
            )
        bad = [c for c in self.channels if not _NAME.match(c)]
        if bad:
            raise BundleError(f"{where}: task layer {layer!r} has channel names {bad} (letters, digits, '_')")
        if self.pixel_type not in PIXEL_TYPES:
            raise BundleError(
                f"{where}: task layer {layer!r} has pixel_type {self.pixel_type!r}; "
                f"choose one of {', '.join(PIXEL_TYPES)}"
            )
        return self


def _declared(frame: Any) -> dict[str, TaskLayer]:
    """The frame's task layer declarations (TaskLayer or its JSON form), checked against `frame.extra`."""
    specs: dict[str, TaskLayer] = {}
    declared = frame.task_layers or {}
    for layer in frame.extra:
        raw = declared.get(layer)
        if raw is None:
            raise BundleError(
                f"CaptureFrame.extra[{layer!r}] has no declaration in CaptureFrame.task_layers; a task's "
                "layers are declared (TaskLayer) so that readers which do not know the task can skip them"
            )
        spec = raw if isinstance(raw, TaskLayer) else TaskLayer.from_json("CaptureFrame", layer, raw)
        specs[layer] = spec.checked("CaptureFrame", layer)
        held = set(frame.extra[layer])
        if held != set(spec.channels):
            raise BundleError(
                f"CaptureFrame.extra[{layer!r}] holds channels {sorted(held)}, its declaration lists "
                f"{list(spec.channels)}"
            )
    return specs


def plan(frame: Any) -> list[tuple[list[tuple[str, np.dtype]], Callable[[slice], dict[str, np.ndarray]]]]:
    """(EXR channel layout, band maker) per task layer of the frame, shapes checked before the file opens.
    Values are stored finite: NaN and infinities become 0 (compositors spread them), class ids are rounded."""
    out = []
    for layer, spec in _declared(frame).items():
        dtype = np.dtype(PIXEL_TYPES[spec.pixel_type])
        arrays = {}
        for channel in spec.channels:
            arr = host_array(frame.extra[layer][channel])
            if tuple(arr.shape) != (frame.height, frame.width):
                raise BundleError(
                    f"CaptureFrame.extra[{layer!r}][{channel!r}] has shape {tuple(arr.shape)}, expected "
                    f"{(frame.height, frame.width)} (H, W)"
                )
            arrays[f"{layer}.{channel}"] = arr
        layout = [(name, dtype) for name in arrays]

        def band(
            rows: slice, arrays: dict[str, Any] = arrays, ids: bool = spec.meaning == CLASS_ID
        ) -> dict[str, np.ndarray]:
            values = {name: np.asarray(to_numpy(arr[rows]), dtype=np.float32) for name, arr in arrays.items()}
            return {
                name: np.rint(np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0))
                if ids
                else np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
                for name, v in values.items()
            }

        out.append((layout, band))
    return out


def declarations(frame: Any) -> dict[str, Any] | None:
    """The JSON's `task_layers` object for the frame (None: the frame has no task layers, the field is absent)."""
    if not frame.extra:
        return None
    return {layer: spec.to_json() for layer, spec in _declared(frame).items()}


def read(
    where: str, doc: Mapping[str, Any], channels: Mapping[str, np.ndarray]
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, TaskLayer]]:
    """(`extra`, `task_layers`) of a bundle read back: every declared layer's channels as float32 (H, W) arrays,
    class ids as int64. A declared layer whose channels are missing from the EXR is a BundleError."""
    raw = doc.get("task_layers")
    if raw is None:
        return {}, {}
    if not isinstance(raw, Mapping):
        raise BundleError(f"{where}: 'task_layers' must be a JSON object when present")
    extra: dict[str, dict[str, np.ndarray]] = {}
    specs: dict[str, TaskLayer] = {}
    for layer, entry in raw.items():
        spec = TaskLayer.from_json(where, str(layer), entry)
        names = [f"{layer}.{c}" for c in spec.channels]
        missing = [n for n in names if n not in channels]
        if missing:
            raise BundleError(f"{where}: task layer {layer!r} is declared but channels {missing} are missing")
        values = {c: channels[n].astype(np.float32) for c, n in zip(spec.channels, names, strict=True)}
        if spec.meaning == CLASS_ID:
            values = {c: np.rint(v).astype(np.int64) for c, v in values.items()}
        extra[str(layer)], specs[str(layer)] = values, spec
    return extra, specs
