"""Capture frame or sequence → one USD stage: the pointmap mesh, each person's 308-joint skeleton, the camera.

Why USD: VFX pipelines (Houdini, Maya, Katana, Unreal, Omniverse, Blender) move assets as USD, and Pixar's own
`usd-core` (the optional `usd` extra) writes it. Layout, units and primvars: docs/formats.md §6.

Frame, converted once (`usd_scene.OPENCV_TO_USD`): the stage is Y-up, metres (`metersPerUnit` 1); the camera sits at the
origin with no transform and, as every USD camera, looks down −Z with +Y up, so the bundle's OpenCV camera frame
(x right, y down, z forward) becomes (x, −y, −z) — a 180° rotation about x (winding kept), the same frame as the
GLB/PLY export. Time codes are the bundle's frame numbers at the sequence's frame rate.

Bounded memory: a sequence's mesh changes topology every frame, and a USD layer keeps all it holds in memory, so
each frame's mesh goes into its own small crate file (`<stem>_frames/mesh_0001.usdc`…), written and released
before the next frame is read; the stage reaches them as value clips (one per frame), which every USD reader
resolves itself. Only the skeletons' joint positions (308 × 3 floats per person and frame) stay in memory.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .bundle import CaptureFrame, CapturePerson
from .usd_scene import (
    OPENCV_TO_USD,
    PRIMVARS,
    JointTree,
    MeshData,
    Track,
    UsdExportError,
    camera_lens,
    camera_of,
    filled,
    frames_of,
    joint_tree,
    keypoints_3d,
    mesh_data,
)

__all__ = [
    "FPS_ATTRIBUTE",
    "OPENCV_TO_USD",
    "ROOT",
    "USD_SUFFIXES",
    "JointTree",
    "UsdExportError",
    "UsdSummary",
    "export_usd",
    "joint_tree",
    "require_pxr",
    "write_usd",
]

ROOT = "/Capture"
USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")
FPS_ATTRIBUTE = "userProperties:sapiens2:framesPerSecond"  # the rate again, for Blender (see _author)
_DEFAULT_CLIP = (0.01, 100.0)


def require_pxr() -> Any:
    """The `pxr` package (usd-core), or an error that says how to install it."""
    try:
        import pxr
        from pxr import Usd  # noqa: F401  (the compiled core: a broken install fails here, not later)
    except ImportError as exc:
        install = "install it: pip install 'sapiens2-studio[usd]' (or: pip install usd-core)"
        raise UsdExportError(
            "USD export needs Pixar's 'usd-core' package, which is not installed",
            hints={
                "python": install,
                "cli": install,
                "comfyui": f"install it into ComfyUI's Python:  {sys.executable} -m pip install usd-core   then "
                "restart ComfyUI",
            },
        ) from exc
    return pxr


@dataclass
class UsdSummary:
    """What `write_usd` wrote: the stage file, the clip files beside it, and what the stage holds."""

    path: Path
    frames: int
    fps: float
    start: int
    end: int
    people: int
    vertices: int  # in the largest frame's mesh
    clip_files: list[Path] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ writing


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in USD_SUFFIXES:
        raise UsdExportError(f"{path}: the USD file must end in {', '.join(USD_SUFFIXES)}")
    return suffix


def write_usd(
    frames: Iterable[CaptureFrame],
    path: str | os.PathLike[str],
    *,
    fps: float = 24.0,
    name: str = "capture",
    max_edge_ratio: float = 0.05,
) -> UsdSummary:
    """Write the frames (one image, or a sequence in order) as one stage at `path` (.usd/.usda/.usdc/.usdz).

    A sequence's meshes go one per frame into `<stem>_frames/` beside the stage (inside the package for .usdz),
    each written and released before the next frame is read (two frames are read before the first is written:
    one frame makes a still stage, more an animated one)."""
    pxr = require_pxr()
    from pxr import Sdf, Usd, UsdGeom, UsdSkel, Vt

    out = Path(path)
    suffix = _suffix(out)
    if not out.parent.is_dir():
        raise UsdExportError(f"{out.parent}: the folder for the USD file does not exist")
    if not (fps > 0 and math.isfinite(fps)):
        raise UsdExportError(f"the frame rate must be a positive number, got {fps}")
    frames = iter(frames)
    first = next(frames, None)
    if first is None:
        raise UsdExportError("no capture frames to export")
    second = next(frames, None)
    animated = second is not None

    def all_frames() -> Iterator[CaptureFrame]:
        yield first
        if second is not None:
            yield second
            yield from frames

    staging = Path(tempfile.mkdtemp(prefix=".usd-", dir=out.parent)) if suffix == ".usdz" else None
    stage_path = (staging / f"{out.stem}.usdc") if staging else out
    clip_dir_name = f"{out.stem}_frames"
    clip_dir = stage_path.parent / clip_dir_name
    try:
        summary = _author(
            pxr, Sdf, Usd, UsdGeom, UsdSkel, Vt, all_frames(), stage_path, clip_dir, clip_dir_name,
            animated=animated, fps=float(fps), name=name, max_edge_ratio=max_edge_ratio,
        )  # fmt: skip
        if staging is not None:
            from pxr import UsdUtils

            tmp = out.with_name(f".{out.name}.tmp.usdz")
            if not UsdUtils.CreateNewUsdzPackage(Sdf.AssetPath(str(stage_path)), str(tmp)):
                raise UsdExportError(f"{out}: usd-core could not write the .usdz package")
            os.replace(tmp, out)
            summary.path, summary.clip_files = out, []
        return summary
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _author(pxr, Sdf, Usd, UsdGeom, UsdSkel, Vt, frames, stage_path, clip_dir, clip_dir_name, *, animated,
            fps, name, max_edge_ratio) -> UsdSummary:  # fmt: skip
    """Author the stage (and, for a sequence, one clip file per frame)."""
    if stage_path.exists():
        stage_path.unlink()
    stage = Usd.Stage.CreateNew(str(stage_path))
    root = UsdGeom.Xform.Define(stage, ROOT)
    stage.SetDefaultPrim(root.GetPrim())
    Usd.ModelAPI(root).SetKind("assembly")
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.y)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    stage.SetTimeCodesPerSecond(fps)
    stage.SetFramesPerSecond(fps)
    # Blender's USD importer ignores the two above (its scene keeps its own rate) but imports custom attributes:
    # this one arrives as the root empty's `sapiens2:framesPerSecond`, which the add-on's USD import applies.
    root.GetPrim().CreateAttribute(FPS_ATTRIBUTE, Sdf.ValueTypeNames.Double, custom=True).Set(fps)

    mesh_path = f"{ROOT}/Pointmap/Mesh"
    clips: list[tuple[float, str]] = []
    declared: dict[str, str] = {}
    tracks: dict[int, Track] = {}
    cameras: list[tuple[float, dict[str, float]]] = []
    depth_range = [math.inf, 0.0]
    size: tuple[int, int] | None = None
    max_vertices = 0
    times: list[float] = []
    if animated:
        if clip_dir.exists():
            shutil.rmtree(clip_dir)
        clip_dir.mkdir(parents=True)
    mesh_prim = None
    for index, frame in enumerate(frames):
        if size is None:
            size = (frame.width, frame.height)
        elif size != (frame.width, frame.height):
            raise UsdExportError(
                f"frame {frame.frame}: {frame.width}x{frame.height}, but the sequence started at "
                f"{size[0]}x{size[1]}; every frame of one stage must have the same size"
            )
        time = float(frame.frame if frame.frame is not None else index + 1) if animated else 1.0
        if times and time <= times[-1]:
            raise UsdExportError(f"frame numbers must increase, got {int(time)} after {int(times[-1])}")
        times.append(time)
        cameras.append((time, camera_lens(camera_of(frame), frame.width, frame.height)))
        data = mesh_data(frame, max_edge_ratio)
        if data is not None:
            max_vertices = max(max_vertices, len(data.points))
            if len(data.points):
                depth = -data.points[:, 2]
                depth_range[0] = min(depth_range[0], float(depth.min()))
                depth_range[1] = max(depth_range[1], float(depth.max()))
            if mesh_prim is None:
                mesh_prim = _define_mesh(stage, UsdGeom, Usd, mesh_path)
            if animated:
                clip_name = f"mesh_{int(time):04d}.usdc"
                _write_clip(Usd, UsdGeom, Vt, clip_dir / clip_name, mesh_path, data, time, declared)
                clips.append((time, f"./{clip_dir_name}/{clip_name}"))
            else:
                _set_mesh(UsdGeom, Vt, UsdGeom.Mesh(mesh_prim), data, Usd.TimeCode.Default(), declared)
        for index_in_frame, raw in enumerate(frame.people):
            person = CapturePerson.coerce(raw, index_in_frame)
            key = int(person.track_id) if person.track_id is not None else index_in_frame
            track = tracks.setdefault(key, Track(key))
            kp3d = keypoints_3d(person, frame)
            positions = np.full((308, 3), np.nan) if kp3d is None else kp3d * OPENCV_TO_USD
            track.times.append(time)
            track.positions.append(positions)
            track.scores.append(np.asarray(person.keypoints, np.float32)[:, 2])
    if size is None:
        raise UsdExportError("no capture frames to export")
    if mesh_prim is not None:
        _declare_primvars(UsdGeom, Sdf, UsdGeom.Mesh(mesh_prim), declared)
        if animated:
            _bind_clips(Usd, Sdf, mesh_prim, clips, mesh_path, clip_dir, declared)
    _define_camera(UsdGeom, Sdf, stage, cameras, depth_range)
    people = _define_people(Usd, UsdGeom, UsdSkel, Sdf, Vt, stage, tracks, times, animated)
    stage.SetStartTimeCode(times[0])
    stage.SetEndTimeCode(times[-1])
    stage.GetRootLayer().customLayerData = {
        "sapiens2": {
            "source": str(name),
            "frame": "OpenCV camera frame (x right, y down, z forward) -> USD (x, -y, -z): camera at the origin "
            "looking down -Z, +Y up, metres",
            "image_width": size[0],
            "image_height": size[1],
        }
    }
    stage.GetRootLayer().Save()
    del pxr
    return UsdSummary(
        path=stage_path,
        frames=len(times),
        fps=fps,
        start=int(times[0]),
        end=int(times[-1]),
        people=people,
        vertices=max_vertices,
        clip_files=[clip_dir / Path(p).name for _, p in clips],
    )


def _define_mesh(stage, UsdGeom, Usd, mesh_path: str):
    pointmap = UsdGeom.Xform.Define(stage, mesh_path.rsplit("/", 1)[0])
    Usd.ModelAPI(pointmap).SetKind("component")
    mesh = UsdGeom.Mesh.Define(stage, mesh_path)
    mesh.CreatePurposeAttr(UsdGeom.Tokens.render)
    mesh.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    mesh.CreateOrientationAttr(UsdGeom.Tokens.rightHanded)
    mesh.CreateDoubleSidedAttr(True)
    mesh.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
    return mesh.GetPrim()


def _set_mesh(UsdGeom, Vt, mesh, data: MeshData, time, declared: dict[str, str]) -> None:
    """Author one frame's mesh values at `time` (the default time for a single frame)."""
    points = Vt.Vec3fArray.FromNumpy(data.points)
    mesh.CreatePointsAttr().Set(points, time)
    mesh.CreateFaceVertexCountsAttr().Set(
        Vt.IntArray.FromNumpy(np.full(len(data.indices) // 3, 3, np.int32)), time
    )
    mesh.CreateFaceVertexIndicesAttr().Set(Vt.IntArray.FromNumpy(data.indices), time)
    mesh.CreateNormalsAttr().Set(Vt.Vec3fArray.FromNumpy(data.normals), time)
    extent = (
        [tuple(map(float, data.points.min(axis=0))), tuple(map(float, data.points.max(axis=0)))]
        if len(data.points)
        else [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)]
    )
    mesh.CreateExtentAttr().Set(Vt.Vec3fArray(extent), time)
    api = UsdGeom.PrimvarsAPI(mesh)
    from pxr import Sdf

    st = api.CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray, UsdGeom.Tokens.vertex)
    st.Set(Vt.Vec2fArray.FromNumpy(data.st), time)
    declared.setdefault("primvars:st", "texCoord2f[]")
    for name, values in data.primvars.items():
        type_name = getattr(Sdf.ValueTypeNames, PRIMVARS[name])
        primvar = api.CreatePrimvar(name, type_name, UsdGeom.Tokens.vertex)
        converter = {"Color3fArray": Vt.Vec3fArray, "FloatArray": Vt.FloatArray, "IntArray": Vt.IntArray}
        primvar.Set(converter[PRIMVARS[name]].FromNumpy(np.ascontiguousarray(values)), time)
        declared.setdefault(f"primvars:{name}", str(type_name))
    for attr in ("points", "faceVertexCounts", "faceVertexIndices", "normals", "extent"):
        declared.setdefault(attr, str(mesh.GetPrim().GetAttribute(attr).GetTypeName()))


def _write_clip(Usd, UsdGeom, Vt, path: Path, mesh_path: str, data: MeshData, time: float, declared) -> None:
    """One frame's mesh as its own crate layer (a value clip), written and released at once."""
    clip = Usd.Stage.CreateNew(str(path))
    mesh = UsdGeom.Mesh.Define(clip, mesh_path)
    _set_mesh(UsdGeom, Vt, mesh, data, Usd.TimeCode(time), declared)
    clip.GetRootLayer().Save()
    del clip


def _declare_primvars(UsdGeom, Sdf, mesh, declared: dict[str, str]) -> None:
    """Primvars with their interpolation in the stage's own layer: clips give values, never metadata."""
    api = UsdGeom.PrimvarsAPI(mesh)
    for attr, type_name in declared.items():
        if attr.startswith("primvars:"):
            api.CreatePrimvar(
                attr.split(":", 1)[1], Sdf.ValueTypeNames.Find(type_name), UsdGeom.Tokens.vertex
            )
    mesh.SetNormalsInterpolation(UsdGeom.Tokens.vertex)


def _bind_clips(Usd, Sdf, prim, clips, mesh_path: str, clip_dir: Path, declared: dict[str, str]) -> None:
    """The stage reads frame i's mesh from clip i (held until the next frame), as declared by a manifest."""
    manifest_path = clip_dir / "manifest.usda"
    manifest = Sdf.Layer.CreateNew(str(manifest_path))
    spec = Sdf.CreatePrimInLayer(manifest, mesh_path)
    spec.specifier = Sdf.SpecifierOver
    for attr, type_name in declared.items():
        Sdf.AttributeSpec(spec, attr, Sdf.ValueTypeNames.Find(type_name))
    manifest.Save()
    api = Usd.ClipsAPI(prim)
    api.SetClipAssetPaths([Sdf.AssetPath(p) for _, p in clips])
    api.SetClipPrimPath(mesh_path)
    api.SetClipActive([(t, float(i)) for i, (t, _) in enumerate(clips)])
    api.SetClipTimes([(t, t) for t, _ in clips])
    api.SetClipManifestAssetPath(Sdf.AssetPath(f"./{clip_dir.name}/manifest.usda"))


def _define_camera(UsdGeom, Sdf, stage, cameras, depth_range) -> None:
    """The plate's camera at the origin (no transform: the stage's frame is the camera's)."""
    camera = UsdGeom.Camera.Define(stage, f"{ROOT}/Camera")
    camera.CreateProjectionAttr(UsdGeom.Tokens.perspective)
    near, far = _DEFAULT_CLIP
    if math.isfinite(depth_range[0]) and depth_range[1] > 0:
        near = max(1e-3, 0.5 * depth_range[0])
        far = max(near * 10.0, 2.0 * depth_range[1])
    from pxr import Gf

    camera.CreateClippingRangeAttr(Gf.Vec2f(near, far))
    first = cameras[0][1]
    constant = all(values == first for _, values in cameras)
    for key in first:
        attr = camera.GetPrim().GetAttribute(key)
        if constant:
            attr.Set(float(first[key]))
        else:
            for time, values in cameras:
                attr.Set(float(values[key]), time)


def _define_people(Usd, UsdGeom, UsdSkel, Sdf, Vt, stage, tracks, times, animated) -> int:
    """One SkelRoot per person: a 308-joint Skeleton and its SkelAnimation (joint translations per frame; a
    person missing in a frame holds the nearest pose there and is invisible)."""
    if not tracks:
        return 0
    from pxr import Gf

    tree = joint_tree()
    paths, order = tree.paths, np.array(tree.keypoints)
    parent = np.array(tree.parents)
    people = UsdGeom.Xform.Define(stage, f"{ROOT}/People")
    Usd.ModelAPI(people).SetKind("group")  # a model between the assembly and each person's component
    count = len(paths)
    for key in sorted(tracks):
        track = tracks[key]
        base = f"{ROOT}/People/Person_{key}" if key >= 0 else f"{ROOT}/People/Person_m{-key}"
        skel_root = UsdSkel.Root.Define(stage, base)
        Usd.ModelAPI(skel_root).SetKind("component")
        skeleton = UsdSkel.Skeleton.Define(stage, f"{base}/Skeleton")
        anim = UsdSkel.Animation.Define(stage, f"{base}/Animation")
        skeleton.CreateJointsAttr(Vt.TokenArray(list(paths)))
        skeleton.CreateJointNamesAttr(Vt.TokenArray([p.rsplit("/", 1)[-1] for p in paths]))
        anim.CreateJointsAttr(Vt.TokenArray(list(paths)))
        present = np.stack(track.positions)[:, order]  # (T, J, 3) in joint order, NaN where unknown
        valid = np.isfinite(present).all(axis=2)
        world = filled(present)
        local = world.copy()
        has_parent = parent >= 0
        local[:, has_parent] = world[:, has_parent] - world[:, parent[has_parent]]
        rest = local[0]
        skeleton.CreateRestTransformsAttr(
            Vt.Matrix4dArray([Gf.Matrix4d(1.0).SetTranslate(Gf.Vec3d(*map(float, t))) for t in rest])
        )
        skeleton.CreateBindTransformsAttr(
            Vt.Matrix4dArray([Gf.Matrix4d(1.0).SetTranslate(Gf.Vec3d(*map(float, p))) for p in world[0]])
        )
        anim.CreateRotationsAttr().Set(Vt.QuatfArray([Gf.Quatf(1.0)] * count))
        anim.CreateScalesAttr().Set(Vt.Vec3hArray([Gf.Vec3h(1.0, 1.0, 1.0)] * count))
        translations = anim.CreateTranslationsAttr()
        valid_attr = skeleton.GetPrim().CreateAttribute(
            "sapiens2:keypointValid", Sdf.ValueTypeNames.BoolArray
        )
        score_attr = skeleton.GetPrim().CreateAttribute(
            "sapiens2:keypointScore", Sdf.ValueTypeNames.FloatArray
        )
        index_attr = skeleton.GetPrim().CreateAttribute("sapiens2:keypointIndex", Sdf.ValueTypeNames.IntArray)
        index_attr.Set(Vt.IntArray(list(map(int, order))))
        index = {t: i for i, t in enumerate(track.times)}
        visibility = skel_root.CreateVisibilityAttr()
        for time in times:
            i = index.get(time)
            shown = i is not None
            if i is None:  # absent here: hold the nearest earlier (else later) pose, hidden
                earlier = [k for k, t in enumerate(track.times) if t < time]
                i = earlier[-1] if earlier else 0
            code = Usd.TimeCode(time) if animated else Usd.TimeCode.Default()
            translations.Set(Vt.Vec3fArray.FromNumpy(local[i].astype(np.float32)), code)
            valid_attr.Set(Vt.BoolArray(list(map(bool, valid[i] & shown))), code)
            score_attr.Set(
                Vt.FloatArray.FromNumpy(np.nan_to_num(track.scores[i][order]).astype(np.float32)), code
            )
            if animated:
                visibility.Set(UsdGeom.Tokens.inherited if shown else UsdGeom.Tokens.invisible, code)
        binding = UsdSkel.BindingAPI.Apply(skeleton.GetPrim())
        binding.CreateAnimationSourceRel().SetTargets([anim.GetPath()])
        root_binding = UsdSkel.BindingAPI.Apply(skel_root.GetPrim())
        root_binding.CreateSkeletonRel().SetTargets([skeleton.GetPath()])
    return len(tracks)


def export_usd(
    source: Any,
    path: str | os.PathLike[str],
    *,
    fps: float | None = None,
    max_edge_ratio: float = 0.05,
) -> UsdSummary:
    """Export a bundle JSON, a sequence index, a CaptureFrame or frames to a USD file; `fps` overrides the
    sequence's frame rate (default: the index's, 24 for frames given in memory)."""
    frames, seq_fps, name = frames_of(source)
    rate = fps if fps is not None else (seq_fps if seq_fps is not None else 24.0)
    return write_usd(frames, path, fps=rate, name=name, max_edge_ratio=max_edge_ratio)
