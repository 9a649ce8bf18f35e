"""How many bytes one frame's outputs take on disk, per layer and EXR compression, before anything is computed.

Why: the free-space check before a run (`preflight.py`) must neither let a job start that cannot fit nor refuse
one that does; an estimate that assumes nothing compresses asked ~5x what runs wrote. The factors below are
bytes per pixel measured on the files real runs wrote (`tests/core/studio/jobs/test_preflight_estimate.py` asserts that the
estimate stays between 1.0x and 1.5x of the bytes a run writes, for images and sequences, with and without
previews, for each compression). They were measured on network outputs with per-pixel detail (the least
compressible maps a model gives) over a photo, rounded up, so they bound such runs from above; smooth maps
(a pointmap masked to a small person, flat seg regions) compress further and are over-estimated.

Per frame of W×H pixels: the EXR's layers (`rgba` always; each task's declared `Task.layers`: pointmap = Z +
P.XYZ float + P.A half, normal/albedo = half RGB, seg = float id, mask = half, present with seg or matting,
matting = half matte RGBA) at the factor of the chosen compression, plus 16 bytes per row (chunk headers and offsets) and
4 KiB of header; the PNG previews each task draws (`Task.previews`); the bundle JSON (its tables + each person's 308 keypoints,
3D too with a pointmap), `.keypoints.json` and `.openpose.json` with pose, assuming one person per frame; the
mesh (`--mesh`) at 60 bytes per pixel (GLB, the larger format: position, normal, colour, two triangles), an
upper bound for a pointmap valid everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...tasks import registry as tasks_registry
from ...tasks.base import Preview, Task

# Bytes per pixel of the source photo's layer by compression ("none" is exact: the pixel types' sizes); each
# task declares its own layers' factors (`Task.layers`) and its previews' (`Task.previews`).
_RGBA_LAYER: dict[str, float] = {
    "none": 8,
    "zip": 4.0,
    "zips": 4.6,
}  # the source photo (half RGB) + an opaque A
_EXR_HEADER = 4096
_EXR_BYTES_PER_ROW = 16  # a chunk's y and size (8) and its offset-table entry (8), at most one chunk per row
_BUNDLE_JSON = 14 << 10  # the tables (keypoint names, skeleton, seg classes), camera, models, run record
_BUNDLE_JSON_PERSON = 18 << 10  # one person's bbox and 308 keypoints (x, y, score; 3D with a pointmap)
_KEYPOINTS_JSON = (8 << 10) + (11 << 10)  # `.keypoints.json`: names, skeleton + one person
_OPENPOSE_JSON = 7 << 10  # `.openpose.json`: one person
_MESH_BYTES_PER_PIXEL = 60
_FILE_SLACK = 4096  # a file's last disk block
SEQUENCE_INDEX_BYTES = 4096  # `<name>.sequence.json`: the frame list (small), one per sequence


def _tasks(names: Sequence[str]) -> list[Task]:
    return [tasks_registry.get(name) for name in names if tasks_registry.has(name)]


def exr_bytes_per_pixel(tasks: Sequence[str], compression: str) -> float:
    """Bytes per pixel of the bundle EXR for `tasks` written with `compression` (zip, zips, none); a layer two
    tasks write (the mask of seg and matting) counts once."""
    layers = {layer.name: layer for task in _tasks(tasks) for layer in task.layers}
    return _RGBA_LAYER[compression] + sum(layer.bytes_per_pixel[compression] for layer in layers.values())


def _previews(tasks: Sequence[str]) -> list[Preview]:
    return [preview for task in _tasks(tasks) for preview in task.previews]


def _keypoint_files(tasks: Sequence[str]) -> bool:
    """Whether a frame writes its people (bundle JSON people, `.keypoints.json`, `.openpose.json`)."""
    return any("people" in task.json_fields for task in _tasks(tasks))


def _mesh(tasks: Sequence[str], mesh: str | None) -> bool:
    return bool(mesh) and any(task.mesh for task in _tasks(tasks))


def frame_files(tasks: Sequence[str], *, previews: bool = True, mesh: str | None = None) -> int:
    """How many files one frame writes (each takes up to a disk block more than its bytes)."""
    count = 2 + (2 if _keypoint_files(tasks) else 0) + (1 if _mesh(tasks, mesh) else 0)
    if previews:
        count += len(_previews(tasks))
    return count


def estimate_frame_bytes(
    width: int,
    height: int,
    tasks: Sequence[str],
    *,
    previews: bool = True,
    mesh: str | None = None,
    compression: str = "zip",
) -> int:
    """The bytes one W×H frame's outputs take (formula and factors in the module docstring)."""
    pixels = int(width) * int(height)
    total = pixels * exr_bytes_per_pixel(tasks, compression) + _EXR_HEADER + _EXR_BYTES_PER_ROW * int(height)
    total += _BUNDLE_JSON
    if _keypoint_files(tasks):
        total += _BUNDLE_JSON_PERSON + _KEYPOINTS_JSON + _OPENPOSE_JSON
    if previews:
        total += pixels * sum(preview.bytes_per_pixel for preview in _previews(tasks))
    if _mesh(tasks, mesh):
        total += pixels * _MESH_BYTES_PER_PIXEL
    total += _FILE_SLACK // 2 * frame_files(tasks, previews=previews, mesh=mesh)
    return int(total)
