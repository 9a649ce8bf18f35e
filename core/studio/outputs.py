"""Write one image's results: capture bundle + PNG previews + keypoint JSONs (+ mesh), as one transaction.

All files go to temporaries first and are committed together with the bundle JSON last (`transaction.py`), so an
output folder only ever shows a frame whose whole file set is complete and of one run. Every JSON written here is
strict JSON: a non-finite number (a model's NaN) becomes null (`.keypoints.json`) or OpenPose's "not detected"
0, 0, 0 (`.openpose.json`, whose consumers expect numbers), never the bare `NaN` that JSON parsers reject.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..formats.bundle import CaptureFrame, CapturePerson
from ..formats.mesh import pointmap_to_mesh, write_mesh
from ..tasks import registry as tasks_registry
from ..tasks.base import Preview, Task
from ..timing import stage
from .drawing import pose_preview
from .half_cast import torch_half
from .previews import (
    albedo_preview,
    alpha_preview,
    cutout_preview,
    depth_colours_u8,
    depth_ranges,
    normal_map,
    save_png,
    seg_colours_u8,
    to_uint8,
    valid_z,
)
from .transaction import FrameTransaction

KEYPOINTS_FORMAT = "sapiens2-keypoints"
_MESH_SUFFIXES = (".ply", ".glb")


def output_suffixes() -> tuple[str, ...]:
    """Every file `write_frame_outputs` can write for `<name>` (each registered task's previews included): a
    re-run replaces the whole set, so a file that this run does not produce (a preview of a task not run now, a
    mesh not asked for) is removed rather than left stale."""
    previews = tuple(f".{preview.suffix}.png" for _, preview in _all_previews())
    return (
        ".exr",
        ".json",
        *previews,
        ".keypoints.json",
        ".openpose.json",
        *_MESH_SUFFIXES,
        ".pending.npz",  # a pending frame's sidecar (stages.py), removed when finalize commits the frame
    )


def _all_previews() -> list[tuple[Task, Preview]]:
    """Every registered task's previews, in the order a frame writes them (`Preview.rank`)."""
    found = [(task, preview) for task in tasks_registry.all_tasks() for preview in task.previews]
    return sorted(found, key=lambda pair: pair[1].rank)


OUTPUT_SUFFIXES = (
    output_suffixes()
)  # the built-in tasks' set; `output_suffixes()` includes plug-ins loaded later

PREVIEW_BAND_ROWS = 256  # rows of a preview drawn at a time (a 9000-wide photo: 256 × 9000 × 3 floats, 28 MB)


def preview_makers(frame: CaptureFrame, image: np.ndarray) -> dict[str, Callable[[], np.ndarray]]:
    """Suffix → a function drawing that preview as uint8 (the same previews ComfyUI's nodes show).

    Why functions: the job draws each preview just before its PNG is written, one at a time, and in row bands
    (`_in_bands`), so a 9000×6000 frame never holds its float previews (648 MB each) nor, for banded maps
    (docs/pipeline.md), the maps whole. Every step is per pixel, so the bands give the whole image's bytes."""
    makers: dict[str, Callable[[], np.ndarray]] = {}
    mask = None if frame.mask is None else np.asarray(frame.mask) > 0.5
    for task, preview in _all_previews():
        if preview.draw is not None:
            make = preview.draw(frame, image)
        else:
            make = _DRAWERS[preview.kind](task, preview, frame, image, mask)
        if make is not None:
            makers[preview.suffix] = make
    return makers


Maker = Callable[[], np.ndarray]


def _skeleton(
    task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any
) -> Maker | None:
    if not task.stored(frame):
        return None
    return lambda: to_uint8(pose_preview(image, getattr(frame, preview.source)))


def _banded(draw: Callable[[Any, slice, Any], Any]) -> Callable[..., Maker | None]:
    """A drawer of a per-pixel preview of the frame attribute `preview.source`, drawn in row bands."""

    def drawer(
        task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any
    ) -> Maker | None:
        data = getattr(frame, preview.source)
        if data is None:
            return None
        return lambda: _in_bands(frame.height, lambda rows: draw(data, rows, mask))

    return drawer


def _depth(task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any) -> Maker | None:
    points = getattr(frame, preview.source)
    return None if points is None else (lambda: _depth_preview(points, mask, frame.height))


def _cutout(task: Task, preview: Preview, frame: CaptureFrame, image: np.ndarray, mask: Any) -> Maker | None:
    foreground, alpha = getattr(frame, preview.source), frame.alpha
    if foreground is None or alpha is None:
        return None
    return lambda: _in_bands(frame.height, lambda rows: cutout_preview(foreground[rows], alpha[rows]))


# The studio's preview drawers by `Preview.kind` (a task without its own `Preview.draw` names one of these).
_DRAWERS: dict[str, Callable[..., Maker | None]] = {
    "skeleton": _skeleton,
    "classes": _banded(lambda data, rows, mask: seg_colours_u8(data[rows])),
    "normals": _banded(
        lambda data, rows, mask: normal_map(data[rows], mask=None if mask is None else mask[rows])
    ),
    "depth": _depth,
    "colour": _banded(lambda data, rows, mask: albedo_preview(data[rows])),
    "matte": _banded(lambda data, rows, mask: alpha_preview(data[rows])),
    "cutout": _cutout,
}


def preview_images(frame: CaptureFrame, image: np.ndarray) -> dict[str, np.ndarray]:
    """Suffix → uint8 preview image for every layer the frame holds (all drawn now; see `preview_makers`)."""
    return {suffix: render_preview(make) for suffix, make in preview_makers(frame, image).items()}


def render_preview(make: Callable[[], np.ndarray]) -> np.ndarray:
    """Draw one preview (the benchmarks' `previews.render` stage)."""
    return make()


def _in_bands(height: int, draw: Callable[[slice], Any]) -> np.ndarray:
    """A uint8 image drawn `PREVIEW_BAND_ROWS` rows at a time by `draw(rows)` (float or uint8 rows)."""
    out: np.ndarray | None = None
    for top in range(0, height, PREVIEW_BAND_ROWS):
        rows = slice(top, min(top + PREVIEW_BAND_ROWS, height))
        band = to_uint8(draw(rows))
        if out is None:
            out = np.empty((height, *band.shape[1:]), np.uint8)
        out[rows] = band
    assert out is not None, "a frame has at least one row"
    return out


def _depth_preview(points: Any, mask: np.ndarray | None, height: int) -> np.ndarray:
    """The depth preview: its range from the whole map's valid depths, its colours drawn in bands."""
    depth, valid = valid_z(points[:, :, 2], mask)  # Z alone (216 MB at 9000×6000), not the points
    (depth_range,) = depth_ranges([depth], [valid], per_image=True)
    return _in_bands(height, lambda rows: depth_colours_u8(depth[rows], valid[rows], depth_range))


def _number(value: Any, digits: int) -> float | None:
    """A rounded float for JSON, or None for NaN/inf."""
    v = float(value)
    return round(v, digits) if math.isfinite(v) else None


def keypoints_document(frame: CaptureFrame, name: str) -> dict[str, Any]:
    """A small JSON with just the 2D keypoints (for tools that do not want EXR)."""
    from ..formats.bundle import metadata_tables

    names, skeleton, _ = metadata_tables()
    people = []
    for index, raw in enumerate(frame.people):
        person = CapturePerson.coerce(raw, index)
        people.append(
            {
                "id": index,
                "bbox": [_number(v, 3) for v in person.bbox],
                "bbox_source": person.bbox_source,
                **({} if person.track_id is None else {"track_id": person.track_id}),
                "keypoints": [[_number(x, 3), _number(y, 3), _number(s, 4)] for x, y, s in person.keypoints],
            }
        )
    return {
        "format": KEYPOINTS_FORMAT,
        "version": "1.0",
        "name": name,
        "frame": frame.frame,
        "image": {"width": frame.width, "height": frame.height, "source": frame.source_name},
        "people": people,
        "keypoint_names": names,
        "skeleton": skeleton,
    }


def _openpose_points(values: Any) -> Any:
    """A flat [x, y, c, x, y, c, …] list with every triplet holding NaN/inf replaced by OpenPose's 0, 0, 0."""
    if not isinstance(values, list):
        return values
    out = []
    for i in range(0, len(values) - len(values) % 3, 3):
        triplet = values[i : i + 3]
        finite = all(isinstance(v, (int, float)) and math.isfinite(v) for v in triplet)
        out += triplet if finite else [0.0, 0.0, 0.0]
    return out


def openpose_document(frame: CaptureFrame) -> dict[str, Any]:
    """OpenPose-style JSON (ComfyUI POSE_KEYPOINT frame, the default "openpose" format, which ControlNet tools
    read): 18 body + 6 feet + 70 face + 2x21 hand points per person."""
    from ..formats.keypoints import person_to_openpose

    people = [
        {
            key: _openpose_points(value)
            for key, value in person_to_openpose(CapturePerson.coerce(p, i).keypoints).items()
        }
        for i, p in enumerate(frame.people)
    ]
    return {"version": 1.3, "people": people, "canvas_width": frame.width, "canvas_height": frame.height}


def _json_writer(doc: dict[str, Any]) -> Callable[[Path], None]:
    text = json.dumps(doc, allow_nan=False)  # fails loudly rather than write invalid JSON
    return lambda path: path.write_text(text, encoding="utf-8")


def frame_files(
    frame: CaptureFrame,
    image: np.ndarray,
    name: str,
    *,
    with_previews: bool = True,
    mesh_format: str | None = None,
) -> dict[str, Callable[[Path], Any]]:
    """File name → writer for every file of `<name>` besides the bundle: previews, keypoint JSONs, mesh."""
    files: dict[str, Callable[[Path], Any]] = {}
    if with_previews:
        for suffix, make in preview_makers(frame, image).items():
            files[f"{name}.{suffix}.png"] = lambda path, make=make: _write_preview(path, make)
    if any("people" in task.json_fields and task.stored(frame) for task in tasks_registry.all_tasks()):
        with stage("keypoints_json"):
            files[f"{name}.keypoints.json"] = _json_writer(keypoints_document(frame, name))
            files[f"{name}.openpose.json"] = _json_writer(openpose_document(frame))
    if mesh_format and frame.points is not None:
        mesh = pointmap_to_mesh(frame.points, colors=to_uint8(image), mask=frame.mask, normals=frame.normals)
        if len(mesh.faces):
            files[f"{name}.{mesh_format}"] = lambda path: write_mesh(path, mesh)
    return files


def _write_preview(path: Path, make: Callable[[], np.ndarray]) -> None:
    with stage("previews.render"):
        pixels = render_preview(make)
    with stage("previews.png"):
        save_png(path, pixels)


def write_frame_outputs(
    folder: str | os.PathLike,
    name: str,
    frame: CaptureFrame,
    image: np.ndarray,
    *,
    with_previews: bool = True,
    mesh_format: str | None = None,
    extra: Mapping[str, Callable[[Path], Any]] | None = None,
    exr_compression: str | None = None,
) -> Path:
    """Write `<name>.exr/.json`, previews `<name>.<layer>.png`, `<name>.keypoints.json`, `<name>.openpose.json`
    and optionally `<name>.ply|.glb` (and the files of `extra`: final name → writer) as one transaction; files
    of an earlier run for `<name>` that this set does not hold are removed (see `output_suffixes`).
    `exr_compression`: the bundle EXR's (`bundle.EXR_COMPRESSIONS`; None: the default).

    Returns the bundle JSON path.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with FrameTransaction(folder, name) as tx:
        files = frame_files(frame, image, name, with_previews=with_previews, mesh_format=mesh_format)
        for final, write in {**files, **(extra or {})}.items():
            tx.stage(final, write)
        with stage("bundle.exr"):
            tx.stage_bundle(frame, compression=exr_compression, half=torch_half)
        with stage("bundle.json"):
            return tx.commit(obsolete=output_names(name))


def rewrite_frame_outputs(
    folder: Path,
    name: str,
    frame: CaptureFrame,
    files: Mapping[str, Callable[[Path], Any]],
    *,
    points_changed: bool,
    keep: set[str],
) -> Path:
    """Commit a frame read back from its bundle with changed people/camera/scale (and points): the files in
    `files` are written anew, those in `keep` stay as committed (listed in the new `run.files`), the EXR is
    restaged from the committed one in its own compression (`restage_bundle`), every
    other file of `<name>` is removed. One transaction, like `write_frame_outputs`."""
    with FrameTransaction(folder, name) as tx:
        for final, write in files.items():
            tx.stage(final, write)
        tx.keep(sorted(keep - set(files)))
        tx.stage_bundle(
            frame, source_exr=folder / f"{name}.exr", points_changed=points_changed, half=torch_half
        )
        return tx.commit(obsolete=output_names(name))


def output_names(name: str) -> list[str]:
    """Every file name `write_frame_outputs` can write for `<name>`."""
    return [f"{name}{suffix}" for suffix in output_suffixes()]


def remove_outputs(folder: Path, name: str, keep: set[str] | frozenset[str] = frozenset()) -> None:
    """Delete the files a previous run wrote for `<name>` (see `output_suffixes`), except those in `keep`; the JSON
    first, so that a run stopped half-way leaves no JSON claiming files that are gone."""
    for suffix in (".json", *(s for s in output_suffixes() if s != ".json")):
        if f"{name}{suffix}" not in keep:
            with contextlib.suppress(FileNotFoundError):
                (folder / f"{name}{suffix}").unlink()


def stale_frames(folder: Path, sequence: str, keep: set[int]) -> list[int]:
    """Frame numbers not in `keep` that a previous run of the same sequence (longer, or other numbers) left."""
    pattern = re.compile(rf"^{re.escape(sequence)}_(\d{{4,}})\.(?:exr|json)$")
    numbers = {int(m.group(1)) for p in folder.iterdir() if (m := pattern.match(p.name))}
    return sorted(numbers - keep)


def remove_stale_frames(folder: Path, sequence: str, keep: set[int]) -> list[int]:
    """Delete frames not in `keep` that a previous run of the same sequence left; returns their numbers."""
    stale = stale_frames(folder, sequence, keep)
    for number in stale:
        remove_outputs(folder, f"{sequence}_{number:04d}")
    return stale
