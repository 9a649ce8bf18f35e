"""Segmentation: 29 body-part class ids; its foreground is the frame's person mask (runs first)."""

from __future__ import annotations

from .base import Task
from .sizes import RELEASED_SIZES


class SegTask(Task):
    name = "seg"
    label = "segmentation (29 body parts)"
    batch_field = "seg"
    run_rank = 10
    list_rank = 20
    needs = ()
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_seg"
    head_kind = "heatmap"
