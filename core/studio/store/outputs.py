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

from ...formats.bundle import CaptureFrame, CapturePerson
from ...formats.mesh import pointmap_to_mesh, write_mesh
from ...tasks import registry as tasks_registry
from ...timing import stage
from ..runtime.half_cast import torch_half
from ..views.frame_previews import all_previews, preview_makers, render_preview
from ..views.previews import (
    save_png,
    to_uint8,
)
from .transaction import FrameTransaction

KEYPOINTS_FORMAT = "sapiens2-keypoints"
_MESH_SUFFIXES = (".ply", ".glb")


def output_suffixes() -> tuple[str, ...]:
    """Every file `write_frame_outputs` can write for `<name>` (each registered task's previews included): a
    re-run replaces the whole set, so a file that this run does not produce (a preview of a task not run now, a
    mesh not asked for) is removed rather than left stale."""
    previews = tuple(f".{preview.suffix}.png" for _, preview in all_previews())
    return (
        ".exr",
        ".json",
        *previews,
        ".keypoints.json",
        ".openpose.json",
        *_MESH_SUFFIXES,
        ".pending.npz",  # a pending frame's sidecar (stages.py), removed when finalize commits the frame
    )


OUTPUT_SUFFIXES = (
    output_suffixes()
)  # the built-in tasks' set; `output_suffixes()` includes plug-ins loaded later


def _number(value: Any, digits: int) -> float | None:
    """A rounded float for JSON, or None for NaN/inf."""
    v = float(value)
    return round(v, digits) if math.isfinite(v) else None


def keypoints_document(frame: CaptureFrame, name: str) -> dict[str, Any]:
    """A small JSON with just the 2D keypoints (for tools that do not want EXR)."""
    from ...formats.bundle import metadata_tables

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
    from ...formats.keypoints import person_to_openpose

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
