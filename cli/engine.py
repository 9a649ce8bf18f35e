"""The CLI's one bridge to `core.pipeline`: run the loaded models on a batch and build capture frames.

Kept apart from argument handling so the benchmark and tests can drive exactly what `predict` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.formats.bundle import CaptureFrame, default_camera


@dataclass
class RunOptions:
    flip_test: bool = False
    with_previews: bool = True
    mesh_format: str | None = None  # "ply" | "glb" | None


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if value.dtype.is_floating_point:
            value = value.float()
        value = value.numpy()
    return np.asarray(value)


def run_models(
    models: dict[str, Any],
    images: list[np.ndarray],
    boxes: list[list[list[float]] | None],
    options: RunOptions,
) -> list[dict[str, Any]]:
    """Task → result for every image (seg first, so pose can derive person boxes from it)."""
    from ..core.pipeline.predict import (
        predict_albedo,
        predict_normal,
        predict_pointmap,
        predict_pose,
        predict_seg,
    )

    count = len(images)
    results: list[dict[str, Any]] = [{} for _ in images]
    seg = None
    if "seg" in models:
        seg = predict_seg(models["seg"].model, images, batch_size=count)
        for res, out in zip(results, seg):
            res["seg"] = out
    if "pose" in models:
        given = None if all(b is None for b in boxes) else boxes
        outs = predict_pose(
            models["pose"].model, images, boxes=given, seg=seg, flip_test=options.flip_test, batch_size=count
        )
        for res, out in zip(results, outs):
            res["pose"] = out
    dense = {"normal": predict_normal, "albedo": predict_albedo, "pointmap": predict_pointmap}
    for task, predictor in dense.items():
        if task in models:
            for res, out in zip(results, predictor(models[task].model, images, batch_size=count)):
                res[task] = out
    return results


def to_capture_frame(
    image: np.ndarray, results: dict[str, Any], model_infos: list[dict[str, Any]], source_name: str | None
) -> CaptureFrame:
    """Typed results of one image → a CaptureFrame (background points zeroed with the seg mask when available)."""
    height, width = image.shape[:2]
    frame = CaptureFrame(width=width, height=height, image=image, source_name=source_name, models=model_infos)
    mask = None
    if "seg" in results:
        frame.seg = _numpy(results["seg"].labels).astype(np.int64)
        mask = frame.seg > 0
        frame.mask = mask.astype(np.float32)
    if "pose" in results:
        frame.people = list(results["pose"].people)
    if "normal" in results:
        frame.normals = _numpy(results["normal"].normals).astype(np.float32)
    if "albedo" in results:
        frame.albedo = _numpy(results["albedo"].albedo).astype(np.float32)
    if "pointmap" in results:
        res = results["pointmap"]
        points = _numpy(res.points).astype(np.float32)
        if mask is not None:
            points = np.where(mask[..., None], points, 0.0).astype(np.float32)
        frame.points = points
        frame.pointmap_scale = float(_numpy(res.scale).reshape(-1)[0])
        fx, fy, cx, cy = (float(v) for v in _numpy(res.intrinsics).reshape(-1)[:4])
        if all(np.isfinite([fx, fy, cx, cy])) and fx > 0 and fy > 0:
            frame.camera = {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy, "source": "pointmap"}
    if frame.camera is None:  # no pointmap, or a non-positive predicted scale (no valid focal length)
        frame.camera = default_camera(width, height)
    return frame


def predict_frames(
    models: dict[str, Any],
    images: list[np.ndarray],
    boxes: list[list[list[float]] | None],
    sources: list[str],
    options: RunOptions,
    warn: Callable[[str], None] | None = None,
    smoother: SequenceSmoother | None = None,
) -> list[CaptureFrame]:
    """Run every loaded model on a batch (frames in order) and return one CaptureFrame per image."""
    infos = [m.info for m in models.values()]
    results = run_models(models, images, boxes, options)
    if smoother is not None:
        results = [smoother(res) for res in results]
    if warn is not None:
        for src, res in zip(sources, results):
            for note in getattr(res.get("pose"), "warnings", None) or []:
                warn(f"{src}: {note}")
    return [to_capture_frame(img, res, infos, src) for img, res, src in zip(images, results, sources)]


class SequenceSmoother:
    """Causal temporal tracking and (optional) smoothing of one sequence, applied to each frame's results in order.

    People are always matched across frames by box IoU, so every person of a sequence has a `track_id` (the
    per-frame order is by area and changes as people move). With `smooth`: keypoints go through the pipeline's
    One-Euro `KeypointSmoother`, and the pointmap scale through an exponential moving average (causal, so frames
    can be written as they come), with points and intrinsics rescaled to the smoothed scale.
    """

    def __init__(self, fps: float, scale_alpha: float = 0.2, *, smooth: bool = True) -> None:
        from ..core.pipeline.temporal import KeypointSmoother

        self.keypoints = KeypointSmoother(fps, smooth=smooth)
        self.smooth = smooth
        self.scale_alpha = scale_alpha
        self.scale: float | None = None

    def __call__(self, results: dict[str, Any]) -> dict[str, Any]:
        from ..core.pipeline.temporal import rescale_pointmap

        if "pose" in results:
            results["pose"] = self.keypoints.update(results["pose"])
        pointmap = results.get("pointmap")
        if self.smooth and pointmap is not None and pointmap.scale > 0:
            raw = float(pointmap.scale)
            self.scale = raw if self.scale is None else self.scale + self.scale_alpha * (raw - self.scale)
            results["pointmap"] = rescale_pointmap(pointmap, self.scale)
        return results
