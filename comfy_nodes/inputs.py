"""Inputs several nodes share, defined once so their names, ranges and tooltips stay identical across the pack.

Node modules import from here (and ``compat``), never from each other: each ``nodes_*`` module is imported on its
own, so a module that fails on some host costs only its own nodes.
"""

from __future__ import annotations

from comfy_api.latest import io

from .compat import Sapiens2Model

CHUNK_TOOLTIP = "Images per forward pass; lower it if you run out of memory (it also halves itself on OOM)."
MASK_TOOLTIP = (
    "Optional person mask (1 = person, same size as the image; one mask serves a whole batch). LoadImage's "
    "MASK is 1 where the PNG is transparent: pass it through InvertMask first."
)


def model_input(
    task_label: str, task: str, *, name: str = "model", purpose: str = "", optional: bool = False
) -> io.Input:
    """The SAPIENS2_MODEL socket of a task node (tooltip: which task, and what it is for)."""
    tooltip = f"A Sapiens2 {task_label} model (task '{task}')" + (f": {purpose}." if purpose else ".")
    return Sapiens2Model.Input(name, optional=optional, tooltip=tooltip)


def image_input(verb: str) -> io.Input:
    return io.Image.Input("image", tooltip=f"Images to {verb} (any size; batches are fine).")


def chunk_size_input(default: int) -> io.Input:
    return io.Int.Input("chunk_size", default=default, min=1, max=256, tooltip=CHUNK_TOOLTIP)


def mask_input(tooltip: str = MASK_TOOLTIP) -> io.Input:
    return io.Mask.Input("mask", optional=True, tooltip=tooltip)


def score_threshold_input(tooltip: str) -> io.Input:
    return io.Float.Input("score_threshold", default=0.3, min=0.0, max=1.0, step=0.01, tooltip=tooltip)


def filename_prefix_input(default: str) -> io.Input:
    return io.String.Input("filename_prefix", default=default, tooltip="Path inside ComfyUI's output folder.")
