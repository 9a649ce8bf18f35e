"""Pointmap: metric XYZ in the OpenCV camera frame, its scale and the implied intrinsics."""

from __future__ import annotations

from .base import Task
from .sizes import RELEASED_SIZES


class PointmapTask(Task):
    name = "pointmap"
    label = "pointmap / depth"
    batch_field = "pointmap"
    run_rank = 50
    list_rank = 50
    needs = ("seg",)
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_pointmap"
    head_kind = "dense"
