"""Save USD: the capture as one USD stage (mesh, each person's skeleton, the camera) for any VFX package.

The node only translates ComfyUI's inputs: the frames come from `core.studio.jobs.sequence_batch.sequence_frames` (the same
frames, temporal pass and windows as Save Capture Bundle) and the stage is written by `core.formats.usd.write_usd`
(the same writer as `sapiens2 export usd`), which releases each frame's mesh before it reads the next one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from comfy_api.latest import io, ui

from ..core.formats.bundle import CaptureFrame
from ..core.formats.usd import require_pxr, write_usd
from ..core.studio.jobs.sequence_batch import sequence_fps, sequence_frames
from ..core.studio.sources.batches import check_image
from .comfy_host import ComfyHost
from .compat import (
    MattingData,
    NormalData,
    PointmapData,
    PoseData,
    SegData,
    frames_input,
    frames_of,
    schema,
)
from .errors import node_errors
from .inputs import filename_prefix_input, fps_input, max_edge_ratio_input, smooth_input
from .outputs import output_target
from .task_inputs import batches_by_task

USD_NAME = "Sapiens2 Save USD"
USD_FORMATS = ("usdz", "usdc")


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
                frames_input(
                    "image", "The source image(s): the plate colours; every input matches their size."
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
                fps_input(
                    optional=False,
                    tooltip="Frame rate of a batch (the stage's time codes per second, and smoothing); 0: the "
                    "video's, else 24.",
                ),
                max_edge_ratio_input(),
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
                smooth_input(),
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
        smooth=False,
    ) -> io.NodeOutput:
        require_pxr()  # before any work
        image, video_fps = frames_of(image)
        height, width = (int(v) for v in check_image(image, "").shape[1:3])  # a view: no copy of the clip
        target = output_target(filename_prefix, width, height)
        path = os.path.join(target.folder, f"{target.base}.{format}")
        host = ComfyHost(cls.hidden.unique_id)
        batches = batches_by_task(pose=pose, seg=seg, normals=normals, pointmap=pointmap, matting=matting)
        rate = sequence_fps(fps, video_fps)
        frames = sequence_frames(
            image, batches, fps=rate, smooth=smooth, albedo_image=albedo, mask=mask, host=host
        )
        summary = write_usd(
            _numbered(frames),
            path,
            fps=rate,
            name=target.filename,
            max_edge_ratio=max_edge_ratio,
        )
        relative = target.relative(path)
        lines = [
            f"saved {relative}: {summary.frames} frame(s) {summary.start}-{summary.end} at {summary.fps:g} fps, "
            f"{summary.people} person(s), up to {summary.vertices} mesh vertices",
            *(f"warning: {n}" for n in host.notes),
        ]
        return io.NodeOutput(relative, ui=ui.PreviewText("\n".join(lines)))


def _numbered(frames: Iterable[CaptureFrame]) -> Iterator[CaptureFrame]:
    """The batch's frames numbered 1..B: the stage's time codes."""
    for number, frame in enumerate(frames, start=1):
        frame.frame = number
        yield frame


NODES = [Sapiens2SaveUSD]
