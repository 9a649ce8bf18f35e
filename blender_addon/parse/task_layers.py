"""The bundle's task layers: per-pixel outputs of tasks the add-on does not know (plug-in tasks).

A bundle declares them in its JSON's ``task_layers`` (docs/formats.md §2.1/§2.2) and stores each channel as the EXR
channel ``<layer>.<channel>``. The importer does not need the task's code to use them: every declared channel
becomes a mesh attribute of the same name, INT for ``class_id`` layers (with the class names kept beside it) and
FLOAT otherwise. Parsed and validated here, before any Blender data is made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BundleError

CLASS_ID = "class_id"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
_ATTRIBUTE_BYTES = 63  # Blender's attribute names hold at most 63 bytes (MAX_CUSTOMDATA_LAYER_NAME - 1)


@dataclass(frozen=True)
class TaskChannel:
    """One declared channel: its EXR channel (= the mesh attribute's name), the task that wrote it, whether it
    holds class ids, and the class names by id (class-id layers that list them)."""

    name: str
    task: str
    integer: bool
    classes: dict[int, str] = field(default_factory=dict)


def parse_task_layers(data: dict[str, Any], path: Path) -> list[TaskChannel]:
    """The declared channels of ``task_layers`` in order; a malformed declaration is a BundleError naming it."""
    raw = data.get("task_layers")
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise BundleError(f"{path.name}: 'task_layers' must be an object of declared task layers.")
    out = []
    for layer, entry in raw.items():
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("channels"), list)
            or not entry["channels"]
        ):
            raise BundleError(f"{path.name}: task_layers[{layer!r}] needs a non-empty 'channels' list.")
        names = [str(layer), *(str(c) for c in entry["channels"])]
        bad = [n for n in names if not _NAME.match(n)]
        if bad:
            raise BundleError(
                f"{path.name}: task layer names must be a letter then letters, digits or '_'; found {bad}."
            )
        integer = entry.get("meaning") == CLASS_ID
        classes = {}
        for item in entry.get("classes") or []:
            if isinstance(item, dict) and isinstance(item.get("id"), int):
                classes[int(item["id"])] = str(item.get("name", item["id"]))
        for channel in entry["channels"]:
            name = f"{layer}.{channel}"
            if len(name.encode("utf-8")) > _ATTRIBUTE_BYTES:
                raise BundleError(
                    f"{path.name}: task channel {name!r} is longer than Blender's attribute names allow "
                    f"({_ATTRIBUTE_BYTES} bytes)."
                )
            out.append(TaskChannel(name, str(entry.get("task", layer)), integer, classes if integer else {}))
    return out


def check_task_channels(channels: list[TaskChannel], present: set[str], path: Path) -> None:
    """Refuse a bundle whose EXR lacks channels its JSON declares (as the project's own reader does)."""
    missing = [c.name for c in channels if c.name not in present]
    if missing:
        raise BundleError(
            f"{path.name}: task layers declare channels {missing} that its EXR does not hold. The EXR belongs to "
            "another capture or was cut short; re-export the capture bundle."
        )
