"""File > Export > Sapiens2 Capture (.usd): the imported capture (mesh, armatures, humanoid rig, camera, animation)
through Blender's own USD exporter (``wm.usd_export``), so the rig's preset bone names reach USD too; and File >
Import > Sapiens2 USD (.usd): Blender's own USD importer plus the one thing it drops, the frame rate.

Why an import command: Blender's USD importer (4.2 to 5.3) sets the frame range from the stage but leaves the scene's
frame rate as it was, whatever ``timeCodesPerSecond``/``framesPerSecond`` say. It does import custom attributes, so
stages written by ``core.formats.usd`` (and by the export below) carry the rate as
``userProperties:sapiens2:framesPerSecond`` on the root prim, which arrives as the custom property
``sapiens2:framesPerSecond`` of the root's empty; this command sets the scene's rate from it.

The operator classes put their own menu entries in place when registered (``file_ops.FileOperator``), so the
add-on registers this module with one line.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import bpy
from bpy.props import StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..build.mocap_export import ExportError
from .file_ops import FileOperator

USD_EXTENSIONS = (".usd", ".usda", ".usdc", ".usdz")
USD_GLOB = ";".join(f"*{ext}" for ext in USD_EXTENSIONS)  # the file browser's filter
# USD `userProperties:sapiens2:framesPerSecond` (core.formats.usd.FPS_ATTRIBUTE), as Blender imports it
FPS_PROPERTY = "sapiens2:framesPerSecond"


def capture_collection(context, obj=None) -> bpy.types.Collection:
    """The collection of one imported capture: that of ``obj`` or the active object, else the only one."""
    for candidate in (obj, context.view_layer.objects.active):
        name = candidate.get("sapiens2_collection") if candidate is not None else None
        if name and name in bpy.data.collections:
            return bpy.data.collections[name]
    found = [c for c in context.scene.collection.children_recursive if "sapiens2" in c]
    if len(found) == 1:
        return found[0]
    raise ExportError(
        "Import a Sapiens2 capture first (File > Import > Sapiens2 Capture)."
        if not found
        else f"{len(found)} Sapiens2 captures in the scene: select an object of the one to export."
    )


def scene_fps(scene) -> float:
    return scene.render.fps / scene.render.fps_base


def set_scene_fps(scene, fps: float) -> None:
    """The scene's rate as Blender stores it: an integer ``fps`` over ``fps_base`` (29.97 = 30000 / 1001)."""
    ratio = Fraction(fps).limit_denominator(1001)
    scene.render.fps, scene.render.fps_base = ratio.numerator, ratio.numerator / fps


def export_usd(context, path: Path | str, collection=None) -> dict:
    """Write the capture's collection with Blender's USD exporter, animated over the scene's frame range (which the
    import set); returns a summary (file, objects, frames, fps). Blender writes ``timeCodesPerSecond`` and
    ``framesPerSecond`` from the scene's rate and the stage's start and end from its range; the rate is also put on
    the collection as a custom property, which the exporter writes as ``userProperties:sapiens2:framesPerSecond``
    on the objects' prims (read back by ``import_usd``)."""
    path = Path(path)
    if path.suffix.lower() not in USD_EXTENSIONS:
        raise ExportError(f"The file must end in {', '.join(USD_EXTENSIONS)}, not {path.name!r}.")
    collection = collection or capture_collection(context)
    op = bpy.ops.wm.usd_export
    try:
        known = {p.identifier for p in op.get_rna_type().properties}
    except (KeyError, AttributeError) as exc:
        raise ExportError("This Blender has no USD exporter (it is built in since Blender 2.82).") from exc
    scene = context.scene
    fps = scene_fps(scene)
    for obj in collection.all_objects:
        if obj.parent is None:  # the capture's top objects: where an importer finds the rate first
            obj[FPS_PROPERTY] = fps
    wanted = {
        "collection": collection.name,
        "export_animation": True,
        "export_armatures": True,
        "only_deform_bones": False,
        "export_meshes": True,
        "export_cameras": True,
        "export_mesh_colors": True,
        "export_normals": True,
        "export_uvmaps": True,
        "export_materials": True,
        "export_custom_properties": True,
        "evaluation_mode": "RENDER",
    }
    kwargs = {k: v for k, v in wanted.items() if k in known}
    result = op(filepath=str(path), **kwargs)
    if result != {"FINISHED"} or not path.is_file():
        raise ExportError(f"Blender's USD exporter did not write {path.name} ({result}).")
    return {
        "file": str(path),
        "objects": len(collection.all_objects),
        "frames": scene.frame_end - scene.frame_start + 1,
        "fps": fps,
    }


def import_usd(context, path: Path | str) -> dict:
    """Blender's own USD import, then the scene's frame rate from the stage's ``sapiens2:framesPerSecond`` (see the
    module docstring); returns a summary (objects, fps or None where the stage does not say its rate)."""
    path = Path(path)
    before = set(context.scene.objects)
    result = bpy.ops.wm.usd_import(filepath=str(path), set_frame_range=True)
    if result != {"FINISHED"}:
        raise ExportError(f"Blender's USD importer could not read {path.name} ({result}).")
    new = [o for o in context.scene.objects if o not in before]
    rates = {float(o[FPS_PROPERTY]) for o in new if FPS_PROPERTY in o}
    fps = None
    if len(rates) == 1:
        fps = rates.pop()
        set_scene_fps(context.scene, fps)
    return {"objects": len(new), "fps": fps}


class EXPORT_SCENE_OT_sapiens2_usd(FileOperator, ExportHelper, bpy.types.Operator):
    """Export the imported Sapiens2 capture (mesh, armatures, humanoid rig, camera, animation) as USD"""

    bl_idname = "export_scene.sapiens2_usd"
    bl_label = "Export Sapiens2 Capture (USD)"
    menu = "TOPBAR_MT_file_export"
    menu_text = "Sapiens2 Capture (.usd)"

    filename_ext = ".usdc"
    filter_glob: StringProperty(default=USD_GLOB, options={"HIDDEN"})

    @classmethod
    def poll(cls, context):
        return any("sapiens2" in c for c in context.scene.collection.children_recursive)

    def run(self, context) -> str:
        path = Path(self.filepath)
        if path.suffix.lower() not in USD_EXTENSIONS:
            path = path.with_suffix(".usdc")
        summary = export_usd(context, path)
        return (
            f"Exported {summary['objects']} objects, {summary['frames']} frames at {summary['fps']:g} fps "
            f"to {path.name}"
        )


class IMPORT_SCENE_OT_sapiens2_usd(FileOperator, ImportHelper, bpy.types.Operator):
    """Import a USD stage with Blender's importer and set the scene's frame rate the stage records"""

    bl_idname = "import_scene.sapiens2_usd"
    bl_label = "Import Sapiens2 USD"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 (read by Blender, never mutated)
    menu = "TOPBAR_MT_file_import"
    menu_text = "Sapiens2 USD (.usd)"

    filename_ext = ".usd"
    filter_glob: StringProperty(default=USD_GLOB, options={"HIDDEN"})

    def run(self, context) -> str:
        summary = import_usd(context, self.filepath)
        rate = f"{summary['fps']:g} fps" if summary["fps"] else "no frame rate recorded; scene rate unchanged"
        return f"Imported {summary['objects']} objects ({rate})"


classes = (EXPORT_SCENE_OT_sapiens2_usd, IMPORT_SCENE_OT_sapiens2_usd)
