"""Task results → capture frames: the one path from predictions to what a bundle stores.

The CLI, the Python API, ComfyUI's Save Capture Bundle and the Ray workers all build their bundles here, so the
same photo and checkpoints give the same file everywhere. Rules (docs/formats.md):
- the person mask is the given mask, else the segmentation's foreground (label > 0), else where the matte's
  alpha is at least 0.5 (the soft alpha itself is stored as its own layer, never as the mask);
- pointmap points outside the person mask are not stored (invalid), as in the official demo, and 3D keypoints
  are sampled from the stored points only;
- the camera comes from the pointmap's intrinsics when the predicted scale gives a valid focal length, else the
  default camera (its `source` says which, and `reason` why a pointmap gave none);
- model records are listed in the run order of the catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from .. import catalogue
from ..formats.arrays import BandedArray, float32_map, to_numpy, zero_where_invalid
from ..formats.bundle import CaptureFrame, default_camera
from .batches import TaskBatch, place, require_batch
from .checks import check_geometry
from .errors import StudioError
from .host import Host

BATCH_FIELDS = {
    "pose": "pose",
    "seg": "seg",
    "normal": "normals",
    "albedo": "albedo",
    "pointmap": "pointmap",
    "matting": "matting",
}
MATTE_MASK_THRESHOLD = 0.5  # alpha at or above it is "person" where only a matte says who is there


def _image_list(images: Any, where: str) -> list[np.ndarray]:
    """(B, H, W, C) tensor/array or a list of H×W×C arrays → list of numpy images (RGB, alpha dropped)."""
    if hasattr(images, "shape") and len(images.shape) == 4:
        return [to_numpy(images[i])[..., :3] for i in range(images.shape[0])]
    if isinstance(images, Sequence) and not isinstance(images, (str, bytes)):
        out = []
        for image in images:
            arr = to_numpy(image)
            out.append(arr[..., :3] if arr.ndim == 3 else arr)
        if out:
            return out
    raise StudioError(f"{place(where)}expected a non-empty batch of images")


def _check(batch: TaskBatch | None, task: str, count: int, where: str) -> TaskBatch | None:
    if batch is None:
        return None
    batch = require_batch(batch, task, where, BATCH_FIELDS[task])
    if len(batch) not in (1, count):
        raise StudioError(f"{place(where)}'{BATCH_FIELDS[task]}' has {len(batch)} results for {count} images")
    return batch


def _result_size(result: Any) -> tuple[int, int]:
    return TaskBatch("any", [result]).size


def _camera(pointmap: Any, width: int, height: int) -> dict[str, Any]:
    """The camera a frame records — the one place that decides it: the pointmap's intrinsics when its scale gave a
    valid focal length, else the default camera, with `reason` saying why when a pointmap was there (a scale ≤ 0
    or not finite; the predictor's `intrinsics_source` names it)."""
    if pointmap is None:
        return default_camera(width, height)
    fx, fy, cx, cy = (float(v) for v in np.asarray(pointmap.intrinsics, dtype=np.float64).reshape(-1)[:4])
    source = str(getattr(pointmap, "intrinsics_source", "pointmap"))
    if source == "pointmap" and np.isfinite([fx, fy, cx, cy]).all() and fx > 0 and fy > 0:
        return {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy, "source": "pointmap"}
    camera = default_camera(width, height)
    if source.startswith("default (") and source.endswith(")"):
        camera["reason"] = source[len("default (") : -1]
    else:
        camera["reason"] = "the pointmap's intrinsics are not a valid camera"
    return camera


def model_records(batches: Mapping[str, TaskBatch | None]) -> list[dict[str, Any]]:
    """The bundle's `models` list, in run order."""
    return [
        dict(batches[t].model)  # type: ignore[union-attr, arg-type]
        for t in catalogue.RUN_ORDER
        if batches.get(t) is not None and batches[t].model  # type: ignore[union-attr]
    ]


def capture_frames(
    images: Any,
    batches: Mapping[str, TaskBatch | None],
    *,
    albedo_image: Any = None,
    mask: Any = None,
    source_names: Sequence[str | None] | None = None,
    host: Host | None = None,
    where: str = "",
    consume: bool = False,
    first: int = 0,
    total: int | None = None,
) -> list[CaptureFrame]:
    """One CaptureFrame per image from task batches (task → TaskBatch, any subset).

    albedo_image: an albedo image batch (B, H, W, 3) used when no albedo results are given (ComfyUI passes the
    Albedo node's IMAGE). mask: (B, H, W) person mask overriding the segmentation's foreground.
    Each frame gets the cross-task geometry checks its results allow (`frame.checks`); poor ones become notes on
    `host`, named by the source name (or the frame number). `consume`: the caller hands the results over (the
    engine's job drops them after capture), so a pointmap is masked in its own memory instead of copied (648 MB
    less on a 9000×6000 photo); the frame's points then share that memory, and a seg result's labels become the
    frame's int32 labels (the int64 ones are released at once). `first`, `total`: the images are frames
    `first`.. of a batch of `total` given in windows (a long clip in bounded memory), for the messages' numbers.
    """
    pictures = _image_list(images, where)
    count = len(pictures)
    checked = {task: _check(batches.get(task), task, count, where) for task in BATCH_FIELDS}
    records = model_records(checked)
    masks = None if mask is None else to_numpy(mask).astype(np.float32)
    if masks is not None and masks.ndim == 2:
        masks = masks[None]
    albedos = None if albedo_image is None else _image_list(albedo_image, where)
    frames = []
    for i, picture in enumerate(pictures):
        height, width = picture.shape[:2]
        which = "the image" if (total or count) == 1 else f"image {first + i + 1}"
        results = {task: (None if b is None else b[i]) for task, b in checked.items()}
        for task, result in results.items():
            if result is not None and _result_size(result) != (width, height):
                w, h = _result_size(result)
                raise StudioError(
                    f"{place(where)}'{BATCH_FIELDS[task]}' is {w}x{h} but {which} is {width}x{height}; connect "
                    "results computed from this same image"
                )
        # The frame's int32 labels, made first so that, consumed, the int64 ones are released before the mask.
        labels = None
        if results["seg"] is not None:
            labels = to_numpy(results["seg"].labels).astype(np.int32)
            if consume and isinstance(results["seg"].labels, torch.Tensor):
                results["seg"].labels = torch.from_numpy(labels)  # 432 MB of int64 freed on a 9000×6000 photo
        frame_mask = None
        if masks is not None:
            frame_mask = masks[min(i, len(masks) - 1)]
            if frame_mask.shape != (height, width):
                raise StudioError(
                    f"{place(where)}the mask is {frame_mask.shape[1]}x{frame_mask.shape[0]} but {which} is "
                    f"{width}x{height}"
                )
        elif labels is not None:
            frame_mask = (labels > 0).astype(np.float32)
        elif results["matting"] is not None:
            frame_mask = (to_numpy(results["matting"].alpha) >= MATTE_MASK_THRESHOLD).astype(np.float32)
        frame = CaptureFrame(
            width=width,
            height=height,
            image=picture,
            mask=frame_mask,
            models=records,
            source_name=None if source_names is None else source_names[i],
        )
        frame.seg = labels
        if results["pose"] is not None:
            frame.people = list(results["pose"].people)
        if results["normal"] is not None:
            frame.normals = float32_map(results["normal"].normals)
        if results["albedo"] is not None:
            frame.albedo = float32_map(results["albedo"].albedo)
        elif albedos is not None:
            frame.albedo = albedos[min(i, len(albedos) - 1)].astype(np.float32)
        if results["matting"] is not None:
            frame.alpha = to_numpy(results["matting"].alpha).astype(np.float32)
            frame.foreground = to_numpy(results["matting"].foreground).astype(np.float32)
        pointmap = results["pointmap"]
        if pointmap is not None:
            frame.pointmap_scale = float(np.asarray(pointmap.scale, dtype=np.float64).reshape(-1)[0])
        frame.camera = _camera(pointmap, width, height)
        frame.checks = _checks(results, frame_mask)  # before any masking: the checks read the model's points
        if pointmap is not None:
            frame.points = _stored_points(pointmap.points, frame_mask, consume)
        if host is not None and frame.checks is not None:
            label = (source_names[i] if source_names else None) or (
                f"frame {first + i + 1}" if (total or count) > 1 else ""
            )
            for warning in frame.checks.warnings:
                host.note(f"{label}: {warning}" if label else warning)
        frames.append(frame)
    return frames


def _stored_points(points: Any, mask: np.ndarray | None, consume: bool) -> Any:
    """The frame's points: masked (0 outside the person) in their own memory when consumed, else a copy; a
    BandedArray stays banded, masked band by band as it is read."""
    points = float32_map(points)
    if mask is None:
        return points
    if isinstance(points, BandedArray):
        return points.then(lambda band, rows: zero_where_invalid(band, mask[rows] > 0.5))
    reuse = consume and points.flags.writeable  # any strides: written band by band
    return _masked_points(points, mask, out=points if reuse else None)


def _masked_points(
    points: np.ndarray, mask: np.ndarray, rows: int = 256, out: np.ndarray | None = None
) -> np.ndarray:
    """Points where the mask is > 0.5, else 0, filled in row bands (no full-size temporaries on a huge photo):
    into `out` (may be `points` itself), else a new float32 array."""
    out = np.empty(points.shape, np.float32) if out is None else out
    for y in range(0, points.shape[0], rows):
        zero_where_invalid(points[y : y + rows], mask[y : y + rows] > 0.5, out=out[y : y + rows])
    return out


def _checks(results: Mapping[str, Any], mask: np.ndarray | None) -> Any:
    """The geometry self-checks of one frame, where at least one can run (normals, or pose/pointmap with a
    person mask); None otherwise."""
    runnable = results["normal"] is not None or (
        mask is not None and (results["pose"] is not None or results["pointmap"] is not None)
    )
    if not runnable:
        return None
    return check_geometry(
        normals=results["normal"], pointmap=results["pointmap"], pose=results["pose"], mask=mask
    )
