"""Pointmap: metric XYZ in the OpenCV camera frame, the predicted scale and the implied intrinsics. The frame's
camera comes from it; points outside the person mask are not stored (invalid), as in the official demo."""

from __future__ import annotations

from typing import Any

from .base import Layer, Preview, StoreContext
from .dense import DenseMapTask
from .sizes import RELEASED_SIZES
from .values import nonfinite_in


class PointmapTask(DenseMapTask):
    name = "pointmap"
    geometry_input = "pointmap"  # its result in the cross-task self-checks
    label = "pointmap / depth"
    batch_field = "pointmap"
    run_rank = 50
    list_rank = 50
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_pointmap"
    layers = (
        Layer(
            "pointmap",
            ("Z", "P.X", "P.Y", "P.Z", "P.A"),
            "float",
            {"none": 18, "zip": 10.5, "zips": 10.9},  # Z, P.X/Y/Z float + P.A half
            "metric points (OpenCV camera frame) and depth",
        ),
    )
    previews = (Preview("depth", 1.8, kind="depth", source="points", rank=40),)
    json_fields = ("camera", "pointmap_scale")
    temporal = True
    mesh = True  # the mesh export is made from its points
    onnx_outputs = (
        ("pointmap", "(B, 3, H, W) points before the metric scale (divide by scale)"),
        ("scale", "(B, 1) metric scale of the pointmap"),
    )
    predictor = "predict_pointmap"
    result_field = "points"
    frame_field = "points"
    frame_arrays = ("points",)

    def onnx_props(self) -> dict[str, Any]:
        return {"point_frame": "opencv (x right, y down, z forward), metres after dividing by scale"}

    def nonfinite(self, result: Any) -> int:
        import numpy as np

        return nonfinite_in(result.points) + nonfinite_in(np.float64(result.scale))

    def batch_notes(self, results: list[Any], names: list[str]) -> list[str]:
        """A pointmap whose scale gives no focal length: its frames record the default camera instead."""
        fallback = [
            (names[i], r.scale)
            for i, r in enumerate(results)
            if getattr(r, "intrinsics_source", "pointmap") != "pointmap"
        ]
        if not fallback:
            return []
        listed = ", ".join(n for n, _ in fallback[:10]) + (
            f" and {len(fallback) - 10} more" if len(fallback) > 10 else ""
        )
        scales = ", ".join(f"{s:.4g}" for _, s in fallback[:3])
        return [
            f"{listed}: the pointmap model predicted scale {scales}, which gives no focal length; the default camera "
            "(fx = fy = 1.2·max(W, H), principal point at the centre) is used and recorded with its reason"
        ]

    def camera(self, result: Any, width: int, height: int) -> dict[str, Any]:
        """The pointmap's intrinsics when its scale gave a valid focal length, else the default camera with
        `reason` saying why (a scale ≤ 0 or not finite; the predictor's `intrinsics_source` names it)."""
        import numpy as np

        from ..formats.bundle import default_camera

        fx, fy, cx, cy = (float(v) for v in np.asarray(result.intrinsics, dtype=np.float64).reshape(-1)[:4])
        source = str(getattr(result, "intrinsics_source", "pointmap"))
        if source == "pointmap" and np.isfinite([fx, fy, cx, cy]).all() and fx > 0 and fy > 0:
            return {"model": "pinhole", "fx": fx, "fy": fy, "cx": cx, "cy": cy, "source": self.name}
        camera = default_camera(width, height)
        if source.startswith("default (") and source.endswith(")"):
            camera["reason"] = source[len("default (") : -1]
        else:
            camera["reason"] = "the pointmap's intrinsics are not a valid camera"
        return camera

    def store(self, frame: Any, result: Any, ctx: StoreContext) -> None:
        """Scale, camera and the points masked by the frame's person mask (after the geometry checks read the
        model's own points): in their own memory when consumed, else a copy; a map read in row bands stays so."""
        import numpy as np

        frame.pointmap_scale = float(np.asarray(result.scale, dtype=np.float64).reshape(-1)[0])
        frame.camera = self.camera(result, frame.width, frame.height)
        frame.points = stored_points(result.points, ctx.mask, ctx.consume)

    def carry(self, frame: Any, old: Any) -> None:
        import numpy as np

        points = old.points
        if points is not None and frame.mask is not None:  # a new seg mask applies to the carried points too
            points = np.where(np.asarray(frame.mask)[..., None] > 0.5, points, 0.0).astype(np.float32)
        frame.points = points
        frame.pointmap_scale = old.pointmap_scale
        frame.camera = dict(old.camera) if old.camera else frame.camera

    def run_settings(self, *, flip_test: bool, boxes: Any, smooth: Any) -> dict[str, Any] | None:
        return dict(smooth)

    def follows(self, computed: set[str], boxes_given: bool) -> bool:
        """Its stored points are masked by the segmentation's person mask."""
        return any(n in computed for n in self.needs)

    def stored(self, frame: Any) -> bool:
        return frame.points is not None


def stored_points(points: Any, mask: Any, consume: bool) -> Any:
    """A frame's points: 0 outside the person mask (> 0.5), masked in row bands."""
    from ..formats.arrays import float32_map, zero_where_invalid
    from ..formats.row_bands import RowBands

    points = float32_map(points)
    if mask is None:
        return points
    if isinstance(points, RowBands):
        return points.then(lambda band, rows: zero_where_invalid(band, mask[rows] > 0.5))
    reuse = consume and points.flags.writeable  # any strides: written band by band
    return masked_points(points, mask, out=points if reuse else None)


def masked_points(points: Any, mask: Any, rows: int = 256, out: Any = None) -> Any:
    """Points where the mask is > 0.5, else 0, filled in row bands (no full-size temporaries on a huge photo):
    into `out` (may be `points` itself), else a new float32 array."""
    import numpy as np

    from ..formats.arrays import zero_where_invalid

    out = np.empty(points.shape, np.float32) if out is None else out
    for y in range(0, points.shape[0], rows):
        zero_where_invalid(points[y : y + rows], mask[y : y + rows] > 0.5, out=out[y : y + rows])
    return out
