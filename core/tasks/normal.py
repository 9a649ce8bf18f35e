"""Surface normals: unit vectors in the OpenCV camera frame (converted from the model's frame once, in the
pipeline's post-processing), masked by the segmentation it needs when that runs."""

from __future__ import annotations

from typing import Any

from .base import Layer, Preview
from .dense import DenseMapTask
from .sizes import RELEASED_SIZES


class NormalTask(DenseMapTask):
    name = "normal"
    geometry_input = "normals"  # its result in the cross-task self-checks
    label = "surface normals"
    batch_field = "normals"
    run_rank = 30
    list_rank = 30
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_normal"
    layers = (
        Layer("normal", ("N.X", "N.Y", "N.Z"), "half", {"none": 6, "zip": 5.9, "zips": 6.0}, "unit normal"),
    )
    mesh_normals = True  # the mesh's vertex normals
    previews = (Preview("normal", 3.05, kind="normals", source="normals", rank=30),)
    onnx_outputs = (("normal", "(B, 3, H, W) unnormalised normals in the frame named by normal_frame"),)
    predictor = "predict_normal"
    result_field = "normals"
    frame_field = "normals"
    frame_arrays = ("normals",)

    def check_stored(self, frame: Any) -> list[str]:
        """Besides the layers: the stored normals are unit vectors (where finite)."""
        import numpy as np

        problems = super().check_stored(frame)
        if frame.normals is not None:
            finite = np.isfinite(frame.normals).all(axis=-1)
            length = np.linalg.norm(frame.normals[finite], axis=-1)
            if finite.any() and not np.allclose(length, 1.0, atol=1e-2):
                problems.append("normals are not unit vectors")
        return problems

    def onnx_props(self) -> dict[str, Any]:
        """The raw head's frame (the pipeline converts it to OpenCV after the forward pass)."""
        return {"normal_frame": "opengl (x right, y up, z toward the viewer); OpenCV = (x, -y, -z)"}
