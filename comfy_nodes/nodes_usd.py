"""Save USD: the capture as one USD stage (mesh, each person's skeleton, the camera) for any VFX package.

The node only translates ComfyUI's inputs: the frames are built by `core.studio.capture.capture_frames` (the same
rule as Save Capture Bundle) one image at a time, and the stage is written by `core.formats.usd.write_usd` (the
same writer as `sapiens2 export usd`), which releases each frame's mesh before it reads the next one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from comfy_api.latest import io, ui

from ..core.formats.bundle import CaptureFrame
from ..core.formats.usd import require_pxr, write_usd
from ..core.studio.batches import TaskBatch, check_batch_count, check_image, require_batch
from ..core.studio.capture import BATCH_FIELDS, capture_frames
from .comfy_host import ComfyHost
from .compat import MattingData, NormalData, PointmapData, PoseData, SegData, schema
from .errors import node_errors
from .inputs import filename_prefix_input

USD_NAME = "Sapiens2 Save USD"
USD_FORMATS = ("usdz", "usdc")


def _one(value: Any, i: int) -> Any:
    """Entry i of a batch that gives one entry per image, or its only entry (one serves every image)."""
    if isinstance(value, TaskBatch):
        return TaskBatch(value.task, [value.results[min(i, len(value) - 1)]], value.model)
    return value[min(i, value.shape[0] - 1)][None]


def _frames(
    image: Any, batches: dict[str, Any], albedo: Any, mask: Any, host: ComfyHost
) -> Iterator[CaptureFrame]:
    """The batch as capture frames, built one image at a time (frame numbers 1..B), so that only the frame being
    written is held beside ComfyUI's own tensors."""
    count = int(image.shape[0])
    for task, batch in batches.items():  # every mismatch is reported before the first frame is written
        if batch is not None:
            name = BATCH_FIELDS[task]
            check_batch_count(f"'{name}'", len(require_batch(batch, task, "", name)), count, "")
    for name, value in (("albedo", albedo), ("mask", mask)):
        if value is not None:
            check_batch_count(f"'{name}'", int(value.shape[0]) if value.ndim in (3, 4) else 1, count, "")
    if mask is not None and mask.ndim == 2:
        mask = mask[None]
    for i in range(count):
        host.check_cancel()
        window = {task: None if b is None else _one(b, i) for task, b in batches.items()}
        (frame,) = capture_frames(
            image[i : i + 1],
            window,
            albedo_image=None if albedo is None else _one(albedo, i),
            mask=None if mask is None else _one(mask, i),
            host=host,
        )
        frame.frame = i + 1
        yield frame
        host.progress(i + 1, count)


class Sapiens2SaveUSD(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2SaveUSD",
            display_name=USD_NAME,
            search_aliases=["usd", "usdz", "usdc", "houdini", "maya", "omniverse", "export", "skeleton"],
            description="Writes the capture as one USD stage (.usdz or .usdc) for Houdini, Maya, Katana, Unreal, "
            "Omniverse or Blender: the pointmap as a mesh (plate colours, albedo, body-part ids, matte), each "
            "person's 308 keypoints as a UsdSkel skeleton, and the camera that lines the mesh up with the image. A "
            "batch becomes an animated sequence at 'fps'. Needs Pixar's 'usd-core' package in ComfyUI's Python.",
            inputs=[
                io.Image.Input(
                    "image", tooltip="The source image(s): the plate colours; every input matches them."
                ),
                PointmapData.Input(
                    "pointmap",
                    tooltip="Pointmap (from Sapiens2 Pointmap): the mesh, the camera, 3D keypoints.",
                ),
                io.Combo.Input(
                    "format",
                    options=list(USD_FORMATS),
                    default="usdz",
                    tooltip="usdz: one self-contained package; usdc: a binary stage with one file per frame's mesh "
                    "in a folder beside it.",
                ),
                filename_prefix_input("sapiens2/usd"),
                io.Float.Input(
                    "fps",
                    default=24.0,
                    min=0.01,
                    max=1000.0,
                    step=0.01,
                    tooltip="Frame rate of a batch (the stage's time codes per second).",
                ),
                io.Float.Input(
                    "max_edge_ratio",
                    default=0.05,
                    min=0.001,
                    max=10.0,
                    step=0.001,
                    tooltip="Drop triangles whose depth range exceeds this fraction of their depth (silhouettes).",
                ),
                PoseData.Input("pose", optional=True, tooltip="Pose (from Sapiens2 Pose): the skeletons."),
                SegData.Input(
                    "seg", optional=True, tooltip="Segmentation: body-part ids and the person mask."
                ),
                NormalData.Input("normals", optional=True, tooltip="Normals (from Sapiens2 Normals)."),
                io.Image.Input("albedo", optional=True, tooltip="Albedo image (from Sapiens2 Albedo)."),
                io.Mask.Input(
                    "mask", optional=True, tooltip="Person mask; default: the segmentation's foreground."
                ),
                MattingData.Input("matting", optional=True, tooltip="Matte (from Sapiens2 Matte): opacity."),
            ],
            outputs=[
                io.String.Output(
                    id="usd_path",
                    display_name="usd_path",
                    tooltip="The stage, relative to the output folder.",
                )
            ],
            is_output_node=True,
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(USD_NAME)
    def execute(
        cls,
        image,
        pointmap,
        format,
        filename_prefix,
        fps,
        max_edge_ratio,
        pose=None,
        seg=None,
        normals=None,
        albedo=None,
        mask=None,
        matting=None,
    ) -> io.NodeOutput:
        require_pxr()  # before any work
        import folder_paths

        rgb = check_image(image, "")
        height, width = (int(v) for v in rgb.shape[1:3])
        folder, filename, counter, subfolder, _ = folder_paths.get_save_image_path(
            filename_prefix, folder_paths.get_output_directory(), width, height
        )
        name = f"{filename}_{counter:05}_.{format}"
        host = ComfyHost(cls.hidden.unique_id)
        batches = {"pose": pose, "seg": seg, "normal": normals, "pointmap": pointmap, "matting": matting}
        frames = _frames(rgb, batches, albedo, mask, host)
        summary = write_usd(
            frames, os.path.join(folder, name), fps=fps, name=filename, max_edge_ratio=max_edge_ratio
        )
        relative = os.path.join(subfolder, name).replace("\\", "/")
        lines = [
            f"saved {relative}: {summary.frames} frame(s) {summary.start}-{summary.end} at {summary.fps:g} fps, "
            f"{summary.people} person(s), up to {summary.vertices} mesh vertices",
            *(f"warning: {n}" for n in host.notes),
        ]
        return io.NodeOutput(relative, ui=ui.PreviewText("\n".join(lines)))


NODES = [Sapiens2SaveUSD]
