"""Albedo: RGB in [0, 1], sRGB-encoded as the model predicts it (no official weights yet)."""

from __future__ import annotations

from .base import Layer, Preview
from .dense import DenseMapTask


class AlbedoTask(DenseMapTask):
    name = "albedo"
    label = "albedo"
    batch_field = "albedo"
    run_rank = 40
    list_rank = 40
    released = ()
    unreleased_reason = "no albedo checkpoints are public yet (facebookresearch/sapiens2 issue #1)"
    builtin = True
    output_conv = "conv_albedo"
    layers = (
        Layer(
            "albedo",
            ("albedo.R", "albedo.G", "albedo.B"),
            "half",
            {"none": 6, "zip": 5.8, "zips": 6.0},
            "RGB",
        ),
    )
    previews = (Preview("albedo", 2.6, kind="colour", source="albedo", rank=50),)
    onnx_outputs = (("albedo", "(B, 3, H, W) sRGB albedo (clamp to [0, 1])"),)
    predictor = "predict_albedo"
    result_field = "albedo"
    frame_field = "albedo"
    frame_arrays = ("albedo",)
