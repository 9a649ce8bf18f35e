"""Import orchestration: parse everything first, then build; on any failure remove what was built.

``import_files`` is the scripting API behind the operator: ``import_files(bpy.context, [path], ImportOptions())``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import bpy
import numpy as np

from ..parse.axes import convert_normals, convert_points
from ..parse.bundle import Capture, Sequence, load_layers, read_any
from ..parse.errors import BundleError, NotACaptureError
from ..parse.layers import Layers
from ..parse.options import ImportOptions
from ..parse.poses import fill_gaps, pose_channels, smooth_tracks
from ..parse.skeleton import Hierarchy, bone_heads, bone_tails, build_hierarchy, joints_3d
from .animation import keyframe_pose, keyframe_visibility
from .armature import bone_scores, create_armature, rest_matrices
from .camera import add_sequence_plate, create_camera, keyframe_intrinsics
from .mesh import create_mesh_object, create_points_object
from .rig_import import sequence_rigs
from .tracking import CreatedData

Progress = Callable[[float, str], None]


@dataclass
class ImportResult:
    collections: list[bpy.types.Collection] = field(default_factory=list)
    objects: list[bpy.types.Object] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _metadata(capture: Capture, frames: int = 1, fps: float | None = None, people: int | None = None) -> dict:
    """Flat, ID-property-safe summary shown by the N-panel."""
    meta = capture.metadata
    cam = capture.camera
    models = meta.get("models") or []
    summary = {
        "source": str(capture.json_path),
        "name": capture.name,
        "version": str(meta.get("version") or ""),
        "width": capture.width,
        "height": capture.height,
        "fx": cam.fx,
        "fy": cam.fy,
        "cx": cam.cx,
        "cy": cam.cy,
        "camera_source": cam.source,
        "people": len(capture.people) if people is None else people,
        "layers": ", ".join(meta.get("layers") or sorted(capture.layers)),
        "models": json.dumps(models),
        "frames": frames,
    }
    if meta.get("pointmap_scale") is not None:
        summary["pointmap_scale"] = float(meta["pointmap_scale"])
    if fps is not None:
        summary["fps"] = float(fps)
    return summary


def _new_collection(context, name: str, created: CreatedData) -> bpy.types.Collection:
    collection = created.add("collections", bpy.data.collections.new(name))
    context.scene.collection.children.link(collection)
    return collection


def _person_joints(
    capture: Capture, person, options: ImportOptions, use_pixels: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """(K, 3) OpenCV joints and (K,) source codes (0 keypoints_3d, 1 pointmap, 2 placed on the depth plane).

    ``use_pixels`` False ignores the EXR layers (no pointmap sampling, no foreground check): sequences do not
    read every frame's EXR, and a frame that happens to have its pixels loaded must not be judged differently
    from its neighbours (a joint would pop on that frame)."""
    c = capture.camera
    layers = capture.layers if use_pixels else Layers()
    sampler = (lambda rows, cols: layers.sample("P", rows, cols)) if "P" in layers else None
    foreground = None
    if "mask" in layers:
        foreground = lambda rows, cols: layers.sample("mask", rows, cols) >= 0.5  # noqa: E731
    elif "seg" in layers:
        foreground = lambda rows, cols: np.rint(layers.sample("seg", rows, cols)) != 0  # noqa: E731
    joints, source = joints_3d(
        person.keypoints,
        person.keypoints_3d,
        sampler,
        (capture.width, capture.height),
        c.fx,
        c.fy,
        c.cx,
        c.cy,
        options.keypoint_depth,
        foreground,
    )
    return joints, source


def _skeleton_pose(hierarchy: Hierarchy, joints_cv: np.ndarray, options: ImportOptions):
    """Bone heads and tails in Blender's frame from OpenCV joints (K, 3)."""
    heads = bone_heads(
        hierarchy, convert_points(joints_cv, options.up_axis, options.global_scale).astype(np.float64)
    )
    toward_camera = convert_normals(np.array([0.0, 0.0, -1.0]), options.up_axis).astype(np.float64)
    return heads, bone_tails(hierarchy, heads, toward_camera, unit=options.global_scale)


def _no_faces_warning(what: str) -> str:
    return (
        f"{what}: the mesh has no faces: every quad crossed a depth discontinuity or touched an invalid or "
        "background pixel. Raise 'Depth Discontinuity' (0 keeps every face), untick 'Drop Background', or "
        "import 'Points'."
    )


def _tag(objects, collection) -> None:
    for obj in objects:
        obj["sapiens2_collection"] = collection.name


def import_capture(
    context,
    capture: Capture,
    options: ImportOptions,
    created: CreatedData,
    progress: Progress,
    warnings: list[str],
):
    """Build one frame: camera, mesh, points and an armature per person in a new collection."""
    needs_pixels = (
        options.import_mesh or options.import_points or options.import_background or options.import_armatures
    )
    if needs_pixels:
        load_layers(capture)
    collection = _new_collection(context, f"Sapiens2 {capture.name}", created)
    collection["sapiens2"] = _metadata(capture)
    made = []
    if options.import_camera:
        made.append(
            create_camera(f"{capture.name} camera", capture, options, collection, context.scene, created)
        )
    progress(0.2, "camera")
    has_points = "P" in capture.layers
    if (options.import_mesh or options.import_points) and not has_points:
        warnings.append(f"{capture.json_path.name}: no pointmap layer (P.X/P.Y/P.Z), so no mesh or points.")
    if options.import_mesh and has_points:
        mesh = create_mesh_object(f"{capture.name} mesh", capture, options, collection, created)
        if not mesh.data.polygons:
            warnings.append(_no_faces_warning(capture.json_path.name))
        made.append(mesh)
    progress(0.6, "mesh")
    if options.import_points and has_points:
        made.append(create_points_object(f"{capture.name} points", capture, options, collection, created))
    progress(0.8, "points")
    if options.import_armatures and capture.people:
        hierarchy = build_hierarchy(capture.keypoint_names, capture.skeleton)
        for person in capture.people:
            heads, tails = _skeleton_pose(hierarchy, _person_joints(capture, person, options)[0], options)
            scores = bone_scores(hierarchy, person.keypoints[:, 2])
            obj = create_armature(
                context,
                f"{capture.name} person {person.identity}",
                hierarchy,
                heads,
                tails,
                scores,
                options.keypoint_threshold,
                collection,
                created,
            )
            obj["sapiens2_person"] = int(person.identity)
            made.append(obj)
    if options.import_rig and capture.people:
        one = Sequence(
            path=capture.json_path, name=capture.name, fps=context.scene.render.fps, frames=[capture]
        )
        frame = np.array([capture.frame if capture.frame is not None else context.scene.frame_current], float)
        made.extend(sequence_rigs(context, one, frame, options, collection, created, warnings))
    _tag(made, collection)
    return collection, made


def import_sequence(
    context,
    sequence: Sequence,
    options: ImportOptions,
    created: CreatedData,
    progress: Progress,
    warnings: list[str],
):
    """Keyframed armatures (one per person id) over the sequence; optional per-frame meshes."""
    first = sequence.frames[0]
    frames = np.array([c.frame for c in sequence.frames], dtype=np.float32)
    scene = context.scene
    scene.frame_start, scene.frame_end = int(frames.min()), int(frames.max())
    scene.render.fps = max(1, round(sequence.fps))
    scene.render.fps_base = scene.render.fps / sequence.fps
    collection = _new_collection(context, f"Sapiens2 {sequence.name}", created)
    people = len({p.identity for c in sequence.frames for p in c.people})
    collection["sapiens2"] = _metadata(first, frames=len(frames), fps=sequence.fps, people=people)
    made = []
    if options.import_camera:
        camera = create_camera(
            f"{sequence.name} camera", first, options, collection, scene, created, with_plate=False
        )
        if options.import_background:
            warnings.extend(add_sequence_plate(camera.data, sequence, created))
        warnings.extend(keyframe_intrinsics(camera.data, sequence, created))
        made.append(camera)
    if options.import_points:
        warnings.append(
            f"{sequence.path.name}: 'Points' is for single frames; a sequence builds meshes with 'Mesh per Frame'."
        )
    if options.import_mesh and options.mesh_per_frame:
        faceless: list[int] = []
        materials: dict[str, bpy.types.Material] = {}
        for i, capture in enumerate(sequence.frames):
            load_layers(capture)
            if "P" not in capture.layers:
                warnings.append(f"{capture.json_path.name}: no pointmap layer, so no mesh for this frame.")
                continue
            obj = create_mesh_object(
                f"{sequence.name} mesh {capture.frame:04d}", capture, options, collection, created, materials
            )
            if not obj.data.polygons:
                faceless.append(capture.frame)
            frame = capture.frame
            keys = np.unique(np.clip([frame - 1, frame, frame + 1], scene.frame_start, scene.frame_end))
            keyframe_visibility(obj, keys, keys == frame, created)
            made.append(obj)
            if capture is not first:
                capture.layers = Layers()  # keep memory flat on long sequences
            progress(0.7 * (i + 1) / len(sequence.frames), "meshes")
        if faceless:
            warnings.append(
                _no_faces_warning(f"{sequence.path.name} ({len(faceless)} frame(s), first {faceless[0]})")
            )
    if options.import_armatures:
        made.extend(_sequence_armatures(context, sequence, frames, options, collection, created))
    if options.import_rig:
        made.extend(sequence_rigs(context, sequence, frames, options, collection, created, warnings))
    progress(1.0, "armatures")
    _tag(made, collection)
    return collection, made


def _sequence_armatures(context, sequence: Sequence, frames, options: ImportOptions, collection, created):
    names = sequence.frames[0].keypoint_names
    hierarchy = build_hierarchy(names, sequence.frames[0].skeleton)
    # One armature per person: the tracking id when the bundle has one (`id` is only the index in its frame).
    ids = sorted({p.identity for c in sequence.frames for p in c.people})
    num_k = len(names)
    made = []
    for person_id in ids:
        tracks = np.zeros((len(frames), num_k, 3))
        scores = np.zeros((len(frames), num_k))
        seen = np.zeros((len(frames), num_k), dtype=bool)
        measured = np.zeros((len(frames), num_k), dtype=bool)
        for t, capture in enumerate(sequence.frames):
            person = next((p for p in capture.people if p.identity == person_id), None)
            if person is None:
                continue
            tracks[t], source = _person_joints(capture, person, options, use_pixels=False)
            measured[t] = source < 2
            scores[t] = person.keypoints[:, 2]
            seen[t] = True
        present = np.nonzero(seen.any(axis=1))[0]
        fallback = tracks[present[0]]
        # Interpolate in time over low scores and joints that had no 3D of their own (placed on a plane); a joint
        # never measured in any frame keeps its plane placement.
        valid = seen & (scores >= options.keypoint_threshold)
        valid &= measured | ~(valid & measured).any(axis=0)
        tracks = smooth_tracks(fill_gaps(tracks, valid, fallback, frames), options.smoothing)
        poses = [_skeleton_pose(hierarchy, tracks[t], options) for t in range(len(frames))]
        heads = np.stack([h for h, _ in poses])
        tails = np.stack([t for _, t in poses])
        bone_conf = bone_scores(hierarchy, scores)
        rest_t = int(present[0])
        obj = create_armature(
            context,
            f"{sequence.name} person {person_id}",
            hierarchy,
            heads[rest_t],
            tails[rest_t],
            bone_conf.max(axis=0),
            options.keypoint_threshold,
            collection,
            created,
        )
        locations, quaternions = pose_channels(heads, tails, rest_matrices(obj, hierarchy), hierarchy.parent)
        on_screen = seen.any(axis=1)
        # A person who is not in every frame is hidden on the frames without them (not frozen in place).
        visible = None if on_screen.all() else on_screen
        keyframe_pose(obj, hierarchy.names, frames, locations, quaternions, bone_conf, created, visible)
        obj["sapiens2_person"] = int(person_id)
        made.append(obj)
    return made


_SCENE_SETTINGS = (
    ("", ("frame_start", "frame_end", "camera")),
    (
        "render",
        (
            "fps",
            "fps_base",
            "resolution_x",
            "resolution_y",
            "resolution_percentage",
            "pixel_aspect_x",
            "pixel_aspect_y",
        ),
    ),
)


def _scene_settings(scene) -> dict[tuple[str, str], object]:
    """The scene settings an import changes, so a failed import can put them back."""
    return {
        (owner, name): getattr(getattr(scene, owner) if owner else scene, name)
        for owner, names in _SCENE_SETTINGS
        for name in names
    }


def _restore_scene_settings(scene, settings: dict[tuple[str, str], object]) -> None:
    for (owner, name), value in settings.items():
        with contextlib.suppress(ReferenceError):  # the previous camera object may be gone
            setattr(getattr(scene, owner) if owner else scene, name, value)


def _read_selection(paths: list[Path], warnings: list[str]) -> list[Capture | Sequence]:
    """Parse every selected file. With several selected (e.g. *Select All* in a CLI output folder), other JSONs
    (``.keypoints.json``, ``.openpose.json``) and frames that a selected sequence already holds are skipped
    with a warning instead of failing the batch or importing those frames twice."""
    parsed: list[Capture | Sequence] = []
    others: list[str] = []
    for path in paths:
        try:
            parsed.append(read_any(path, read_pixels=False))
        except NotACaptureError:
            if len(paths) == 1:
                raise
            others.append(path.name)
    if not parsed:
        raise BundleError(
            f"None of the {len(paths)} selected files is a Sapiens2 capture ({', '.join(others[:3])}, …). "
            "Pick the bundles' <name>.json or <name>.sequence.json files."
        )
    if others:
        warnings.append(
            f"Skipped {len(others)} file(s) that are not capture bundles: {', '.join(others[:5])}"
        )
    in_sequences = {c.json_path.resolve() for s in parsed if isinstance(s, Sequence) for c in s.frames}
    frames = [c for c in parsed if isinstance(c, Capture) and c.json_path.resolve() in in_sequences]
    if frames:
        warnings.append(f"Skipped {len(frames)} frame file(s) already imported through their .sequence.json.")
    kept = [item for item in parsed if not any(item is c for c in frames)]
    warnings.extend(note for item in kept for note in item.notes)  # e.g. 1.0 normals converted, once each
    return kept


def import_files(
    context, paths: list[Path | str], options: ImportOptions, progress: Progress | None = None
) -> ImportResult:
    """Import frames and/or sequences. Every file is parsed and validated before anything is created, and a
    failure while building removes everything this call created, so the scene is never left half-imported."""
    options.validate()
    report = progress or (lambda fraction, stage: None)
    result = ImportResult()
    parsed = _read_selection([Path(p) for p in paths], result.warnings)  # raises BundleError on any bad file
    created = CreatedData()
    scene_settings = _scene_settings(context.scene)
    # Leave edit/pose mode first, as Blender's importers do: the import becomes the active object, and an object
    # left behind in edit mode could not be switched back by the user.
    if context.object is not None and context.object.mode != "OBJECT" and bpy.ops.object.mode_set.poll():
        bpy.ops.object.mode_set(mode="OBJECT")
    try:
        for i, item in enumerate(parsed):

            def step(fraction: float, stage: str, i=i) -> None:
                report((i + fraction) / len(parsed), stage)

            if isinstance(item, Sequence):
                collection, made = import_sequence(context, item, options, created, step, result.warnings)
            else:
                collection, made = import_capture(context, item, options, created, step, result.warnings)
            result.collections.append(collection)
            result.objects.extend(made)
    except BaseException:
        created.remove_all()
        _restore_scene_settings(context.scene, scene_settings)
        raise
    _select(context.view_layer, result.objects)
    return result


def _select(view_layer, objects: list[bpy.types.Object]) -> None:
    """Select what was imported (and only that), the first armature active, as Blender's own importers do: the
    user can move it or frame it (View > Frame Selected) at once, and the N-panel shows it."""
    if not objects:
        return
    for obj in view_layer.objects:
        obj.select_set(False)
    for obj in objects:
        obj.select_set(True)
    view_layer.objects.active = next((o for o in objects if o.type == "ARMATURE"), objects[0])
