"""Surface normals: unit vectors in the OpenCV camera frame."""

from __future__ import annotations

from .base import Task
from .sizes import RELEASED_SIZES


class NormalTask(Task):
    name = "normal"
    label = "surface normals"
    batch_field = "normals"
    run_rank = 30
    list_rank = 30
    needs = ("seg",)
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_normal"
    head_kind = "dense"
