"""Predict from Blender: run the installed Sapiens2 engine (``sapiens2 predict --progress json``) on the active movie
clip, an image, an image sequence or a chosen file, then import the capture with the import operator.

From the panel the operator is modal: a timer polls the engine's event stream (``engine.runner``: reads happen on
threads, a poll never waits), so Blender stays usable; the status bar and the panel show the frames done; Esc or
the panel's Stop asks the engine to stop as Ctrl-C would (the frame being committed finishes, a sequence stays
marked partial; *Resume* completes it with ``--skip-existing``). Called from a script or in background mode
(``blender -b --python-expr``) it runs synchronously: the same polls in a loop, then the same import.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import bpy
from bpy.props import BoolProperty, EnumProperty, IntProperty, PointerProperty, StringProperty

from ..engine import inputs as engine_inputs
from ..engine import locate, runner
from ..engine.events import log_line
from ..engine.preferences import SIZES, preferences
from ..engine.request import TASKS, PredictRequest
from .operators import IMPORT_SCENE_OT_sapiens2_capture

TIMER_S = 0.1
# The rig's bone-name choices are the import operator's own (one list to keep in step).
_RIG_NAMING = getattr(
    IMPORT_SCENE_OT_sapiens2_capture.__annotations__.get("rig_naming"), "keywords", None
) or {
    "items": [("MIXAMO", "Mixamo", ""), ("RIGIFY", "Rigify Metarig", ""), ("UE", "UE Mannequin", "")],
    "default": "MIXAMO",
}
# Blender's words for what to do about an error kind, after the CLI's own message and hint.
ADVICE = {
    "checkpoint": "set the Checkpoints folder in Preferences > Add-ons > Sapiens2, or enable Download Missing "
    "Checkpoints there",
    "out_of_memory": "choose a smaller size or the CPU device",
    "usage": "is the engine's Sapiens2 Studio older than this add-on? (Preferences > Test)",
}

# The run in progress (one at a time) and the last one's outcome, for the panel and for scripts.
SESSION: PredictSession | None = None
LAST: dict[str, object] = {}


class PredictError(Exception):
    """A prediction that cannot start; the message is for a Blender report."""


class PredictSession:
    """One engine run and what to do with its result; `tick()` is all the modal timer does."""

    def __init__(self, engine: locate.Engine, request: PredictRequest, import_options: dict) -> None:
        self.engine = engine
        self.request = request
        self.import_options = import_options
        self.argv = engine.command(*request.argv())
        self.run: runner.EngineRun | None = None
        self.started = 0.0
        self.cancelled_at_frame: int | None = None
        self.tick_seconds: list[float] = []

    def start(self) -> None:
        Path(self.request.out).mkdir(parents=True, exist_ok=True)
        self.started = time.perf_counter()
        try:
            self.run = runner.EngineRun(self.engine, self.request.argv())
        except OSError as exc:
            raise PredictError(f"could not start the engine {' '.join(self.engine.argv)}: {exc}") from None

    def tick(self) -> list[dict]:
        """New events, without waiting (the engine's output is read on threads)."""
        t0 = time.perf_counter()
        assert self.run is not None
        new = self.run.poll()
        self.run.escalate()
        self.tick_seconds.append(time.perf_counter() - t0)
        return new

    def cancel(self) -> None:
        if self.run is not None and self.cancelled_at_frame is None:
            self.cancelled_at_frame = self.run.progress.done
            self.run.cancel()

    @property
    def done(self) -> bool:
        return self.run is not None and self.run.done

    def status_text(self) -> str:
        if self.run is None:
            return "Sapiens2: starting…"
        text = self.run.progress.status_text()
        return f"{text} (stopping…)" if self.cancelled_at_frame is not None and not self.done else text

    def run_blocking(self) -> runner.Outcome:
        assert self.run is not None

        def echo(_run, event) -> None:  # a farm log shows the progress, an event a line
            line = log_line(event)
            if line is not None:
                print(line, flush=True)

        return runner.run_blocking(self.run, echo)


# ------------------------------------------------------------------------------------------ settings


def _tasks_default(name: str) -> bool:
    return name in ("pose", "seg", "normal", "pointmap")  # the CLI's default tasks


class SAPIENS2_PG_predict(bpy.types.PropertyGroup):
    """What to predict (saved with the .blend, so a farm job runs what the artist set up)."""

    source: EnumProperty(
        name="Input",
        items=[
            ("CLIP", "Movie Clip", "The active movie clip (a video or an image sequence)"),
            ("IMAGE", "Image", "An image (a still, an image sequence or a movie)"),
            ("FILE", "File", "An image, numbered frames, a video or a folder on disk"),
        ],
        default="CLIP",
    )
    clip: PointerProperty(name="Clip", type=bpy.types.MovieClip, description="Empty: the active movie clip")
    image: PointerProperty(name="Image", type=bpy.types.Image)
    filepath: StringProperty(name="File", subtype="FILE_PATH")
    sequence: BoolProperty(
        name="Whole Sequence",
        default=True,
        description="A numbered file (walk_0001.png) stands for its whole sequence",
    )
    use_pose: BoolProperty(name="Pose", default=_tasks_default("pose"))
    use_seg: BoolProperty(name="Segmentation", default=_tasks_default("seg"))
    use_normal: BoolProperty(name="Normals", default=_tasks_default("normal"))
    use_albedo: BoolProperty(name="Albedo", default=_tasks_default("albedo"))
    use_pointmap: BoolProperty(name="Pointmap", default=_tasks_default("pointmap"))
    use_matting: BoolProperty(name="Matting", default=_tasks_default("matting"))
    size: EnumProperty(name="Size", items=[("PREFS", "Preferences' Default", ""), *SIZES], default="PREFS")
    use_frame_range: BoolProperty(
        name="Frame Range", default=False, description="Only the frames numbered First to Last (file numbers)"
    )
    frame_first: IntProperty(name="First", default=1, min=0)
    frame_last: IntProperty(name="Last", default=250, min=0)
    flip_test: BoolProperty(
        name="Flip Test",
        default=True,
        description="Pose: also the mirrored crop, as the official pipeline (2x time)",
    )
    smooth: BoolProperty(
        name="Smooth", default=False, description="Sequences: temporal smoothing of keypoints"
    )
    skip_existing: BoolProperty(
        name="Resume",
        default=False,
        description="Keep the frames a stopped or earlier run already wrote (verified), compute only the rest",
    )
    mesh_per_frame: BoolProperty(
        name="Mesh per Frame",
        default=False,
        description="Sequences: import one mesh per frame, visible on its frame only (else no mesh)",
    )
    import_rig: BoolProperty(
        name="Humanoid Rig", default=False, description="Also build the retargetable humanoid rig on import"
    )
    rig_naming: EnumProperty(name="Bone Names", items=_RIG_NAMING["items"], default=_RIG_NAMING["default"])
    # No methods here: bpy 4.2 (as a Python module) crashes at exit (SIGSEGV, after everything ran) once a
    # registered PropertyGroup class has one; 4.5+ do not. Helpers take the settings instead (`chosen_tasks`).


def chosen_tasks(settings: SAPIENS2_PG_predict) -> list[str]:
    return [t for t in TASKS if getattr(settings, f"use_{t}")]


def _source_path(context, settings) -> tuple[str, bool]:
    """(path, whether a numbered file means its sequence) for the chosen input."""
    if settings.source == "FILE":
        return bpy.path.abspath(settings.filepath), settings.sequence
    if settings.source == "IMAGE":
        image = settings.image or getattr(getattr(context, "space_data", None), "image", None)
        if image is None:
            raise PredictError("choose an image")
        if (
            image.source not in ("FILE", "SEQUENCE", "MOVIE")
            or image.packed_file is not None
            or not image.filepath
        ):
            raise PredictError(f"image '{image.name}' is not a file on disk: save it (Image > Save As) first")
        return bpy.path.abspath(image.filepath, library=image.library), image.source == "SEQUENCE"
    clip = (
        settings.clip
        or getattr(getattr(context, "space_data", None), "clip", None)
        or context.scene.active_clip
    )
    if clip is None:
        raise PredictError(
            "no movie clip: open one in the Movie Clip editor, or choose Image or File as the input"
        )
    return bpy.path.abspath(clip.filepath, library=clip.library), clip.source == "SEQUENCE"


def output_folder(prefs) -> str:
    """The preferences' output folder, else 'sapiens2' beside the .blend, else the temporary folder."""
    if prefs is not None and prefs.output_dir:
        return bpy.path.abspath(prefs.output_dir)
    if bpy.data.filepath:
        return bpy.path.abspath("//sapiens2")
    return os.path.join(tempfile.gettempdir(), "sapiens2")


def make_session(context) -> PredictSession:
    """The session for the scene's settings and the add-on's preferences (PredictError when it cannot run)."""
    settings = context.scene.sapiens2_predict
    prefs = preferences(context)
    engine = locate.find_engine(prefs.engine_path if prefs is not None else "")
    if engine is None:
        raise PredictError(
            "no Sapiens2 engine found: install it once (pip install sapiens2-studio in a Python 3.11+ environment), "
            "then set Preferences > Add-ons > Sapiens2 > Engine (or press Detect)"
        )
    path, sequence = _source_path(context, settings)
    first, last = (settings.frame_first, settings.frame_last) if settings.use_frame_range else (None, None)
    try:
        chosen = engine_inputs.resolve(path, sequence=sequence, first=first, last=last)
    except engine_inputs.InputChoiceError as exc:
        raise PredictError(str(exc)) from None
    size = (
        settings.size if settings.size != "PREFS" else (prefs.default_size if prefs is not None else "TASK")
    )
    request = PredictRequest(
        inputs=chosen.paths,
        out=output_folder(prefs),
        tasks=chosen_tasks(settings),
        size="" if size == "TASK" else size,
        device=prefs.device if prefs is not None else "auto",
        checkpoint_dir=bpy.path.abspath(prefs.checkpoint_dir)
        if prefs is not None and prefs.checkpoint_dir
        else "",
        download=bool(prefs is not None and prefs.allow_download),
        flip_test=settings.flip_test,
        skip_existing=settings.skip_existing,
        smooth=settings.smooth,
    )
    try:
        request.validate()
    except ValueError as exc:
        raise PredictError(str(exc)) from None
    return PredictSession(
        engine,
        request,
        {
            "import_rig": settings.import_rig,
            "rig_naming": settings.rig_naming,
            "mesh_per_frame": settings.mesh_per_frame,
        },
    )


# ------------------------------------------------------------------------------------------ the result


def import_results(paths: list[str], options: dict) -> list[str]:
    """Import the bundles with the import operator (one call per folder); the names of the objects it added."""
    before = set(bpy.data.objects)
    by_folder: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        by_folder[os.path.dirname(path)].append(os.path.basename(path))
    for folder, names in by_folder.items():
        bpy.ops.import_scene.sapiens2_capture(directory=folder, files=[{"name": n} for n in names], **options)
    return sorted(o.name for o in set(bpy.data.objects) - before)


def finish(op: bpy.types.Operator, session: PredictSession, outcome: runner.Outcome) -> set[str]:
    """Report how the run ended and import what it made; the operator's return value."""
    progress = outcome.progress
    seconds = time.perf_counter() - session.started
    LAST.clear()
    LAST.update(session=session, outcome=outcome, seconds=seconds, imported=[])
    for warning in progress.warnings[:5]:
        op.report({"WARNING"}, f"Sapiens2: {warning}")
    if outcome.stopped:
        op.report(
            {"WARNING"},
            f"Sapiens2: stopped after {progress.done} frame(s); they are kept in {progress.out or session.request.out}"
            " — press Predict with Resume on to finish",
        )
        return {"CANCELLED"}
    if not outcome.ok:
        kind = str((progress.error or {}).get("kind") or "")
        text = outcome.report_text() or f"the engine failed (exit status {outcome.exit_code})"
        advice = ADVICE.get(kind)
        op.report({"ERROR"}, f"Sapiens2: {text}" + (f" ({advice})" if advice else ""))
        return {"CANCELLED"}
    for failure in (progress.finished or {}).get("failures") or []:
        op.report({"WARNING"}, f"Sapiens2: {failure}")
    paths = progress.results()
    if not paths:
        op.report({"ERROR"}, "Sapiens2: the engine finished but wrote nothing to import")
        return {"CANCELLED"}
    try:
        LAST["imported"] = import_results(paths, session.import_options)
    except RuntimeError as exc:  # the import operator's own error report
        op.report({"ERROR"}, f"Sapiens2: the prediction is in {progress.out}, but its import failed: {exc}")
        return {"CANCELLED"}
    finished = progress.finished or {}
    op.report({"INFO"}, f"Sapiens2: {progress.done} frame(s) in {seconds:.1f} s ({finished.get('written')} "
              f"written, {finished.get('kept')} kept); imported {len(LAST['imported'])} object(s)")  # fmt: skip
    return {"FINISHED"}


def _redraw(context) -> None:
    for window in context.window_manager.windows:
        for area in window.screen.areas:
            if area.type in ("VIEW_3D", "CLIP_EDITOR"):
                area.tag_redraw()


class SAPIENS2_OT_predict(bpy.types.Operator):
    """Run Sapiens2 on the chosen input with the installed engine and import the capture"""

    bl_idname = "sapiens2.predict"
    bl_label = "Predict"
    bl_options = {"REGISTER"}  # noqa: RUF012 (read by Blender, never mutated)

    _timer = None
    _session: PredictSession | None = None

    @classmethod
    def poll(cls, context):
        return SESSION is None and getattr(context.scene, "sapiens2_predict", None) is not None

    def _begin(self, context) -> PredictSession | None:
        global SESSION
        try:
            session = make_session(context)
            session.start()
        except PredictError as exc:
            self.report({"ERROR"}, f"Sapiens2: {exc}")
            return None
        SESSION = session
        return session

    def execute(self, context):
        """Synchronous (scripts, background mode): the same polls as the modal timer, in a loop."""
        global SESSION
        session = self._begin(context)
        if session is None:
            return {"CANCELLED"}
        try:
            outcome = session.run_blocking()
        finally:
            SESSION = None
        return finish(self, session, outcome)

    def invoke(self, context, event):
        if bpy.app.background or context.window is None:
            return self.execute(context)
        session = self._begin(context)
        if session is None:
            return {"CANCELLED"}
        self._session = session
        wm = context.window_manager
        self._timer = wm.event_timer_add(TIMER_S, window=context.window)
        wm.modal_handler_add(self)
        context.workspace.status_text_set(session.status_text())
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        session = self._session
        if event.type == "ESC" and event.value == "PRESS":
            session.cancel()
            return {"RUNNING_MODAL"}
        if event.type != "TIMER" or event.timer is not self._timer:
            return {"PASS_THROUGH"}  # the UI stays usable while the engine runs
        session.tick()
        context.workspace.status_text_set(session.status_text())
        _redraw(context)
        if not session.done:
            return {"PASS_THROUGH"}
        return self._end(context, session)

    def cancel(self, context):
        """Blender ends the operator itself (another file is opened, Blender quits): stop the engine as Stop
        would, so it never runs on unwatched."""
        global SESSION
        if self._session is not None:
            self._session.cancel()
        if self._timer is not None:
            context.window_manager.event_timer_remove(self._timer)
            self._timer = None
        SESSION = None

    def _end(self, context, session):
        global SESSION
        context.window_manager.event_timer_remove(self._timer)
        context.workspace.status_text_set(None)
        SESSION = None
        session.run.wait(timeout=10)
        result = finish(self, session, session.run.outcome())
        _redraw(context)
        return result


class SAPIENS2_OT_predict_stop(bpy.types.Operator):
    """Stop the running prediction cleanly (the frames done are kept; Resume finishes them later)"""

    bl_idname = "sapiens2.predict_stop"
    bl_label = "Stop"

    @classmethod
    def poll(cls, context):
        return SESSION is not None

    def execute(self, context):
        if SESSION is not None:
            SESSION.cancel()
        return {"FINISHED"}


# ------------------------------------------------------------------------------------------ panels


def draw_predict(layout, context) -> None:
    settings = getattr(context.scene, "sapiens2_predict", None)
    if settings is None:
        return
    if SESSION is not None:
        run = SESSION.run
        progress = run.progress if run is not None else None
        layout.label(text=SESSION.status_text(), icon="TIME")
        if progress is not None and progress.total:
            layout.progress(factor=progress.fraction, type="BAR", text=f"{progress.done} / {progress.total}")
        layout.operator(SAPIENS2_OT_predict_stop.bl_idname, icon="CANCEL")
        return
    layout.prop(settings, "source", expand=True)
    if settings.source == "CLIP":
        layout.prop(settings, "clip")
    elif settings.source == "IMAGE":
        layout.prop(settings, "image")
    else:
        layout.prop(settings, "filepath")
        layout.prop(settings, "sequence")
    grid = layout.grid_flow(columns=2, align=True)
    for task in TASKS:
        grid.prop(settings, f"use_{task}")
    layout.prop(settings, "size")
    row = layout.row(align=True)
    row.prop(settings, "use_frame_range")
    sub = row.row(align=True)
    sub.active = settings.use_frame_range
    sub.prop(settings, "frame_first")
    sub.prop(settings, "frame_last")
    col = layout.column(align=True)
    col.prop(settings, "flip_test")
    col.prop(settings, "smooth")
    col.prop(settings, "skip_existing")
    col.prop(settings, "mesh_per_frame")
    row = layout.row(align=True)
    row.prop(settings, "import_rig")
    if settings.import_rig:
        row.prop(settings, "rig_naming", text="")
    layout.operator(SAPIENS2_OT_predict.bl_idname, icon="PLAY")
    outcome = LAST.get("outcome")
    if outcome is not None:
        layout.label(text=outcome.progress.status_text())


class _PredictPanel:
    """The Predict panel's one body; it stands in the 3D view's and the movie clip editor's sidebars (a panel
    class names one editor, so each editor gets a class of its own)."""

    bl_label = "Sapiens2 Predict"
    bl_region_type = "UI"
    bl_category = "Sapiens2"

    def draw(self, context):
        draw_predict(self.layout, context)


class SAPIENS2_PT_predict(_PredictPanel, bpy.types.Panel):
    bl_idname = "SAPIENS2_PT_predict"
    bl_space_type = "VIEW_3D"


class SAPIENS2_PT_predict_clip(_PredictPanel, bpy.types.Panel):
    bl_idname = "SAPIENS2_PT_predict_clip"
    bl_space_type = "CLIP_EDITOR"


classes = (SAPIENS2_PG_predict, SAPIENS2_OT_predict, SAPIENS2_OT_predict_stop, SAPIENS2_PT_predict,
           SAPIENS2_PT_predict_clip)  # fmt: skip


def register_properties() -> None:
    bpy.types.Scene.sapiens2_predict = PointerProperty(type=SAPIENS2_PG_predict)


def unregister_properties() -> None:
    del bpy.types.Scene.sapiens2_predict
