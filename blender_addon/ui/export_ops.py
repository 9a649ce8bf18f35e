"""File > Export > Sapiens2 Mocap (.bvh/.fbx): a thin operator over ``build.mocap_export``."""

from pathlib import Path

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper

from ..build.mocap_export import ExportError, export_bvh, export_fbx


class EXPORT_ANIM_OT_sapiens2_mocap(bpy.types.Operator, ExportHelper):
    """Export the active Sapiens2 humanoid rig as BVH (plus a camera .json) or FBX (with the camera)"""

    bl_idname = "export_anim.sapiens2_mocap"
    bl_label = "Export Sapiens2 Mocap"
    bl_options = {"REGISTER"}  # noqa: RUF012 (read by Blender, never mutated)

    filename_ext = ".bvh"
    filter_glob: StringProperty(default="*.bvh;*.fbx", options={"HIDDEN"})
    file_format: EnumProperty(
        name="Format",
        items=[
            ("BVH", "BVH", "Skeleton + motion + frame rate; the camera is written beside it as .camera.json"),
            ("FBX", "FBX", "Rig and camera with every frame keyed"),
        ],
        default="BVH",
    )
    with_camera: BoolProperty(name="Camera", default=True, description="Include the import's camera")

    @classmethod
    def poll(cls, context):
        obj = context.view_layer.objects.active
        return obj is not None and obj.type == "ARMATURE" and "sapiens2_rig" in obj

    def check(self, context):
        # Keep the file name's extension in step with the chosen format, as Blender's exporters do.
        self.filename_ext = ".fbx" if self.file_format == "FBX" else ".bvh"
        return super().check(context)

    def execute(self, context):
        path = Path(self.filepath).with_suffix(".fbx" if self.file_format == "FBX" else ".bvh")
        try:
            if self.file_format == "FBX":
                summary = export_fbx(context, path, with_camera=self.with_camera)
            else:
                summary = export_bvh(context, path)
                if not self.with_camera and len(summary["files"]) > 1:
                    Path(summary["files"][1]).unlink()
        except ExportError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Exported {summary['frames']} frames at {summary['fps']:g} fps to {path.name}")
        return {"FINISHED"}


def menu_export(self, context):
    self.layout.operator(EXPORT_ANIM_OT_sapiens2_mocap.bl_idname, text="Sapiens2 Mocap (.bvh/.fbx)")
