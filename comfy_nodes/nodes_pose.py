"""Pose (308 keypoints -> POSE_KEYPOINT + raw data) and Draw Pose nodes."""

from __future__ import annotations

import json

from comfy_api.latest import io

from . import pose_logic, task_logic
from .comfy_host import ComfyRuntime
from .compat import PoseData, PoseKeypoint, bounding_box_input, schema
from .inputs import chunk_size_input, image_input, model_input, score_threshold_input


class Sapiens2Pose(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Pose",
            display_name="Sapiens2 Pose",
            search_aliases=["openpose", "pose estimation", "keypoints", "dwpose", "controlnet pose"],
            description=(
                "308-keypoint whole-body pose (body, feet, hands, face). Top-down: people are found from the "
                "connected boxes, else from a segmentation model, else the whole image is one person. Outputs "
                "ComfyUI POSE_KEYPOINT (OpenPose layout) and the raw 308 keypoints."
            ),
            inputs=[
                model_input("pose", "pose"),
                image_input("analyse"),
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
                    options=list(pose_logic.FLAVOURS),
                    default=pose_logic.FLAVOURS[0],
                    tooltip="core: real scores + feet (ComfyUI SDPose style). controlnet_aux: confidence 1/0 as "
                    "DWPose writes it, so controlnet_aux's render/edit nodes draw every point above the threshold.",
                ),
                io.Combo.Input(
                    "neck_mode",
                    options=list(pose_logic.NECK_MODES),
                    default=pose_logic.NECK_MODES[0],
                    tooltip="OpenPose neck point: the shoulder midpoint (what ControlNet-OpenPose was trained on) "
                    "or Sapiens2's anatomical neck; auto = midpoint for controlnet_aux, anatomical for core.",
                ),
                score_threshold_input(
                    "controlnet_aux format: keypoints below this score are written as missing (0, 0, 0)."
                ),
                chunk_size_input(4),
                io.Combo.Input(
                    "when_nobody_found",
                    options=list(pose_logic.NOBODY),
                    default=pose_logic.NOBODY[0],
                    optional=True,  # added later: saved API prompts without it keep working
                    tooltip="A frame where seg_model finds no person: take the whole image as one person (right "
                    "for single-person crops) or give no people (right for videos where people leave the frame).",
                ),
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
    def execute(
        cls,
        model,
        image,
        flip_test,
        keypoint_format,
        neck_mode,
        score_threshold,
        chunk_size,
        when_nobody_found=pose_logic.NOBODY[0],
        bboxes=None,
        seg_model=None,
    ) -> io.NodeOutput:
        batch = task_logic.pose(
            model,
            image,
            bboxes=bboxes,
            seg_model=seg_model,
            flip_test=flip_test,
            when_nobody=when_nobody_found,
            runtime=ComfyRuntime(cls.hidden.unique_id),
            chunk_size=chunk_size,
        )
        frames = pose_logic.pose_keypoint_frames(
            batch, flavour=keypoint_format, neck_mode=neck_mode, threshold=score_threshold
        )
        return io.NodeOutput(frames, batch, ui={"openpose_json": [json.dumps(frames)]})


class Sapiens2DrawPose(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2DrawPose",
            display_name="Sapiens2 Draw Pose",
            search_aliases=["render pose", "openpose image", "skeleton"],
            description="Renders POSE_KEYPOINT as an OpenPose skeleton image (for ControlNet), or the raw 308 "
            "keypoints with the full Sapiens2 skeleton.",
            inputs=[
                PoseKeypoint.Input("keypoints", optional=True, tooltip="POSE_KEYPOINT from any pose node."),
                PoseData.Input(
                    "pose", optional=True, tooltip="Raw Sapiens2 pose: draws all 308 keypoints instead."
                ),
                io.Image.Input("image", optional=True, tooltip="Draw over these images instead of black."),
                io.Boolean.Input("draw_body", default=True, tooltip="Body limbs and joints."),
                io.Boolean.Input("draw_hands", default=True, tooltip="Hand skeletons."),
                io.Boolean.Input("draw_face", default=True, tooltip="Face points."),
                io.Int.Input("stick_width", default=4, min=1, max=64, tooltip="Limb thickness in pixels."),
                io.Int.Input("point_radius", default=4, min=1, max=64, tooltip="Joint dot radius in pixels."),
                score_threshold_input("Hide points scored below."),
            ],
            outputs=[io.Image.Output(id="pose_image", display_name="image", tooltip="The rendered pose(s).")],
        )

    @classmethod
    def execute(
        cls,
        draw_body,
        draw_hands,
        draw_face,
        stick_width,
        point_radius,
        score_threshold,
        keypoints=None,
        pose=None,
        image=None,
    ) -> io.NodeOutput:
        rendered = pose_logic.render(
            keypoints=keypoints,
            pose=pose,
            image=image,
            body=draw_body,
            hands=draw_hands,
            face=draw_face,
            stick_width=stick_width,
            point_radius=point_radius,
            threshold=score_threshold,
        )
        return io.NodeOutput(rendered.to(ComfyRuntime().output_device))


NODES = [Sapiens2Pose, Sapiens2DrawPose]
