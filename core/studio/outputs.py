"""Write one image's results: capture bundle + PNG previews + keypoints JSON, with nothing half-written left behind.

Previews and the keypoints JSON go to temporary names first; the bundle is written atomically; only then are the
temporary files renamed. If anything fails, every temporary file is removed, so an output folder only ever holds
complete results.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..formats.bundle import CaptureFrame, CapturePerson, write_bundle
from ..formats.mesh import pointmap_to_mesh, write_mesh
from .drawing import pose_preview
from .previews import (
    albedo_preview,
    alpha_preview,
    cutout_preview,
    depth_preview,
    normal_map,
    save_png,
    seg_colors,
    to_uint8,
    valid_depth,
)

KEYPOINTS_FORMAT = "sapiens2-keypoints"
# Every file `write_frame_outputs` can write for `<name>`: a re-run replaces the whole set, so a file that this
# run does not produce (a preview of a task not run now, a mesh not asked for) is removed rather than left stale.
OUTPUT_SUFFIXES = (
    ".exr",
    ".json",
    ".pose.png",
    ".seg.png",
    ".normal.png",
    ".depth.png",
    ".albedo.png",
    ".alpha.png",
    ".foreground.png",
    ".keypoints.json",
    ".openpose.json",
    ".ply",
    ".glb",
)


def preview_images(frame: CaptureFrame, image: np.ndarray) -> dict[str, Any]:
    """Suffix → preview image for every layer the frame holds (the same previews ComfyUI's nodes show)."""
    out: dict[str, Any] = {}
    mask = None if frame.mask is None else np.asarray(frame.mask) > 0.5
    if frame.people or "pose" in {m.get("task") for m in frame.models}:
        out["pose"] = pose_preview(image, frame.people)
    if frame.seg is not None:
        out["seg"] = seg_colors(frame.seg)
    if frame.normals is not None:
        out["normal"] = normal_map(frame.normals, mask=mask)
    if frame.points is not None:
        depth, valid = valid_depth(frame.points, mask)
        out["depth"] = depth_preview([depth], [valid], per_image=True, colormap="ramp")[0]
    if frame.albedo is not None:
        out["albedo"] = albedo_preview(frame.albedo)
    if frame.alpha is not None:
        out["alpha"] = alpha_preview(frame.alpha)
        if frame.foreground is not None:
            out["foreground"] = cutout_preview(frame.foreground, frame.alpha)
    return out


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
                "bbox": [round(float(v), 3) for v in person.bbox],
                "bbox_source": person.bbox_source,
                **({} if person.track_id is None else {"track_id": person.track_id}),
                "keypoints": [
                    [round(float(x), 3), round(float(y), 3), round(float(s), 4)]
                    for x, y, s in person.keypoints
                ],
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


def openpose_document(frame: CaptureFrame) -> dict[str, Any]:
    """OpenPose-style JSON (ComfyUI POSE_KEYPOINT frame): 18 body + 6 feet + 70 face + 2x21 hand points per person."""
    from ..formats.keypoints import person_to_openpose

    people = [person_to_openpose(CapturePerson.coerce(p, i).keypoints) for i, p in enumerate(frame.people)]
    return {"version": 1.3, "people": people, "canvas_width": frame.width, "canvas_height": frame.height}


def write_frame_outputs(
    folder: str | os.PathLike,
    name: str,
    frame: CaptureFrame,
    image: np.ndarray,
    *,
    with_previews: bool = True,
    mesh_format: str | None = None,
) -> Path:
    """Write `<name>.exr/.json`, previews `<name>.<layer>.png`, `<name>.keypoints.json`, `<name>.openpose.json`
    and optionally `<name>.ply|.glb`.

    Returns the bundle JSON path.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex[:8]
    staged: list[tuple[Path, Path]] = []
    try:
        if with_previews:
            for suffix, array in preview_images(frame, image).items():
                tmp = folder / f".{name}.{suffix}.{token}.tmp.png"
                save_png(tmp, array)
                staged.append((tmp, folder / f"{name}.{suffix}.png"))
        if frame.people or any(m.get("task") == "pose" for m in frame.models):
            tmp = folder / f".{name}.keypoints.{token}.tmp.json"
            tmp.write_text(json.dumps(keypoints_document(frame, name)), encoding="utf-8")
            staged.append((tmp, folder / f"{name}.keypoints.json"))
            tmp = folder / f".{name}.openpose.{token}.tmp.json"
            tmp.write_text(json.dumps(openpose_document(frame)), encoding="utf-8")
            staged.append((tmp, folder / f"{name}.openpose.json"))
        if mesh_format and frame.points is not None:
            mesh = pointmap_to_mesh(
                frame.points, colors=to_uint8(image), mask=frame.mask, normals=frame.normals
            )
            if len(mesh.faces):
                tmp = folder / f".{name}.{token}.tmp.{mesh_format}"
                write_mesh(tmp, mesh)
                staged.append((tmp, folder / f"{name}.{mesh_format}"))
        json_path = write_bundle(folder, name, frame)
        for tmp, final in staged:
            os.replace(tmp, final)
        remove_outputs(
            folder, name, keep={json_path.name, f"{name}.exr", *(final.name for _, final in staged)}
        )
        return json_path
    finally:
        for tmp, _ in staged:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


def remove_outputs(folder: Path, name: str, keep: set[str] | frozenset[str] = frozenset()) -> None:
    """Delete the files a previous run wrote for `<name>` (see OUTPUT_SUFFIXES), except those in `keep`."""
    for suffix in OUTPUT_SUFFIXES:
        if f"{name}{suffix}" not in keep:
            with contextlib.suppress(FileNotFoundError):
                (folder / f"{name}{suffix}").unlink()


def remove_stale_frames(folder: Path, sequence: str, keep: set[int]) -> None:
    """Delete frames not in `keep` that a previous run of the same sequence (longer, or other numbers) left."""
    pattern = re.compile(rf"^{re.escape(sequence)}_(\d{{4,}})\.(?:exr|json)$")
    numbers = {int(m.group(1)) for p in folder.iterdir() if (m := pattern.match(p.name))}
    for number in sorted(numbers - keep):
        remove_outputs(folder, f"{sequence}_{number:04d}")
