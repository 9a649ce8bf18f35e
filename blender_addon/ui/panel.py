"""3D View sidebar tab "Sapiens2": the bundle metadata of the active object's import."""

from __future__ import annotations

import json

import bpy

from .retarget_ops import draw_rig_row


def capture_collection(obj) -> bpy.types.Collection | None:
    """The import collection an object belongs to (it carries the bundle summary)."""
    if obj is None:
        return None
    name = obj.get("sapiens2_collection")
    collection = bpy.data.collections.get(name) if isinstance(name, str) else None
    if collection is not None and "sapiens2" in collection:
        return collection
    return next((c for c in obj.users_collection if "sapiens2" in c), None)


def panel_lines(meta, obj, pose_bone=None) -> tuple[list[str], list[str], list[str]]:
    """(summary lines, model lines, footer lines) the panel shows for an import's metadata; kept apart from
    ``draw`` so it can be checked headless, where no UI layout exists."""
    summary = [
        f"{meta.get('name', '')}  (bundle v{meta.get('version', '?')})",
        f"Image: {meta.get('width')} x {meta.get('height')} px",
        f"Camera ({meta.get('camera_source')}): fx {meta.get('fx', 0):.1f}  fy {meta.get('fy', 0):.1f}",
        f"Principal point: {meta.get('cx', 0):.1f}, {meta.get('cy', 0):.1f}",
    ]
    if "pointmap_scale" in meta:
        summary.append(f"Pointmap scale: {meta['pointmap_scale']:.3f}")
    summary.append(f"People: {meta.get('people')}   Frames: {meta.get('frames')}")
    summary.append(f"Layers: {meta.get('layers')}")
    try:
        models = json.loads(meta.get("models", "[]"))
    except ValueError:
        models = []
    model_lines = [
        f"{m.get('task', '?')}: {m.get('size', '?')}  {m.get('checkpoint', '')}"
        for m in models
        if isinstance(m, dict)
    ]
    footer = [f"Source: {meta.get('source')}"]
    if obj is not None and "sapiens2_person" in obj:
        footer.append(f"Person (track) {obj['sapiens2_person']}")
    if obj is not None and obj.type == "ARMATURE" and pose_bone is not None and "confidence" in pose_bone:
        footer.append(f"{pose_bone.name}: confidence {pose_bone['confidence']:.2f}")
    return summary, model_lines, footer


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
        summary, models, footer = panel_lines(
            collection["sapiens2"], context.object, context.active_pose_bone
        )
        col = layout.column(align=True)
        for line in summary:
            col.label(text=line)
        if models:
            box = layout.box()
            box.label(text="Models")
            for line in models:
                box.label(text=line)
        for line in footer:
            layout.label(text=line)
        draw_rig_row(layout, context.object)
