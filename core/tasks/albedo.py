"""Albedo: RGB in [0, 1]; no official weights yet."""

from __future__ import annotations

from .base import Task


class AlbedoTask(Task):
    name = "albedo"
    label = "albedo"
    batch_field = "albedo"
    run_rank = 40
    list_rank = 40
    needs = ("seg",)
    released = ()
    unreleased_reason = "no albedo checkpoints are public yet (facebookresearch/sapiens2 issue #1)"
    default_in_cli = False
    builtin = True
    output_conv = "conv_albedo"
    head_kind = "dense"
