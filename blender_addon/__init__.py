"""Sapiens2 Capture importer: capture bundles (EXR + JSON) -> meshes, armatures and cameras.

Layout: ``parse/`` reads and checks bundles and does the maths with numpy only (no ``bpy``); ``build/`` creates
Blender data, one module per kind of object; ``ui/`` holds the thin operator, the panel and the file handler.
Scripting API: ``build.scene.import_files(bpy.context, [path], parse.options.ImportOptions(...))``.
The add-on needs neither torch nor the ``sapiens2_studio`` package: ``engine/`` runs the engine the user installed
(the ``sapiens2`` CLI, found through the preferences) as a child process (``ui/predict_ops.py``).
"""

import bpy

from .engine import preferences as engine_preferences
from .ui import predict_ops
from .ui.export_ops import EXPORT_ANIM_OT_sapiens2_mocap, menu_export
from .ui.export_usd_ops import classes as usd_classes
from .ui.operators import IMPORT_SCENE_OT_sapiens2_capture, SAPIENS2_FH_capture, menu_import
from .ui.panel import SAPIENS2_PT_capture
from .ui.retarget_ops import SAPIENS2_OT_retarget, SAPIENS2_OT_rigify, menu_retarget

classes = (
    IMPORT_SCENE_OT_sapiens2_capture,
    SAPIENS2_FH_capture,
    SAPIENS2_PT_capture,
    EXPORT_ANIM_OT_sapiens2_mocap,
    SAPIENS2_OT_retarget,
    SAPIENS2_OT_rigify,
    *usd_classes,  # File > Export/Import > Sapiens2 USD (their menu entries register with them)
    *engine_preferences.classes,
    *predict_ops.classes,
)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    predict_ops.register_properties()
    bpy.types.TOPBAR_MT_file_import.append(menu_import)
    bpy.types.TOPBAR_MT_file_export.append(menu_export)
    bpy.types.VIEW3D_MT_object_animation.append(menu_retarget)


def unregister() -> None:
    bpy.types.VIEW3D_MT_object_animation.remove(menu_retarget)
    bpy.types.TOPBAR_MT_file_export.remove(menu_export)
    bpy.types.TOPBAR_MT_file_import.remove(menu_import)
    if predict_ops.SESSION is not None:  # never leave an engine running behind a disabled add-on
        predict_ops.SESSION.cancel()
    predict_ops.unregister_properties()
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
