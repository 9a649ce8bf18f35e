"""3D View sidebar tab "Sapiens2": the bundle metadata of the active object's import."""

from __future__ import annotations

import json

import bpy


def capture_collection(obj) -> bpy.types.Collection | None:
    """The import collection an object belongs to (it carries the bundle summary)."""
    if obj is None:
        return None
    name = obj.get("sapiens2_collection")
    collection = bpy.data.collections.get(name) if isinstance(name, str) else None
    if collection is not None and "sapiens2" in collection:
        return collection
    return next((c for c in obj.users_collection if "sapiens2" in c), None)


class SAPIENS2_PT_capture(bpy.types.Panel):
    bl_label = "Sapiens2 Capture"
    bl_idname = "SAPIENS2_PT_capture"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Sapiens2"

    def draw(self, context):
        layout = self.layout
        collection = capture_collection(context.object)
        if collection is None:
            layout.label(text="Select an imported Sapiens2 object")
            layout.operator("import_scene.sapiens2_capture", icon="IMPORT")
            return
        meta = collection["sapiens2"]
        col = layout.column(align=True)
        col.label(text=f"{meta.get('name', '')}  (bundle v{meta.get('version', '?')})")
        col.label(text=f"Image: {meta.get('width')} x {meta.get('height')} px")
        col.label(
            text=f"Camera ({meta.get('camera_source')}): fx {meta.get('fx', 0):.1f}  fy {meta.get('fy', 0):.1f}"
        )
        col.label(text=f"Principal point: {meta.get('cx', 0):.1f}, {meta.get('cy', 0):.1f}")
        if "pointmap_scale" in meta:
            col.label(text=f"Pointmap scale: {meta['pointmap_scale']:.3f}")
        col.label(text=f"People: {meta.get('people')}   Frames: {meta.get('frames')}")
        col.label(text=f"Layers: {meta.get('layers')}")
        try:
            models = json.loads(meta.get("models", "[]"))
        except ValueError:
            models = []
        if models:
            box = layout.box()
            box.label(text="Models")
            for model in models:
                box.label(
                    text=f"{model.get('task', '?')}: {model.get('size', '?')}  {model.get('checkpoint', '')}"
                )
        layout.label(text=f"Source: {meta.get('source')}")
        obj = context.object
        if (
            obj.type == "ARMATURE"
            and context.active_pose_bone is not None
            and "confidence" in context.active_pose_bone
        ):
            layout.label(
                text=f"{context.active_pose_bone.name}: confidence {context.active_pose_bone['confidence']:.2f}"
            )
