"""How many bytes one frame's outputs take on disk, per layer and EXR compression, before anything is computed.

Why: the free-space check before a run (`preflight.py`) must neither let a job start that cannot fit nor refuse
one that does; an estimate that assumes nothing compresses asked ~5x what runs wrote. The factors below are
bytes per pixel measured on the files real runs wrote (`tests/test_preflight_estimate.py` asserts that the
estimate stays between 1.0x and 1.5x of the bytes a run writes, for images and sequences, with and without
previews, for each compression). They were measured on network outputs with per-pixel detail (the least
compressible maps a model gives) over a photo, rounded up, so they bound such runs from above; smooth maps
(a pointmap masked to a small person, flat seg regions) compress further and are over-estimated.

Per frame of W×H pixels: the EXR's layers (`rgba` always; the task's channels: pointmap = Z + P.XYZ float +
P.A half, normal/albedo = half RGB, seg = float id, mask = half, present with seg or matting, matting = half
matte RGBA) at the factor of the chosen compression, plus 16 bytes per row (chunk headers and offsets) and
4 KiB of header; the PNG previews each task draws; the bundle JSON (its tables + each person's 308 keypoints,
3D too with a pointmap), `.keypoints.json` and `.openpose.json` with pose, assuming one person per frame; the
mesh (`--mesh`) at 60 bytes per pixel (GLB, the larger format: position, normal, colour, two triangles), an
upper bound for a pointmap valid everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

# Bytes per pixel of each EXR layer by compression. "none" is exact (the pixel types' sizes).
_EXR_LAYERS: dict[str, dict[str, float]] = {
    "rgba": {"none": 8, "zip": 4.0, "zips": 4.6},  # the source photo (half RGB) + an opaque A
    "pointmap": {"none": 18, "zip": 10.5, "zips": 10.9},  # Z, P.X/Y/Z float + P.A half
    "normal": {"none": 6, "zip": 5.9, "zips": 6.0},
    "albedo": {"none": 6, "zip": 5.8, "zips": 6.0},
    "seg": {"none": 4, "zip": 0.9, "zips": 1.05},  # float class ids: flat regions
    "mask": {"none": 2, "zip": 0.1, "zips": 0.25},
    "matting": {"none": 8, "zip": 6.2, "zips": 6.4},  # matte A + pre-multiplied RGB, half
}
_LAYERS_OF_TASK = {
    "pose": (),
    "seg": ("seg", "mask"),
    "normal": ("normal",),
    "albedo": ("albedo",),
    "pointmap": ("pointmap",),
    "matting": ("matting", "mask"),
}
# Bytes per pixel of each PNG preview (8-bit RGB or RGBA, deflated), and the task that draws it.
_PREVIEWS: dict[str, tuple[str, float]] = {
    "pose": ("pose", 1.9),  # the photo with the skeleton: compresses as the photo does
    "seg": ("seg", 0.7),
    "normal": ("normal", 3.05),
    "depth": ("pointmap", 1.8),
    "albedo": ("albedo", 2.6),
    "alpha": ("matting", 0.85),
    "foreground": ("matting", 3.05),
}
_EXR_HEADER = 4096
_EXR_BYTES_PER_ROW = 16  # a chunk's y and size (8) and its offset-table entry (8), at most one chunk per row
_BUNDLE_JSON = 14 << 10  # the tables (keypoint names, skeleton, seg classes), camera, models, run record
_BUNDLE_JSON_PERSON = 18 << 10  # one person's bbox and 308 keypoints (x, y, score; 3D with a pointmap)
_KEYPOINTS_JSON = (8 << 10) + (11 << 10)  # `.keypoints.json`: names, skeleton + one person
_OPENPOSE_JSON = 7 << 10  # `.openpose.json`: one person
_MESH_BYTES_PER_PIXEL = 60
_FILE_SLACK = 4096  # a file's last disk block
SEQUENCE_INDEX_BYTES = 4096  # `<name>.sequence.json`: the frame list (small), one per sequence


def exr_bytes_per_pixel(tasks: Sequence[str], compression: str) -> float:
    """Bytes per pixel of the bundle EXR for `tasks` written with `compression` (zip, zips, none)."""
    layers = {"rgba"} | {layer for task in tasks for layer in _LAYERS_OF_TASK.get(task, ())}
    return sum(_EXR_LAYERS[layer][compression] for layer in layers)


def frame_files(tasks: Sequence[str], *, previews: bool = True, mesh: str | None = None) -> int:
    """How many files one frame writes (each takes up to a disk block more than its bytes)."""
    count = 2 + (2 if "pose" in tasks else 0) + (1 if mesh and "pointmap" in tasks else 0)
    if previews:
        count += sum(1 for task, _ in _PREVIEWS.values() if task in tasks)
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
    if "pose" in tasks:
        total += _BUNDLE_JSON_PERSON + _KEYPOINTS_JSON + _OPENPOSE_JSON
    if previews:
        total += pixels * sum(rate for task, rate in _PREVIEWS.values() if task in tasks)
    if mesh and "pointmap" in tasks:
        total += pixels * _MESH_BYTES_PER_PIXEL
    total += _FILE_SLACK // 2 * frame_files(tasks, previews=previews, mesh=mesh)
    return int(total)
