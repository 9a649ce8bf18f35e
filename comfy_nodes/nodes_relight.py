"""Directional Light and Relight nodes: deterministic relighting from Sapiens2 normals (+ albedo, pointmap)."""

from __future__ import annotations

from comfy_api.latest import io, ui

from ..core.studio.views import relighting
from .comfy_host import ComfyHost
from .compat import Lights, NormalData, PointmapData, schema
from .errors import node_errors

LIGHT_NAME = "Sapiens2 Directional Light"
RELIGHT_NAME = "Sapiens2 Relight"


class Sapiens2DirectionalLight(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2DirectionalLight",
            display_name=LIGHT_NAME,
            search_aliases=["light", "sun", "key light", "relight"],
            description="A light at infinity, placed as seen from the camera. Chain several into one 'lights'.",
            inputs=[
                io.Float.Input(
                    "azimuth",
                    default=45.0,
                    min=-180.0,
                    max=180.0,
                    step=1.0,
                    tooltip="Degrees: 0 = from the camera, +90 = from the image's right, -90 = from its left, "
                    "180 = from behind the subject (rim light).",
                ),
                io.Float.Input(
                    "elevation",
                    default=30.0,
                    min=-90.0,
                    max=90.0,
                    step=1.0,
                    tooltip="Degrees above the horizon: 90 = straight from above, negative = from below.",
                ),
                io.String.Input(
                    "color", default="#ffffff", tooltip="Light colour: #rrggbb or r,g,b (0-255)."
                ),
                io.Float.Input(
                    "intensity",
                    default=1.0,
                    min=0.0,
                    max=100.0,
                    step=0.05,
                    tooltip="1.0 makes a white surface facing the light exactly white.",
                ),
                Lights.Input("lights", optional=True, tooltip="Earlier lights to add this one to."),
            ],
            outputs=[
                Lights.Output(id="lights_out", display_name="lights", tooltip="All lights of the chain.")
            ],
        )

    @classmethod
    @node_errors(LIGHT_NAME)
    def execute(cls, azimuth, elevation, color, intensity, lights=None) -> io.NodeOutput:
        chain = relighting.add_light(lights, azimuth, elevation, color, intensity)
        return io.NodeOutput(chain, ui=ui.PreviewText(relighting.describe_lights(chain)))


class Sapiens2Relight(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return schema(
            node_id="Sapiens2Relight",
            display_name=RELIGHT_NAME,
            search_aliases=["relight", "lighting", "shading", "hdri", "ic-light light map"],
            description=(
                "Relights a person from Sapiens2 normals: Lambert + optional specular under directional lights, an "
                "equirectangular environment (spherical-harmonics irradiance) and ambient light, with optional "
                "shadows cast from the pointmap. Also outputs a light map for IC-Light style conditioning."
            ),
            inputs=[
                NormalData.Input("normals", tooltip="Normals from 'Sapiens2 Normals' for this image."),
                io.Image.Input(
                    "image", tooltip="The photo; used as the surface colour when no albedo is given."
                ),
                io.Image.Input(
                    "albedo",
                    optional=True,
                    tooltip="Albedo from 'Sapiens2 Albedo' (better: no baked-in lighting). Falls back to the image.",
                ),
                io.Mask.Input(
                    "mask",
                    optional=True,
                    tooltip="Where to relight (1 = person); a soft alpha (Sapiens2 Matte's 'alpha') gives soft "
                    "edges. Default: the normals' own mask or non-zero normals.",
                ),
                Lights.Input(
                    "lights", optional=True, tooltip="Directional lights ('Sapiens2 Directional Light')."
                ),
                io.Image.Input(
                    "environment",
                    optional=True,
                    tooltip="Equirectangular (2:1) environment map; its centre is what the camera looks at.",
                ),
                io.Float.Input(
                    "environment_intensity",
                    default=1.0,
                    min=0.0,
                    max=100.0,
                    step=0.05,
                    tooltip="Multiplier on the environment's radiance.",
                ),
                io.Float.Input(
                    "environment_rotation",
                    default=0.0,
                    min=-180.0,
                    max=180.0,
                    step=1.0,
                    tooltip="Turn the environment about the vertical axis (degrees, + moves it to the right).",
                ),
                io.Boolean.Input(
                    "environment_is_linear",
                    default=False,
                    tooltip="On for linear HDR images (e.g. loaded EXR/HDR); off for ordinary sRGB images.",
                ),
                io.Float.Input(
                    "ambient",
                    default=0.1,
                    min=0.0,
                    max=10.0,
                    step=0.01,
                    tooltip="Constant fill light from every direction (unshadowed).",
                ),
                io.String.Input("ambient_color", default="#ffffff", tooltip="Colour of the ambient light."),
                io.Float.Input(
                    "specular",
                    default=0.0,
                    min=0.0,
                    max=1.0,
                    step=0.01,
                    tooltip="Share of reflection that is glossy (Blinn-Phong, energy-conserving); 0 = matte.",
                ),
                io.Float.Input(
                    "shininess",
                    default=32.0,
                    min=1.0,
                    max=1000.0,
                    step=1.0,
                    tooltip="Sharpness of the specular highlight (higher = smaller, brighter highlight).",
                ),
                PointmapData.Input(
                    "pointmap",
                    optional=True,
                    tooltip="Pointmap from 'Sapiens2 Pointmap': enables cast shadows and perspective highlights.",
                ),
                io.Boolean.Input(
                    "shadows", default=True, tooltip="Cast shadows from the pointmap (needs it)."
                ),
                io.Float.Input(
                    "shadow_softness",
                    default=1.0,
                    min=0.0,
                    max=32.0,
                    step=0.5,
                    tooltip="Blur of the shadow edges in pixels.",
                ),
                io.Float.Input(
                    "exposure",
                    default=0.0,
                    min=-10.0,
                    max=10.0,
                    step=0.1,
                    tooltip="Exposure in stops applied before encoding to sRGB.",
                ),
                io.Image.Input(
                    "background",
                    optional=True,
                    tooltip="New background behind the relit person (same size); default: the original photo.",
                ),
                io.Image.Input(
                    "foreground",
                    optional=True,  # added later: saved API prompts without it keep working
                    tooltip="Straight foreground colour from 'Sapiens2 Matte' (connect its 'alpha' to 'mask'): the "
                    "surface colour without the old background mixed into soft edges. Ignored when 'albedo' is "
                    "connected.",
                ),
            ],
            outputs=[
                io.Image.Output(
                    id="relit",
                    display_name="image",
                    tooltip="The relit image, composited over the background.",
                ),
                io.Image.Output(
                    id="light_map",
                    display_name="light_map",
                    tooltip="Shading only (white albedo) with a matching backdrop gradient: an IC-Light light map.",
                ),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    @node_errors(RELIGHT_NAME)
    def execute(
        cls,
        normals,
        image,
        environment_intensity,
        environment_rotation,
        environment_is_linear,
        ambient,
        ambient_color,
        specular,
        shininess,
        shadows,
        shadow_softness,
        exposure,
        albedo=None,
        mask=None,
        lights=None,
        environment=None,
        pointmap=None,
        background=None,
        foreground=None,
    ) -> io.NodeOutput:
        settings = relighting.RelightSettings(
            environment_intensity=environment_intensity,
            environment_rotation=environment_rotation,
            environment_is_linear=environment_is_linear,
            ambient=ambient,
            ambient_color=ambient_color,
            specular=specular,
            shininess=shininess,
            shadows=shadows,
            shadow_softness=shadow_softness,
            exposure=exposure,
        )
        relit, light_map = relighting.relight_batch(
            normals,
            image,
            lights=tuple(lights or ()),
            settings=settings,
            albedo=albedo,
            mask=mask,
            environment=environment,
            pointmap=pointmap,
            background=background,
            foreground=foreground,
            host=ComfyHost(cls.hidden.unique_id),
        )
        return io.NodeOutput(relit, light_map)


NODES = [Sapiens2DirectionalLight, Sapiens2Relight]
