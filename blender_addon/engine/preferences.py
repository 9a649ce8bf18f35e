"""The add-on's preferences: where the engine is, its checkpoint folder, device, default size, downloads, output
folder; a *Detect* button (PATH and the usual places) and a *Test* button (``sapiens2 info --json``)."""

from __future__ import annotations

import threading

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty

from . import locate, runner

ADDON_ID = __package__.rpartition(".")[0]  # the add-on's module (bl_ext.<repo>.sapiens2_capture)
SIZES = [
    ("TASK", "Each Task's Own", "0.4b, and 1b for matting (its only released size)"),
    ("0.4b", "0.4B", "Fastest; about 1.6 GB per task"),
    ("0.8b", "0.8B", ""),
    ("1b", "1B", ""),
    ("5b", "5B", "Best; needs a large GPU"),
]
DEVICES = [
    ("auto", "Auto", "CUDA if present, else Apple MPS, else the CPU"),
    ("cpu", "CPU", ""),
    ("cuda", "CUDA", ""),
    ("mps", "Apple MPS", ""),
]

# The last Test result per engine command (shown in the preferences; not saved).
PROBE: dict[str, object] = {"running": False, "result": None}


def preferences(context=None):
    """This add-on's preferences (None where the add-on is not registered under its id)."""
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_ID)
    return addon.preferences if addon is not None else None


def current_engine(prefs) -> locate.Engine | None:
    return locate.find_engine(prefs.engine_path if prefs is not None else "")


def probe_lines(result) -> list[str]:
    if not isinstance(result, dict):
        return []
    if "error" in result:
        return [f"Error: {result['error']}"]
    found = result.get("checkpoints") or []
    lines = [
        f"Sapiens2 Studio {result.get('version')} — Python {result.get('python_version')}, torch {result.get('torch')}",
        f"Device: {result.get('device')} ({result.get('device_reason')})",
        f"Checkpoints: {len(found)} in {result.get('checkpoint_dir')}",
    ]
    lines += [f"  {c.get('task')}: {c.get('file')}" for c in found[:12]]
    return lines


class SAPIENS2_OT_engine_detect(bpy.types.Operator):
    """Look for a Sapiens2 engine on PATH and in the usual places and use the first one found"""

    bl_idname = "sapiens2.engine_detect"
    bl_label = "Detect"

    def execute(self, context):
        prefs = preferences(context)
        found = locate.candidates("")
        if not found:
            self.report({"ERROR"}, "No Sapiens2 engine found: pip install sapiens2-studio in a Python 3.11+ "
                        "environment, then choose its sapiens2 executable here")  # fmt: skip
            return {"CANCELLED"}
        if prefs is not None:
            prefs.engine_path = found[0].argv[0]  # an executable, or a Python (engine_argv adds `-m …`)
        self.report({"INFO"}, f"Found {' '.join(found[0].argv)} ({found[0].origin})")
        return {"FINISHED"}


class SAPIENS2_OT_engine_test(bpy.types.Operator):
    """Run 'sapiens2 info' with this engine: version, device and the checkpoints it finds"""

    bl_idname = "sapiens2.engine_test"
    bl_label = "Test"

    def execute(self, context):
        prefs = preferences(context)
        engine = current_engine(prefs)
        if engine is None:
            PROBE["result"] = {"error": "no engine found (set the path or press Detect)"}
            self.report({"ERROR"}, PROBE["result"]["error"])
            return {"CANCELLED"}
        folder = bpy.path.abspath(prefs.checkpoint_dir) if prefs is not None and prefs.checkpoint_dir else ""
        if bpy.app.background:  # no UI to keep alive: answer at once
            PROBE["result"] = runner.probe(engine, folder)
            return self._report(PROBE["result"])
        PROBE["running"] = True

        def work() -> None:
            PROBE["result"] = runner.probe(engine, folder)
            PROBE["running"] = False

        threading.Thread(target=work, daemon=True).start()

        def redraw():
            if PROBE["running"]:
                return 0.25
            for window in bpy.context.window_manager.windows:
                for area in window.screen.areas:
                    area.tag_redraw()
            return None

        bpy.app.timers.register(redraw, first_interval=0.25)
        return {"FINISHED"}

    def _report(self, result):
        if "error" in result:
            self.report({"ERROR"}, str(result["error"]))
            return {"CANCELLED"}
        self.report({"INFO"}, probe_lines(result)[0])
        return {"FINISHED"}


class SAPIENS2_AddonPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_ID

    engine_path: StringProperty(
        name="Engine",
        subtype="FILE_PATH",
        description="The sapiens2 executable, a Python with sapiens2-studio installed, or its virtual "
        "environment's folder (empty: found on PATH and in the usual places)",
    )
    checkpoint_dir: StringProperty(
        name="Checkpoints",
        subtype="DIR_PATH",
        description="Checkpoint folder (empty: $SAPIENS2_HOME or ~/.cache/sapiens2)",
    )
    device: EnumProperty(name="Device", items=DEVICES, default="auto")
    default_size: EnumProperty(name="Default Size", items=SIZES, default="TASK")
    allow_download: BoolProperty(
        name="Download Missing Checkpoints",
        default=False,
        description="Let the engine download official checkpoints it lacks (about 1.6 GB per task at 0.4B)",
    )
    output_dir: StringProperty(
        name="Output Folder",
        subtype="DIR_PATH",
        description="Where predictions go (empty: a 'sapiens2' folder beside the .blend file, or the "
        "temporary folder for an unsaved file)",
    )

    def draw(self, context):
        layout = self.layout
        row = layout.row(align=True)
        row.prop(self, "engine_path")
        row.operator(SAPIENS2_OT_engine_detect.bl_idname)
        row.operator(SAPIENS2_OT_engine_test.bl_idname)
        engine = current_engine(self)
        layout.label(text=f"Using: {' '.join(engine.argv)}" if engine else "No engine found", icon="CONSOLE")
        if PROBE["running"]:
            layout.label(text="Testing…")
        box = None
        for line in probe_lines(PROBE["result"]):
            box = box or layout.box()
            box.label(text=line)
        layout.prop(self, "checkpoint_dir")
        layout.prop(self, "device")
        layout.prop(self, "default_size")
        layout.prop(self, "allow_download")
        layout.prop(self, "output_dir")


classes = (SAPIENS2_OT_engine_detect, SAPIENS2_OT_engine_test, SAPIENS2_AddonPreferences)
