"""Matting: soft alpha and the foreground colour, full resolution (runs last)."""

from __future__ import annotations

from .base import Task


class MattingTask(Task):
    name = "matting"
    label = "matting (soft alpha + foreground)"
    batch_field = "matting"
    run_rank = 60
    list_rank = 60
    needs = ()
    released = ("1b",)
    default_in_cli = False
    builtin = True
    output_conv = "conv_matting"
    head_kind = "dense"
