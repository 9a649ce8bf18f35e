"""Pose: 308 keypoints per person, top-down (person boxes first, from seg or given boxes)."""

from __future__ import annotations

from .base import Task
from .sizes import RELEASED_SIZES


class PoseTask(Task):
    name = "pose"
    label = "pose (308 keypoints)"
    batch_field = "pose"
    run_rank = 20
    list_rank = 10
    needs = ("seg",)
    released = RELEASED_SIZES
    default_in_cli = True
    builtin = True
    output_conv = "conv_pose"
    head_kind = "heatmap"
