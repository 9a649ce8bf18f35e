"""Save Capture Bundle (EXR + JSON for Blender) and Export Mesh (GLB/PLY) output nodes."""

from __future__ import annotations

import os

from comfy_api.latest import io, ui

from ..core.formats.compressions import DEFAULT_EXR_COMPRESSION, EXR_COMPRESSIONS
from ..core.formats.exr import require_openexr
from ..core.studio.jobs.sequence_batch import save_sequence_bundle, sequence_fps
from ..core.studio.sources.batches import TaskBatch, check_image
from ..core.studio.store import exports
from .comfy_host import ComfyHost
from .compat import (
    MattingData,
    NormalData,
    PointmapData,
    PoseData,
    SegData,
    TaskResults,
    file3d_output_type,
    frames_input,
    frames_of,
    make_file3d,
    schema,
)
from .errors import node_errors
from .inputs import filename_prefix_input, fps_input, max_edge_ratio_input, smooth_input
from .outputs import output_target
from .task_inputs import batches_by_task

BUNDLE_NAME = "Sapiens2 Save Capture Bundle"
MESH_NAME = "Sapiens2 Export Mesh"


class Sapiens2SaveCaptureBundle(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2SaveCaptureBundle",
            display_name=BUNDLE_NAME,
            search_aliases=["blender", "exr", "export", "capture"],
            description="Writes a capture bundle (EXR layers + JSON: image, pointmap, normals, albedo, seg, mask, "
            "matte, camera, 308 keypoints with 3D positions) for the Sapiens2 Blender add-on. A batch becomes a numbered "
            "sequence with tracked people (smoothed with 'smooth', as `sapiens2 predict --smooth`), written a few "
            "frames at a time. Needs the 'openexr' package.",
            inputs=[
                frames_input("image", "The source image(s); every other input must match their size."),
                filename_prefix_input("sapiens2/capture"),
                PoseData.Input("pose", optional=True, tooltip="Raw 308-keypoint pose (from Sapiens2 Pose)."),
                SegData.Input("seg", optional=True, tooltip="Segmentation (from Sapiens2 Segment)."),
                NormalData.Input("normals", optional=True, tooltip="Normals (from Sapiens2 Normals)."),
                io.Image.Input("albedo", optional=True, tooltip="Albedo image (from Sapiens2 Albedo)."),
                PointmapData.Input(
                    "pointmap",
                    optional=True,
                    tooltip="Pointmap: gives the mesh, the camera and 3D keypoints.",
                ),
                io.Mask.Input(
                    "mask", optional=True, tooltip="Person mask; default: the segmentation's foreground."
                ),
                fps_input(
                    optional=False,
                    tooltip="Frame rate of a sequence (the index and smoothing); 0: the video's, else 24.",
                ),
                MattingData.Input(
                    "matting",
                    optional=True,  # added later: saved API prompts without it keep working
                    tooltip="Matte (from Sapiens2 Matte): the bundle's alpha and foreground layer.",
                ),
                io.Combo.Input(
                    "exr_compression",
                    options=list(EXR_COMPRESSIONS),
                    default=DEFAULT_EXR_COMPRESSION,
                    optional=True,  # added later, last: saved workflows and API prompts keep working
                    tooltip="The EXR's compression, all lossless: zip (smallest), zips (one scanline per "
                    "block, as Nuke writes), none (fastest to write and read, ~2.5x the bytes).",
                ),
                smooth_input(),
                TaskResults.Input(
                    "task_results",
                    optional=True,  # added later, last: saved workflows and API prompts keep working
                    tooltip="Results of Sapiens2 Run Task (any registered task, e.g. a plug-in's): stored as "
                    "that task stores them, e.g. its own declared bundle layer.",
                ),
            ],
            outputs=[
                io.String.Output(
                    id="bundle_path", display_name="bundle_path", tooltip="The .json to open in Blender."
                )
            ],
            is_output_node=True,
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(BUNDLE_NAME)
    def execute(
        cls,
        image,
        filename_prefix,
        fps,
        pose=None,
        seg=None,
        normals=None,
        albedo=None,
        pointmap=None,
        mask=None,
        matting=None,
        exr_compression=DEFAULT_EXR_COMPRESSION,
        smooth=False,
        task_results=None,
    ) -> io.NodeOutput:
        require_openexr()  # before any work
        image, video_fps = frames_of(image)
        host = ComfyHost(cls.hidden.unique_id)
        batches = batches_by_task(pose=pose, seg=seg, normals=normals, pointmap=pointmap, matting=matting)
        if isinstance(task_results, TaskBatch):  # Run Task's results: any registered task, plug-ins included
            batches[task_results.task] = batches.get(task_results.task) or task_results
        height, width = (int(v) for v in check_image(image, "").shape[1:3])  # a view: no copy of the clip
        target = output_target(filename_prefix, width, height)
        path, count = save_sequence_bundle(
            target.folder,
            target.base,
            image,
            batches,
            fps=sequence_fps(fps, video_fps),
            smooth=smooth,
            albedo_image=albedo,
            mask=mask,
            host=host,
            compression=exr_compression,
        )
        relative = target.relative(path)
        text = "\n".join([f"saved {relative} ({count} frame(s))", *(f"warning: {n}" for n in host.notes)])
        return io.NodeOutput(relative, ui=ui.PreviewText(text))


class Sapiens2ExportMesh(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        outputs = [
            io.String.Output(
                id="mesh_path",
                display_name="mesh_path",
                tooltip="File path relative to the output folder (feed it to Preview 3D); the first of a batch.",
            )
        ]
        file3d = file3d_output_type()
        if file3d is not None:  # newer ComfyUI: a typed 3D file socket for its 3D preview/save nodes
            outputs.append(
                file3d.Output(
                    id="model_3d", display_name="model_3d", tooltip="The mesh as a ComfyUI 3D file."
                )
            )
        return schema(
            node_id="Sapiens2ExportMesh",
            display_name=MESH_NAME,
            search_aliases=["glb", "ply", "mesh", "3d export", "point cloud"],
            description="Triangulates the pointmap into a coloured mesh (depth-jump edges dropped) and saves it as "
            "GLB (colours as a texture) or PLY (vertex colours), both y-up (glTF frame: the camera looks down -z).",
            inputs=[
                PointmapData.Input("pointmap", tooltip="Output of 'Sapiens2 Pointmap'."),
                io.Image.Input(
                    "image",
                    optional=True,
                    tooltip="Colours: the image the pointmap came from (GLB: its texture, PLY: vertex colours).",
                ),
                io.Mask.Input(
                    "mask", optional=True, tooltip="Keep only these pixels (default: the pointmap's mask)."
                ),
                NormalData.Input(
                    "normals", optional=True, tooltip="Per-vertex normals from 'Sapiens2 Normals'."
                ),
                io.Combo.Input(
                    "format", options=list(exports.MESH_FORMATS), default="glb", tooltip="File type."
                ),
                filename_prefix_input("sapiens2/mesh"),
                max_edge_ratio_input(),
            ],
            outputs=outputs,
            is_output_node=True,
        )

    @classmethod
    @node_errors(MESH_NAME)
    def execute(
        cls, pointmap, format, filename_prefix, max_edge_ratio, image=None, mask=None, normals=None
    ) -> io.NodeOutput:
        width, height = pointmap.size if isinstance(pointmap, TaskBatch) and len(pointmap) else (0, 0)
        target = output_target(filename_prefix, width, height)
        paths = exports.export_meshes(
            pointmap,
            target.folder,
            target.base,
            fmt=format,
            image=image,
            mask=mask,
            normals=normals,
            max_edge_ratio=max_edge_ratio,
        )
        relative = [target.relative(p) for p in paths]
        results = [
            {"filename": os.path.basename(str(p)), "subfolder": target.subfolder, "type": "output"}
            for p in paths
        ]
        values = [relative[0]]
        if file3d_output_type() is not None:
            values.append(make_file3d(str(paths[0]), format))
        return io.NodeOutput(*values, ui={"3d": results, "text": ["\n".join(relative)]})


NODES = [Sapiens2SaveCaptureBundle, Sapiens2ExportMesh]
