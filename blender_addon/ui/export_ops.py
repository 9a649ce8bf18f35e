"""File > Export > Sapiens2 Mocap (.bvh/.fbx): a thin operator over ``build.mocap_export``."""

from pathlib import Path

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty
from bpy_extras.io_utils import ExportHelper

from ..build.mocap_export import export_bvh, export_fbx
from .file_ops import FileOperator


class EXPORT_ANIM_OT_sapiens2_mocap(FileOperator, ExportHelper, bpy.types.Operator):
    """Export the active Sapiens2 humanoid rig as BVH (plus a camera .json) or FBX (with the camera)"""

    bl_idname = "export_anim.sapiens2_mocap"
    bl_label = "Export Sapiens2 Mocap"

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

    def run(self, context) -> str:
        path = Path(self.filepath).with_suffix(".fbx" if self.file_format == "FBX" else ".bvh")
        if self.file_format == "FBX":
            summary = export_fbx(context, path, with_camera=self.with_camera)
        else:
            summary = export_bvh(context, path)
            if not self.with_camera and len(summary["files"]) > 1:
                Path(summary["files"][1]).unlink()
        return f"Exported {summary['frames']} frames at {summary['fps']:g} fps to {path.name}"


def menu_export(self, context):
    self.layout.operator(EXPORT_ANIM_OT_sapiens2_mocap.bl_idname, text="Sapiens2 Mocap (.bvh/.fbx)")
