"""Object ▸ Animation ▸ Retarget Sapiens2 Rig onto Active: bake the selected Sapiens2 rig's motion onto the active
armature; and Generate Rigify Rig (the panel's rig row): a Rigify control rig from the imported metarig, keyed to
follow the capture."""

import bpy

from ..build.rig_retarget import generate_rigify, retarget


def _rigify_ready() -> str | None:
    """None when Rigify's generator is available (enabling Blender's bundled Rigify if needed), else why not."""
    try:
        bpy.ops.pose.rigify_generate.get_rna_type()
        return None
    except (KeyError, AttributeError):
        pass
    import addon_utils

    if not any(m.__name__ == "rigify" for m in addon_utils.modules()):
        return "This Blender has no Rigify add-on."
    addon_utils.enable("rigify", default_set=True)
    try:
        bpy.ops.pose.rigify_generate.get_rna_type()
    except (KeyError, AttributeError):
        return "Rigify could not be enabled: enable it in Preferences > Add-ons."
    return None


class SAPIENS2_OT_rigify(bpy.types.Operator):
    """Generate a Rigify control rig from this rig (imported with Rigify naming, a metarig) in its rest pose,
    and key the control rig's FK controls to follow the capture on every frame"""

    bl_idname = "object.sapiens2_rigify"
    bl_label = "Generate Rigify Rig"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 (read by Blender, never mutated)

    @classmethod
    def poll(cls, context):
        obj = context.view_layer.objects.active
        if obj is None or obj.type != "ARMATURE" or obj.get("sapiens2_rig") != "RIGIFY":
            cls.poll_message_set("Select a rig imported with Rigify naming")
            return False
        return True

    def execute(self, context):
        rig = context.view_layer.objects.active
        problem = _rigify_ready()
        if problem:
            self.report({"ERROR"}, problem)
            return {"CANCELLED"}
        try:
            control = generate_rigify(context, rig)
            mapping = retarget(context, rig, control)
        except (RuntimeError, ValueError) as exc:
            self.report({"ERROR"}, f"Rigify generation failed: {exc}")
            return {"CANCELLED"}
        for obj in context.view_layer.objects:
            obj.select_set(obj == control)
        context.view_layer.objects.active = control
        self.report({"INFO"}, f"Generated {control.name}: {len(mapping)} controls follow {rig.name}")
        return {"FINISHED"}


class SAPIENS2_OT_retarget(bpy.types.Operator):
    """Key the active armature (a Mixamo/UE character or a Rigify control rig) to follow the selected Sapiens2
    humanoid rig, bone by bone, matched by name"""

    bl_idname = "object.sapiens2_retarget"
    bl_label = "Retarget Sapiens2 Rig onto Active"
    bl_options = {"REGISTER", "UNDO"}  # noqa: RUF012 (read by Blender, never mutated)

    @staticmethod
    def _pair(context):
        target = context.view_layer.objects.active
        sources = [o for o in context.selected_objects if o is not target and "sapiens2_rig" in o]
        return (sources[0] if len(sources) == 1 else None), target

    @classmethod
    def poll(cls, context):
        source, target = cls._pair(context)
        return source is not None and target is not None and target.type == "ARMATURE"

    def execute(self, context):
        source, target = self._pair(context)
        try:
            mapping = retarget(context, source, target)
        except ValueError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Retargeted {len(mapping)} bones of {target.name} onto {source.name}")
        return {"FINISHED"}


def menu_retarget(self, context):
    self.layout.operator(SAPIENS2_OT_retarget.bl_idname)


def draw_rig_row(layout, obj) -> None:
    """The panel's rig row: Generate Rigify Rig for a rig imported with Rigify naming."""
    if obj is not None and obj.type == "ARMATURE" and obj.get("sapiens2_rig") == "RIGIFY":
        layout.row().operator(SAPIENS2_OT_rigify.bl_idname, icon="ARMATURE_DATA")
