"""Surface normals: unit vectors in the OpenCV camera frame (converted from the model's frame once, in the
pipeline's post-processing), masked by the segmentation it needs when that runs."""

from __future__ import annotations

from .base import Layer, Preview
from .dense import DenseMapTask
from .sizes import RELEASED_SIZES


class NormalTask(DenseMapTask):
    name = "normal"
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
    predictor = "predict_normal"
    result_field = "normals"
    frame_field = "normals"
