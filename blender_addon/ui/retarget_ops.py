"""Object ▸ Animation ▸ Retarget Sapiens2 Rig onto Active: bake the selected Sapiens2 rig's motion onto the active armature."""

import bpy

from ..build.rig_retarget import retarget


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
