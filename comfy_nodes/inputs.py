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


SMOOTH_TOOLTIP = (
    "A batch is a sequence (a video's frames): smooth the keypoints (One-Euro filter per person track) and, in "
    "Save Capture Bundle, the pointmap scale, exactly as `sapiens2 predict --smooth`. People always keep a track "
    "id across the batch (POSE_KEYPOINT person_id), with or without smoothing."
)


def smooth_input() -> io.Input:
    """The CLI's ``--smooth`` (default off); optional, added later: saved API prompts without it keep working."""
    return io.Boolean.Input("smooth", default=False, optional=True, tooltip=SMOOTH_TOOLTIP)


FPS_TOOLTIP = "Frame rate of the sequence (smoothing and the bundle's index); 0: the video's, else 24."


def fps_input(default: float = 0.0, *, optional: bool = True, tooltip: str = FPS_TOOLTIP) -> io.Input:
    """The CLI's ``--fps``: 0 takes the video's frame rate, else 24 (the CLI's default)."""
    return io.Float.Input(
        "fps", default=default, min=0.0, max=1000.0, step=0.01, optional=optional, tooltip=tooltip
    )


def max_edge_ratio_input() -> io.Input:
    """The CLI's ``--max-edge-ratio`` of the mesh writers (Export Mesh, Save USD)."""
    return io.Float.Input(
        "max_edge_ratio",
        default=0.05,
        min=0.001,
        max=10.0,
        step=0.001,
        tooltip="Drop triangles whose depth range exceeds this fraction of their depth (silhouettes).",
    )
