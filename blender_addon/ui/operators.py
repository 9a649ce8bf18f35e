"""File > Import > Sapiens2 Capture (.json): a thin operator over ``build.scene.import_files``."""

from pathlib import Path

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    StringProperty,
)
from bpy_extras.io_utils import ImportHelper

from ..build.scene import import_files
from ..parse.errors import BundleError
from ..parse.options import ImportOptions

_DEFAULTS = ImportOptions()


class IMPORT_SCENE_OT_sapiens2_capture(bpy.types.Operator, ImportHelper):
    """Import Sapiens2 capture bundles (frame or sequence .json with its .exr) as mesh, armatures and camera"""

    bl_idname = "import_scene.sapiens2_capture"
    bl_label = "Import Sapiens2 Capture"
    bl_options = {"REGISTER", "UNDO", "PRESET"}  # noqa: RUF012 (read by Blender, never mutated)

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})
    files: CollectionProperty(type=bpy.types.OperatorFileListElement, options={"HIDDEN", "SKIP_SAVE"})
    directory: StringProperty(subtype="DIR_PATH", options={"HIDDEN", "SKIP_SAVE"})

    import_mesh: BoolProperty(
        name="Mesh", default=_DEFAULTS.import_mesh, description="Surface mesh from the pointmap"
    )
    import_points: BoolProperty(
        name="Points", default=_DEFAULTS.import_points, description="Every pointmap pixel as a coloured point"
    )
    import_armatures: BoolProperty(
        name="Armatures",
        default=_DEFAULTS.import_armatures,
        description="One armature per person from the 308 keypoints",
    )
    import_camera: BoolProperty(
        name="Camera",
        default=_DEFAULTS.import_camera,
        description="Camera with the capture's intrinsics at the origin",
    )
    import_background: BoolProperty(
        name="Background Plate",
        default=_DEFAULTS.import_background,
        description="Source image as the camera background",
    )
    mesh_stride: IntProperty(
        name="Stride",
        default=_DEFAULTS.mesh_stride,
        min=1,
        max=64,
        description="Use every N-th pixel row and column (decimation for large captures)",
    )
    depth_threshold: FloatProperty(
        name="Depth Discontinuity",
        default=_DEFAULTS.depth_threshold,
        min=0.0,
        max=10.0,
        step=1,
        description="Drop faces whose corners differ in depth by more than this fraction of the nearest corner (0 keeps all)",
    )
    drop_background: BoolProperty(
        name="Drop Background",
        default=_DEFAULTS.drop_background,
        description="Skip pixels outside the person mask (or with class Background)",
    )
    use_normals: BoolProperty(
        name="Custom Normals",
        default=_DEFAULTS.use_normals,
        description="Custom split normals from the normal layer",
    )
    color_source: EnumProperty(
        name="Colour",
        items=[
            ("IMAGE", "Image", "Show the source image colours"),
            ("ALBEDO", "Albedo", "Show the predicted albedo"),
            ("NONE", "None", "No material"),
        ],
        default=_DEFAULTS.color_source,
    )
    keypoint_threshold: FloatProperty(
        name="Keypoint Confidence",
        default=_DEFAULTS.keypoint_threshold,
        min=0.0,
        max=1.0,
        description="Hide joints whose score is below this (and re-fill them in sequences)",
    )
    keypoint_depth: FloatProperty(
        name="Keypoint Depth",
        default=_DEFAULTS.keypoint_depth,
        min=0.01,
        unit="LENGTH",
        description="Depth of the plane for people without any 3D keypoint",
    )
    up_axis: EnumProperty(
        name="Up",
        items=[
            ("Z", "Z Up", "Person upright in Blender's Z-up world, camera looking along +Y"),
            (
                "Y",
                "Y Up (camera frame)",
                "OpenCV camera frame turned 180° about X: camera at the origin looking down -Z",
            ),
        ],
        default=_DEFAULTS.up_axis,
    )
    global_scale: FloatProperty(
        name="Scale", default=_DEFAULTS.global_scale, min=1e-4, max=1e4, description="Metres to Blender units"
    )
    mesh_per_frame: BoolProperty(
        name="Mesh per Frame",
        default=_DEFAULTS.mesh_per_frame,
        description="Sequences: one mesh per frame, visible on its frame only",
    )
    smoothing: IntProperty(
        name="Smoothing",
        default=_DEFAULTS.smoothing,
        min=0,
        max=31,
        description="Sequences: moving-average window over joints in frames (0 = off)",
    )

    import_rig: BoolProperty(
        name="Humanoid Rig",
        default=_DEFAULTS.import_rig,
        description="Also build a fixed-length humanoid skeleton driven by bone rotations (retargetable; BVH/FBX)",
    )
    rig_naming: EnumProperty(
        name="Bone Names",
        items=[
            ("MIXAMO", "Mixamo", "mixamorig:Hips, mixamorig:LeftArm, …"),
            (
                "RIGIFY",
                "Rigify Metarig",
                "spine, upper_arm.L, … with rig types: Rigify can generate a control rig",
            ),
            ("UE", "UE Mannequin", "root, pelvis, upperarm_l, …"),
        ],
        default=_DEFAULTS.rig_naming,
    )
    rig_face: EnumProperty(
        name="Face",
        items=[
            ("NONE", "None", "No face points on the rig"),
            ("BONES", "Bones", "A small bone per face point under the head, keyed to follow it"),
            ("EMPTIES", "Empties", "An empty per face point parented to the head bone"),
        ],
        default=_DEFAULTS.rig_face,
    )
    rig_smoothing: BoolProperty(
        name="Clean Up",
        default=_DEFAULTS.rig_smoothing,
        description="Speed-adaptive smoothing in the solve: still joints lose their jitter, fast moves are kept "
        "(off: the keypoints are followed exactly)",
    )
    rig_smoothing_strength: FloatProperty(
        name="Strength",
        default=_DEFAULTS.rig_smoothing_strength,
        min=0.05,
        max=10.0,
        description="Clean-up strength: 1 keeps a 4 Hz limb motion within 5 %, 2 smooths twice as much",
    )
    rig_foot_lock: BoolProperty(
        name="Foot Lock",
        default=_DEFAULTS.rig_foot_lock,
        description="Hold a foot still while it is on the ground (slow and low)",
    )

    def invoke(self, context, event):
        # A drop (FileHandler) sets filepath: show the options popup; from the menu open the file browser.
        if hasattr(ImportHelper, "invoke_popup"):  # 4.2+
            return self.invoke_popup(context)
        return ImportHelper.invoke(self, context, event)

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        for title, names in (
            (
                "Include",
                ("import_mesh", "import_points", "import_armatures", "import_camera", "import_background"),
            ),
            ("Mesh", ("mesh_stride", "depth_threshold", "drop_background", "use_normals", "color_source")),
            ("Keypoints", ("keypoint_threshold", "keypoint_depth")),
            ("Sequence", ("mesh_per_frame", "smoothing")),
            (
                "Rig",
                (
                    "import_rig",
                    "rig_naming",
                    "rig_face",
                    "rig_smoothing",
                    "rig_smoothing_strength",
                    "rig_foot_lock",
                ),
            ),
            ("Transform", ("up_axis", "global_scale")),
        ):
            header, body = layout.panel(f"SAPIENS2_import_{title.lower()}", default_closed=False)
            header.label(text=title)
            if body:
                for name in names:
                    body.prop(self, name)

    def selected_paths(self) -> list[Path]:
        names = [f.name for f in self.files if f.name]
        if names and self.directory:
            return [Path(self.directory) / name for name in names]
        return [Path(self.filepath)]

    def execute(self, context):
        options = ImportOptions.from_keywords(self.as_keywords())
        wm = context.window_manager
        wm.progress_begin(0, 100)
        try:
            result = import_files(
                context,
                self.selected_paths(),
                options,
                progress=lambda f, _stage: wm.progress_update(int(100 * f)),
            )
        except (BundleError, ValueError) as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            wm.progress_end()
        for warning in result.warnings:
            self.report({"WARNING"}, warning)
        self.report(
            {"INFO"}, f"Imported {len(result.collections)} capture(s), {len(result.objects)} object(s)"
        )
        return {"FINISHED"}


class SAPIENS2_FH_capture(bpy.types.FileHandler):
    """Drag a capture .json onto the 3D viewport to import it."""

    bl_idname = "SAPIENS2_FH_capture"
    bl_label = "Sapiens2 Capture"
    bl_import_operator = "import_scene.sapiens2_capture"
    bl_file_extensions = ".json"

    @classmethod
    def poll_drop(cls, context):
        return context.area is not None and context.area.type == "VIEW_3D"


def menu_import(self, context):
    self.layout.operator(IMPORT_SCENE_OT_sapiens2_capture.bl_idname, text="Sapiens2 Capture (.json)")
