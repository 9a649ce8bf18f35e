"""Matte node: soft alpha (MASK), straight foreground (IMAGE) and a composite over a new background."""

from __future__ import annotations

from comfy_api.latest import io

from ..core.studio.compute.run_tasks import TaskOptions, run_tasks
from ..core.studio.sources.batches import check_image
from ..core.studio.views.matte_views import DEFAULT_BACKGROUND_COLOR, matte_images
from .comfy_host import ComfyHost
from .compat import MattingData, schema
from .errors import node_errors
from .inputs import chunk_size_input, image_input, model_input

MATTE_NAME = "Sapiens2 Matte"


class Sapiens2Matte(io.ComfyNode):
    TASK = "matting"  # the one task this node runs (the registry's name)

    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Matte",
            display_name=MATTE_NAME,
            search_aliases=["matting", "alpha matte", "remove background", "cut out person", "hair matte"],
            description="Soft alpha matte of people (hair strands, motion blur, sheer cloth) with their "
            "foreground colour, at the image's own resolution, and the person composited over a new background.",
            inputs=[
                model_input("matting", "matting", purpose="sapiens2_1b_matting.safetensors"),
                image_input("matte"),
                chunk_size_input(2),
                io.String.Input(
                    "background_color",
                    default=DEFAULT_BACKGROUND_COLOR,
                    tooltip="Flat colour behind the person in 'composite' when no background image is "
                    "connected: #rrggbb or r,g,b (0-255).",
                ),
                io.Image.Input(
                    "background",
                    optional=True,
                    tooltip="New background for 'composite' (one for the batch or one per image). Another size "
                    "is scaled to cover the image, keeping its aspect ratio, and centre-cropped.",
                ),
            ],
            outputs=[
                MattingData.Output(
                    id="matting",
                    display_name="matting",
                    tooltip="Alpha and foreground data, for Save Capture Bundle.",
                ),
                io.Mask.Output(
                    id="alpha",
                    display_name="alpha",
                    tooltip="Soft alpha, 1 = person. Use it as the mask of Relight or Body-Part Mask, or with "
                    "JoinImageWithAlpha (after InvertMask) for an RGBA cut-out.",
                ),
                io.Image.Output(
                    id="foreground",
                    display_name="foreground",
                    tooltip="The person's straight (not pre-multiplied) colour; black where alpha is 0. Pair it "
                    "with 'alpha'.",
                ),
                io.Image.Output(
                    id="composite",
                    display_name="composite",
                    tooltip="The person over the background (image or colour): pre-multiplied foreground + "
                    "(1 - alpha) x background.",
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(MATTE_NAME)
    def execute(cls, model, image, chunk_size, background_color, background=None) -> io.NodeOutput:
        host = ComfyHost(cls.hidden.unique_id)
        rgb = check_image(image, "")
        batch = run_tasks({cls.TASK: model}, rgb, host, TaskOptions(chunk_size=chunk_size))[cls.TASK]
        alpha, foreground, composite = matte_images(
            batch, background=background, color=background_color, output_device=host.output_device
        )
        return io.NodeOutput(batch, alpha, foreground, composite)


NODES = [Sapiens2Matte]
