"""Segment and Body-Part Mask nodes."""

from __future__ import annotations

from comfy_api.latest import io

from ..core.studio.compute.run_tasks import TaskOptions, run_tasks
from ..core.studio.sources.batches import check_image
from ..core.studio.views import masks
from ..core.studio.views.previews import seg_preview_batch
from .comfy_host import ComfyHost
from .compat import SegData, schema
from .errors import node_errors
from .inputs import chunk_size_input, image_input, model_input

SEGMENT_NAME = "Sapiens2 Segment"
MASK_NAME = "Sapiens2 Body-Part Mask"


class Sapiens2Segment(io.ComfyNode):
    TASK = "seg"  # the one task this node runs (the registry's name)

    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Segment",
            display_name=SEGMENT_NAME,
            search_aliases=["human parsing", "body parts", "clothes segmentation", "person mask"],
            description="29-class body-part segmentation (clothes, skin parts, hair, face, hands, ...) at the "
            "image's own resolution.",
            inputs=[
                model_input("segmentation", "seg"),
                image_input("segment"),
                chunk_size_input(4),
            ],
            outputs=[
                SegData.Output(
                    id="seg",
                    display_name="seg",
                    tooltip="Class ids per pixel, for Body-Part Mask and exports.",
                ),
                io.Image.Output(
                    id="preview", display_name="preview", tooltip="Class colours blended over the image."
                ),
                io.Mask.Output(
                    id="person_mask", display_name="person_mask", tooltip="Foreground (any body part) mask."
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(SEGMENT_NAME)
    def execute(cls, model, image, chunk_size) -> io.NodeOutput:
        host = ComfyHost(cls.hidden.unique_id)
        rgb = check_image(image, "")
        seg = run_tasks({cls.TASK: model}, rgb, host, TaskOptions(chunk_size=chunk_size))[cls.TASK]
        preview = seg_preview_batch(seg, rgb, opacity=0.6)
        return io.NodeOutput(
            seg, preview.to(host.output_device), masks.foreground_masks(seg).to(host.output_device)
        )


class Sapiens2BodyPartMask(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2BodyPartMask",
            display_name=MASK_NAME,
            search_aliases=["garment mask", "try-on mask", "clothes mask", "inpaint mask", "skin mask"],
            description="A MASK of chosen body parts: try-on presets (clothes + the skin they may uncover, never "
            "hands or face), named groups, or single classes; with grow/shrink, feather and invert.",
            inputs=[
                SegData.Input("seg", tooltip="Output of 'Sapiens2 Segment'."),
                io.Combo.Input(
                    "preset",
                    options=list(masks.PRESETS),
                    default="upper_clothes",
                    tooltip="tryon_upper/lower/full: areas a garment swap repaints. Others: named groups "
                    "(upper_clothes, skin, arms_without_hands, hands, face, hair, ...). 'custom': only 'classes'.",
                ),
                io.String.Input(
                    "classes",
                    default="",
                    tooltip="Extra classes or groups to add, comma-separated (names like Hair, ids 0-28, or "
                    "group names).",
                ),
                io.String.Input(
                    "exclude",
                    default="",
                    tooltip="Classes or groups to remove, comma-separated (e.g. hands, face).",
                ),
                io.Int.Input(
                    "grow",
                    default=0,
                    min=-256,
                    max=256,
                    tooltip="Pixels to grow (positive) or shrink (negative).",
                ),
                io.Float.Input(
                    "feather",
                    default=0.0,
                    min=0.0,
                    max=128.0,
                    step=0.5,
                    tooltip="Soft edge width (blur sigma, px).",
                ),
                io.Boolean.Input("invert", default=False, tooltip="Select everything except these parts."),
                io.Int.Input(
                    "person",
                    default=0,
                    min=0,
                    max=64,
                    optional=True,  # added later: saved API prompts without it keep working
                    tooltip="0 = everyone. 1 = only the largest person, 2 = the second largest, ... (people are "
                    "connected body regions, as Pose finds them); a frame with fewer people gives an empty mask.",
                ),
                io.Mask.Input(
                    "person_mask",
                    optional=True,  # added later: saved API prompts without it keep working
                    tooltip="Soft person alpha, e.g. 'alpha' of Sapiens2 Matte (same size as the image): where the "
                    "selected parts meet the background, the mask's edge follows it (hair strands, motion blur) "
                    "instead of the segmentation's hard edge. Applied before grow, feather and invert.",
                ),
            ],
            outputs=[io.Mask.Output(id="mask", display_name="mask", tooltip="1 = selected parts.")],
        )

    @classmethod
    @node_errors(MASK_NAME)
    def execute(
        cls, seg, preset, classes, exclude, grow, feather, invert, person=0, person_mask=None
    ) -> io.NodeOutput:
        mask = masks.body_part_mask(
            seg,
            preset=preset,
            classes=classes,
            exclude=exclude,
            grow=grow,
            feather=feather,
            invert=invert,
            person=person,
            matte=person_mask,
            output_device=ComfyHost().output_device,
        )
        return io.NodeOutput(mask)


NODES = [Sapiens2Segment, Sapiens2BodyPartMask]
