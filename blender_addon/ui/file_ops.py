"""What the add-on's File > Export/Import operators share: one way to run, report and list themselves.

Why one mixin: each of those operators does one call into ``build`` and must turn its ``ExportError`` into an
ERROR report and CANCELLED (nothing half-done reported as done), else an INFO line of what it wrote; and an
operator that names its File menu puts its entry there when registered, so the add-on registers it with one line.
"""

from __future__ import annotations

from collections.abc import Callable

import bpy

from ..build.mocap_export import ExportError

# The draw functions of the menu entries put in place by `FileOperator.register`, by operator id: the same
# function object must be given to the menu's `remove`.
_ENTRIES: dict[str, Callable] = {}


class FileOperator:
    """Mixin for a file operator (before ``ExportHelper``/``ImportHelper`` and ``bpy.types.Operator`` in the
    bases): subclasses write ``run`` (the work; returns the INFO line) and may name ``menu`` (a ``bpy.types`` menu
    such as ``TOPBAR_MT_file_export``) with ``menu_text`` for an entry that registers with the class."""

    bl_options = {"REGISTER"}  # noqa: RUF012 (read by Blender, never mutated)
    menu = ""
    menu_text = ""

    def run(self, context) -> str:
        raise NotImplementedError

    def execute(self, context):
        try:
            message = self.run(context)
        except ExportError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, message)
        return {"FINISHED"}

    @classmethod
    def register(cls):
        if cls.menu:
            _ENTRIES[cls.bl_idname] = draw = _menu_entry(cls.bl_idname, cls.menu_text)
            getattr(bpy.types, cls.menu).append(draw)

    @classmethod
    def unregister(cls):
        draw = _ENTRIES.pop(cls.bl_idname, None)
        if draw is not None:
            getattr(bpy.types, cls.menu).remove(draw)


def _menu_entry(idname: str, text: str) -> Callable:
    def draw(self, context):
        self.layout.operator(idname, text=text)

    draw.__name__ = f"menu_{idname.replace('.', '_')}"  # what a menu's draw-function list shows
    return draw
