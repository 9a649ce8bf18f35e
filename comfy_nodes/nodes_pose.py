"""Pose (308 keypoints -> POSE_KEYPOINT + raw data) and Draw Pose nodes."""

from __future__ import annotations

import json

from comfy_api.latest import io

from ..core.formats.keypoints import to_pose_keypoint
from ..core.studio.compute.run_tasks import TaskOptions, run_tasks
from ..core.studio.jobs.sequence_batch import pass_pose_batch, sequence_fps
from ..core.studio.sources.batches import check_image
from ..core.studio.sources.given_boxes import boxes_per_image
from ..core.studio.views.drawing import render_poses
from ..core.tasks import registry as tasks_registry
from . import labels
from .comfy_host import ComfyHost
from .compat import PoseData, PoseKeypoint, bounding_box_input, frames_input, frames_of, schema
from .errors import node_errors
from .inputs import chunk_size_input, fps_input, model_input, score_threshold_input, smooth_input

POSE_NAME = "Sapiens2 Pose"
DRAW_NAME = "Sapiens2 Draw Pose"


class Sapiens2Pose(io.ComfyNode):
    TASK = "pose"  # the one task this node runs (the registry's name)

    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Pose",
            display_name=POSE_NAME,
            search_aliases=["openpose", "pose estimation", "keypoints", "dwpose", "controlnet pose"],
            description=(
                "308-keypoint whole-body pose (body, feet, hands, face). Top-down: people are found from the "
                "connected boxes, else from a segmentation model, else the whole image is one person. Outputs "
                "ComfyUI POSE_KEYPOINT (OpenPose layout) and the raw 308 keypoints."
            ),
            inputs=[
                model_input("pose", "pose"),
                frames_input("image", "Images to analyse (any size; batches are fine)."),
                bounding_box_input(
                    "bboxes",
                    "Person boxes (e.g. from RT-DETR). Without boxes or a seg model, the whole image is "
                    "taken as one person: only right for single-person crops.",
                ),
                model_input(
                    "segmentation",
                    "seg",
                    name="seg_model",
                    optional=True,
                    purpose="finds the people when no boxes are given (one box per person)",
                ),
                io.Boolean.Input(
                    "flip_test",
                    default=True,
                    tooltip="Average with the mirrored image: more accurate, 2x slower.",
                ),
                io.Combo.Input(
                    "keypoint_format",
                    options=list(labels.POSE_FORMATS),
                    default=labels.first(labels.POSE_FORMATS),
                    tooltip="openpose: confidence 1 for a point scored above the threshold, else 0, plus feet: "
                    "ComfyUI's SDPose nodes and controlnet_aux's render/edit nodes both draw every such point. "
                    "core: the real scores (controlnet_aux draws only points scored 1). controlnet_aux: openpose "
                    "without the feet, as DWPose writes it.",
                ),
                io.Combo.Input(
                    "neck_mode",
                    options=list(labels.NECK_MODES),
                    default=labels.first(labels.NECK_MODES),
                    tooltip="OpenPose neck point: the shoulder midpoint (what ControlNet-OpenPose was trained on) "
                    "or Sapiens2's anatomical neck; auto = anatomical for core, the midpoint otherwise.",
                ),
                score_threshold_input(
                    "openpose and controlnet_aux formats: keypoints scored below this get confidence 0 "
                    "(missing); they keep their position."
                ),
                chunk_size_input(4),
                io.Combo.Input(
                    "when_nobody_found",
                    options=list(labels.NOBODY),
                    default=labels.first(labels.NOBODY),
                    optional=True,  # added later: saved API prompts without it keep working
                    tooltip="A frame where seg_model finds no person: take the whole image as one person (right "
                    "for single-person crops) or give no people (right for videos where people leave the frame).",
                ),
                smooth_input(),
                fps_input(),
            ],
            outputs=[
                PoseKeypoint.Output(
                    id="keypoints",
                    display_name="keypoints",
                    tooltip="POSE_KEYPOINT: one OpenPose frame per image, pixel coordinates.",
                ),
                PoseData.Output(
                    id="pose", display_name="pose", tooltip="Raw 308 keypoints and boxes per person."
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(POSE_NAME)
    def execute(
        cls,
        model,
        image,
        flip_test,
        keypoint_format,
        neck_mode,
        score_threshold,
        chunk_size,
        when_nobody_found=labels.NOBODY_DEFAULT,
        smooth=False,
        fps=0.0,
        bboxes=None,
        seg_model=None,
    ) -> io.NodeOutput:
        image, video_fps = frames_of(image)
        b, h, w = check_image(image, "").shape[:3]
        boxes = boxes_per_image(bboxes, b, w, h)
        models = {cls.TASK: model}
        if seg_model is not None and (boxes is None or any(not frame for frame in boxes)):
            # the task pose needs (seg) finds the people of the frames without boxes
            models.update(dict.fromkeys(tasks_registry.get(cls.TASK).needs, seg_model))
        options = TaskOptions(
            chunk_size=chunk_size,
            flip_test=flip_test,
            if_no_person=labels.lookup(labels.NOBODY, when_nobody_found, "when_nobody_found"),
            boxes=boxes,
        )
        batch = run_tasks(models, image, ComfyHost(cls.hidden.unique_id), options)[cls.TASK]
        if b > 1:  # a batch is a sequence: track ids always, smoothing on request (the CLI's pass)
            batch = pass_pose_batch(batch, sequence_fps(fps, video_fps), smooth=smooth)
        frames = to_pose_keypoint(
            batch.results,
            flavor=labels.lookup(labels.POSE_FORMATS, keypoint_format, "keypoint format"),
            neck=labels.lookup(labels.NECK_MODES, neck_mode, "neck mode"),
            score_threshold=score_threshold,
        )
        return io.NodeOutput(frames, batch, ui={"openpose_json": [json.dumps(frames)]})


class Sapiens2DrawPose(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2DrawPose",
            display_name=DRAW_NAME,
            search_aliases=["render pose", "openpose image", "skeleton"],
            description="Renders POSE_KEYPOINT as an OpenPose skeleton image, drawn like the images OpenPose "
            "ControlNets were trained on (limb ellipses, colours, hands, face), or the raw 308 keypoints with the "
            "full Sapiens2 skeleton.",
            inputs=[
                PoseKeypoint.Input("keypoints", optional=True, tooltip="POSE_KEYPOINT from any pose node."),
                PoseData.Input(
                    "pose", optional=True, tooltip="Raw Sapiens2 pose: draws all 308 keypoints instead."
                ),
                io.Image.Input("image", optional=True, tooltip="Draw over these images instead of black."),
                io.Boolean.Input("draw_body", default=True, tooltip="Body limbs and joints."),
                io.Boolean.Input("draw_hands", default=True, tooltip="Hand skeletons."),
                io.Boolean.Input("draw_face", default=True, tooltip="Face points."),
                io.Int.Input(
                    "stick_width",
                    default=4,
                    min=1,
                    max=64,
                    tooltip="Half the width of the limb ellipses in pixels (OpenPose: 4); hand bones are half as "
                    "wide.",
                ),
                io.Int.Input(
                    "point_radius",
                    default=4,
                    min=1,
                    max=64,
                    tooltip="Joint dot radius in pixels (OpenPose: 4); face dots are 1 pixel smaller.",
                ),
                score_threshold_input("Hide points scored below."),
                io.Boolean.Input(
                    "draw_feet",
                    default=False,
                    optional=True,  # added later: saved API prompts without it keep working
                    tooltip="Foot points of POSE_KEYPOINT input. Off for ControlNet: OpenPose ControlNets were "
                    "trained without feet.",
                ),
            ],
            outputs=[io.Image.Output(id="pose_image", display_name="image", tooltip="The rendered pose(s).")],
        )

    @classmethod
    @node_errors(DRAW_NAME)
    def execute(
        cls,
        draw_body,
        draw_hands,
        draw_face,
        stick_width,
        point_radius,
        score_threshold,
        draw_feet=False,
        keypoints=None,
        pose=None,
        image=None,
    ) -> io.NodeOutput:
        rendered = render_poses(
            keypoints=keypoints,
            pose=pose,
            image=image,
            body=draw_body,
            hands=draw_hands,
            face=draw_face,
            feet=draw_feet,
            stick_width=stick_width,
            point_radius=point_radius,
            threshold=score_threshold,
        )
        return io.NodeOutput(rendered.to(ComfyHost().output_device))


NODES = [Sapiens2Pose, Sapiens2DrawPose]
