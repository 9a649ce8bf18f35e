"""Remember every datablock an import creates, so a failure part-way can remove them all (nothing half-imported)."""

from __future__ import annotations

import contextlib

import bpy


class CreatedData:
    """Datablocks in creation order; ``remove_all`` deletes them newest first."""

    def __init__(self) -> None:
        self._items: list[tuple[str, bpy.types.ID]] = []

    def add(self, collection_name: str, datablock):
        self._items.append((collection_name, datablock))
        return datablock

    def objects(self) -> list[bpy.types.Object]:
        return [d for kind, d in self._items if kind == "objects"]

    def remove_all(self) -> None:
        for kind, datablock in reversed(self._items):
            with contextlib.suppress(ReferenceError):  # already gone with its owner
                getattr(bpy.data, kind).remove(datablock)
        self._items.clear()
