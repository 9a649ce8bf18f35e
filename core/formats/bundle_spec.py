"""The capture bundle's format spec (docs/formats.md §2): its names and version, its built-in EXR layers with
their channels and pixel types, and the conventions every file declares.

Why a module of its own: the writer, the reader and the readers of other hosts' files (sequence, USD) all ask
these facts; each layer is declared once, as one `BundleLayer` record, instead of in parallel tables of names.
Numpy only, like all of formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .compressions import DEFAULT_EXR_COMPRESSION

FORMAT_NAME = "sapiens2-capture"
SEQUENCE_FORMAT_NAME = "sapiens2-capture-sequence"
FORMAT_VERSION = "1.1"
# Normals of bundles older than this hold the model's frame (OpenGL: x right, y up, z toward the viewer)
# under the label "opencv". Converting them to OpenCV negates y and z; this must equal
# `core.shading.conventions.frame_signs(MODEL_NORMAL_FRAME, CANONICAL_FRAME)` (formats stay numpy-only, so the
# signs are written out here; tests/core/studio/test_normal_frame.py checks that they agree).
CANONICAL_NORMALS_SINCE = (1, 1)
LEGACY_NORMAL_SIGNS = (1.0, -1.0, -1.0)


@dataclass(frozen=True)
class BundleLayer:
    """One built-in layer of the JSON's `layers` and its EXR channels, as written since 1.1.

    name: the layer's id in the code; json_name: its name in the JSON where it differs (renamed in 1.1);
    channels: its EXR channels, in order; pixel_type: how the EXR stores them (see LAYER_ENCODING); field: the
    `CaptureFrame` attribute it is made from (with `requires`, another attribute it needs as well).
    """

    name: str
    channels: tuple[str, ...]
    pixel_type: type[np.floating]
    field: str
    json_name: str = ""
    requires: str = ""

    @property
    def in_json(self) -> str:
        return self.json_name or self.name


# Every channel but the image's R, G, B, A and the depth Z sits in a `layer.channel` layer, so OpenImageIO, Nuke
# and Blender list the layers by name; `Z` is the standard depth channel name (OpenImageIO's z_channel, Blender's
# Depth pass). P.A marks the pixels that have a point (1) or none (0; their P and Z are 0). The matte is one EXR
# layer `matte` (R, G, B, A) as compositors expect it: colour pre-multiplied by alpha in linear light. JSON layer
# "alpha" = its A alone; "matte" = the whole layer (the straight foreground is RGB / A). Pixel types are measured
# per layer by benchmarks/bench_exr.py; what each keeps is in docs/formats.md. The segmentation and mask layers'
# channels were renamed in 1.1, and so were their JSON names: a 1.0 reader skips the layer it cannot find (and
# reads the rest of the file) instead of refusing the file; 1.0 files list "seg" / "mask".
# 8-bit sRGB decoded to linear: half keeps all 256 levels apart (smallest step 3e-4).
RGBA = BundleLayer("rgba", ("R", "G", "B", "A"), np.float16, "image")
DEPTH = BundleLayer("depth", ("Z",), np.float32, "points")  # metres, as P
# metres: half would step 2 mm at 2 m and 4 mm at 5 m, which terraces a mesh
POINTS = BundleLayer("P", ("P.X", "P.Y", "P.Z", "P.A"), np.float32, "points")
# unit vectors: half's 2^-11 relative step is < 0.06° of direction
NORMALS = BundleLayer("N", ("N.X", "N.Y", "N.Z"), np.float16, "normals")
ALBEDO = BundleLayer("albedo", ("albedo.R", "albedo.G", "albedo.B"), np.float16, "albedo")  # as rgba
# class ids: FLOAT, as id channels are read by compositors (exact in half too)
SEGMENTATION = BundleLayer("seg", ("seg.id",), np.float32, "seg", json_name="segmentation")
MASK = BundleLayer("mask", ("mask.A",), np.float16, "mask", json_name="person_mask")  # 0..1; P.A likewise
ALPHA = BundleLayer(
    "alpha", ("matte.A",), np.float16, "alpha"
)  # 0..1: 2^-11 step, far below an 8-bit matte's
# pre-multiplied linear colour, as rgba
MATTE = BundleLayer(
    "matte", ("matte.R", "matte.G", "matte.B", "matte.A"), np.float16, "foreground", requires="alpha"
)
BUNDLE_LAYERS = (RGBA, DEPTH, POINTS, NORMALS, ALBEDO, SEGMENTATION, MASK, ALPHA, MATTE)  # the writer's order

LAYER_ORDER = tuple(layer.name for layer in BUNDLE_LAYERS)
LAYER_CHANNELS = {layer.name: layer.channels for layer in BUNDLE_LAYERS}
# Channels of a layer that a 1.0 file may lack, and the 1.0 names of renamed channels (read, never written).
SINCE_1_1 = frozenset({"P.A"})
CHANNELS_1_0 = {"seg.id": "seg", "mask.A": "mask"}
JSON_LAYER_NAMES = {layer.name: layer.json_name for layer in BUNDLE_LAYERS if layer.json_name}
LAYER_FROM_JSON = {v: k for k, v in JSON_LAYER_NAMES.items()}


@dataclass(frozen=True)
class ExrEncoding:
    """How a bundle's EXR stores its layers: a pixel type per layer (float16 → HALF, float32 → FLOAT) and the
    file's default compression (one per file: a single-part EXR compresses all its channels alike; writers take
    any of EXR_COMPRESSIONS)."""

    pixel_types: Mapping[str, type[np.floating]]
    compression: str


# The one place where the bundle's EXR encoding is chosen (the layers' pixel types above). Readers take any pixel
# type, so files written before and after read the same way.
LAYER_ENCODING = ExrEncoding(
    pixel_types={layer.name: layer.pixel_type for layer in BUNDLE_LAYERS},
    compression=DEFAULT_EXR_COMPRESSION,
)
CONVENTIONS = {
    "camera_frame": "opencv",
    "normals_frame": "opencv",
    "units": "meters",
    "pixel_origin": "top-left corner",
    "color": "scene-linear (sRGB primaries)",
}


class LegacyNormalsWarning(UserWarning):
    """A version-1.0 bundle's normals were converted to the OpenCV frame while reading."""


def legacy_normals_note(name: str) -> str:
    """The one message a host shows when it converted a 1.0 bundle's normals (`name`: file or sequence)."""
    return (
        f"{name}: capture bundle version 1.0 stores the normal model's OpenGL-frame output labelled 'opencv'; "
        "its normals were converted to the OpenCV frame (y and z negated) while reading. Re-export it to write "
        f"version {FORMAT_VERSION}."
    )


def layers_of(frame: Any) -> list[str]:
    """The built-in layers the writer stores for `frame`, in its order."""
    return [
        layer.name
        for layer in BUNDLE_LAYERS
        if getattr(frame, layer.field) is not None
        and (not layer.requires or getattr(frame, layer.requires) is not None)
    ]


def layer_channels(channels: Mapping[str, Any], layer: str) -> tuple[list[str], list[str]]:
    """(the file's names for the channels of `layer`, the channels it lacks): 1.1 names, else 1.0 names; the
    channels added in 1.1 are not required."""
    found, missing = [], []
    for name in LAYER_CHANNELS.get(layer, ()):
        old = CHANNELS_1_0.get(name)
        if name in channels:
            found.append(name)
        elif old is not None and old in channels:
            found.append(old)
        elif name not in SINCE_1_1:
            missing.append(name)
    return found, missing
