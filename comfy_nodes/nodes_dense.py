"""Normals, Albedo and Pointmap nodes: dense per-pixel predictions with raw data and preview outputs."""

from __future__ import annotations

from comfy_api.latest import io

from ..core.studio.compute.run_tasks import TaskOptions, run_tasks
from ..core.studio.sources.batches import check_image, check_mask
from ..core.studio.views.previews import albedo_batch, depth_preview_batch, normal_map_batch
from . import labels
from .comfy_host import ComfyHost
from .compat import NormalData, PointmapData, schema
from .errors import node_errors
from .inputs import MASK_TOOLTIP, chunk_size_input, image_input, mask_input, model_input

NORMALS_NAME = "Sapiens2 Normals"
ALBEDO_NAME = "Sapiens2 Albedo"
POINTMAP_NAME = "Sapiens2 Pointmap"


def _dense(task: str, model, image, mask, chunk_size: int, host: ComfyHost):
    """Run one dense task; a connected mask (1 = person) is recorded in each result."""
    masks = check_mask(mask, check_image(image, ""), "")
    return run_tasks({task: model}, image, host, TaskOptions(chunk_size=chunk_size), masks=masks)[task]


def _common_inputs(task_label: str, task: str) -> list[io.Input]:
    return [
        model_input(task_label, task),
        image_input("process"),
        mask_input(MASK_TOOLTIP + " The background is zeroed in the outputs."),
        chunk_size_input(2),
    ]


class Sapiens2Normals(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Normals",
            display_name=NORMALS_NAME,
            search_aliases=["normal map", "surface normals", "controlnet normal"],
            description="Per-pixel unit surface normals in the camera frame, plus a normal-map IMAGE in the "
            "convention you choose (OpenGL, DirectX, ControlNet/BAE, or the raw OpenCV frame).",
            inputs=[
                *_common_inputs("normal", "normal"),
                io.Combo.Input(
                    "convention",
                    options=list(labels.NORMAL_CONVENTIONS),
                    default=labels.first(labels.NORMAL_CONVENTIONS),
                    tooltip="How the normal_map IMAGE encodes directions. The 'normals' data output is always the "
                    "OpenCV camera frame (x right, y down, z away from the camera).",
                ),
            ],
            outputs=[
                NormalData.Output(
                    id="normals",
                    display_name="normals",
                    tooltip="Unit normals (float), for Relight and exports.",
                ),
                io.Image.Output(
                    id="normal_map",
                    display_name="normal_map",
                    tooltip="Normals encoded as colours (n + 1) / 2.",
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(NORMALS_NAME)
    def execute(cls, model, image, chunk_size, convention, mask=None) -> io.NodeOutput:
        host = ComfyHost(cls.hidden.unique_id)
        batch = _dense("normal", model, image, mask, chunk_size, host)
        maps = normal_map_batch(batch, labels.lookup(labels.NORMAL_CONVENTIONS, convention, "convention"))
        return io.NodeOutput(batch, maps.to(host.output_device))


class Sapiens2Albedo(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Albedo",
            display_name=ALBEDO_NAME,
            search_aliases=["albedo", "delight", "base color", "intrinsic"],
            description="Surface colour without lighting (sRGB IMAGE), for relighting and texturing.",
            inputs=_common_inputs("albedo", "albedo"),
            outputs=[
                io.Image.Output(id="albedo", display_name="albedo", tooltip="Albedo, sRGB-encoded, 0..1.")
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(ALBEDO_NAME)
    def execute(cls, model, image, chunk_size, mask=None) -> io.NodeOutput:
        host = ComfyHost(cls.hidden.unique_id)
        batch = _dense("albedo", model, image, mask, chunk_size, host)
        return io.NodeOutput(albedo_batch(batch).to(host.output_device))


class Sapiens2Pointmap(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Pointmap",
            display_name=POINTMAP_NAME,
            search_aliases=["depth", "metric depth", "point cloud", "3d"],
            description="Metric 3D point per pixel (camera frame, metres) with the implied camera intrinsics, "
            "plus a depth preview.",
            inputs=[
                *_common_inputs("pointmap", "pointmap"),
                io.Boolean.Input(
                    "near_is_bright", default=True, tooltip="Depth preview: near = white (like MiDaS)."
                ),
                io.Boolean.Input(
                    "normalize_per_image",
                    default=False,
                    tooltip="Off: one depth range for the whole batch (no flicker in videos). On: per image.",
                ),
            ],
            outputs=[
                PointmapData.Output(
                    id="pointmap", display_name="pointmap", tooltip="Metric XYZ, scale and intrinsics."
                ),
                io.Image.Output(
                    id="depth_preview",
                    display_name="depth_preview",
                    tooltip="Depth as a grey image (1st-99th percentile).",
                ),
                io.Mask.Output(
                    id="valid_mask",
                    display_name="valid_mask",
                    tooltip="Pixels with valid depth (inside the mask).",
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(POINTMAP_NAME)
    def execute(
        cls, model, image, chunk_size, near_is_bright, normalize_per_image, mask=None
    ) -> io.NodeOutput:
        host = ComfyHost(cls.hidden.unique_id)
        batch = _dense("pointmap", model, image, mask, chunk_size, host)
        preview, valid = depth_preview_batch(batch, near_bright=near_is_bright, per_image=normalize_per_image)
        return io.NodeOutput(batch, preview.to(host.output_device), valid.to(host.output_device))


NODES = [Sapiens2Normals, Sapiens2Albedo, Sapiens2Pointmap]
