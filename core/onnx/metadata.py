"""What an exported file says about itself: the ONNX `metadata_props` our export writes and our runtime reads.

Every value is a string (ONNX allows nothing else); lists and records are JSON. A reader in any language needs
only these keys to feed the graph and interpret its outputs (docs/deploy.md lists them). Keys are prefixed
`sapiens2.` so they never collide with a converter's own.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ..arch.model import ModelSpec
from ..pipeline.metadata import flip_indices, keypoint_names, seg_class_names
from ..pipeline.preprocess import MEAN, NET_H, NET_W, STD
from .errors import OnnxFileError

FORMAT = "sapiens2-onnx"
FORMAT_VERSION = 1
PREFIX = "sapiens2."

# The graph's output names per task, in order (the PyTorch model's outputs, see Sapiens2Model).
OUTPUTS: dict[str, tuple[str, ...]] = {
    "pretrain": ("featmap",),
    "pose": ("heatmaps",),
    "seg": ("logits",),
    "normal": ("normal",),
    "albedo": ("albedo",),
    "pointmap": ("pointmap", "scale"),
    "matting": ("matting",),
}
INPUT_NAME = "image"

OUTPUT_MEANING: dict[str, str] = {
    "featmap": "(B, C, H/16, W/16) patch features after the final norm",
    "heatmaps": "(B, 308, H/4, W/4) keypoint heatmaps (decode: argmax + DARK-UDP, docs/pipeline.md)",
    "logits": "(B, 29, H, W) class logits (argmax = class id, names in class_names)",
    "normal": "(B, 3, H, W) unnormalised normals in the frame named by normal_frame",
    "albedo": "(B, 3, H, W) sRGB albedo (clamp to [0, 1])",
    "pointmap": "(B, 3, H, W) points before the metric scale (divide by scale)",
    "scale": "(B, 1) metric scale of the pointmap",
    "matting": "(B, 4, H, W) pre-multiplied foreground RGB then alpha, in (0, 1)",
}


@dataclass(frozen=True)
class OnnxMetadata:
    """The parsed `sapiens2.*` properties of one exported file."""

    task: str
    size: str
    input_size: tuple[int, int]  # (H, W)
    weights_dtype: str  # "fp32" or "fp16"
    rope_dtype: str
    spec: ModelSpec
    outputs: tuple[str, ...]
    source_checkpoint: str = ""
    source_sha256: str = ""
    normal_frame: str | None = None
    class_names: tuple[str, ...] = ()
    keypoint_names: tuple[str, ...] = ()
    exporter: str = ""


def build_props(
    spec: ModelSpec,
    *,
    input_size: tuple[int, int],
    weights_dtype: str,
    rope_dtype: str,
    source_checkpoint: str,
    source_sha256: str,
    exporter: str,
) -> dict[str, str]:
    """The metadata_props of a file exported from a model of `spec`."""
    task = spec.task
    outputs = OUTPUTS[task]
    props: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "task": task,
        "size": spec.size,
        "input_name": INPUT_NAME,
        "input_size": list(input_size),
        "input_layout": "NCHW, RGB, float32, dynamic batch",
        "pipeline_input_size": [NET_H, NET_W],
        "normalisation": {
            "pixel_range": "0-255",
            "mean": list(MEAN),
            "std": list(STD),
            "formula": "(pixel - mean) / std per RGB channel, after resizing and padding with 0 (black)",
        },
        "outputs": list(outputs),
        "output_meaning": {name: OUTPUT_MEANING[name] for name in outputs},
        "weights_dtype": weights_dtype,
        "rope_dtype": rope_dtype,
        "spec": dataclasses.asdict(spec),
        "source_checkpoint": source_checkpoint,
        "source_sha256": source_sha256,
        "exporter": exporter,
    }
    if task == "seg":
        props["class_names"] = list(seg_class_names())
    if task == "pose":
        props["keypoint_names"] = list(keypoint_names())
        props["flip_indices"] = list(flip_indices())
    if task == "normal":
        props["normal_frame"] = "opengl (x right, y up, z toward the viewer); OpenCV = (x, -y, -z)"
    if task == "pointmap":
        props["point_frame"] = "opencv (x right, y down, z forward), metres after dividing by scale"
    return {
        PREFIX + key: value if isinstance(value, str) else json.dumps(value) for key, value in props.items()
    }


def _json(props: dict[str, str], key: str, default: Any = None) -> Any:
    text = props.get(PREFIX + key)
    if text is None:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_props(props: dict[str, str], where: str) -> OnnxMetadata:
    """The metadata of a file, or OnnxFileError when it is not a Sapiens2 export this version can read."""
    if props.get(PREFIX + "format") != FORMAT:
        raise OnnxFileError(
            f"{where} is an ONNX file but not a Sapiens2 export (no '{PREFIX}format' metadata); export one "
            "with sapiens2 export onnx",
            hints={"python": "use sapiens2_studio.core.onnx.export_onnx(checkpoint, 'model.onnx')"},
        )
    version = _json(props, "format_version", 0)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise OnnxFileError(
            f"{where} was exported by a newer Sapiens2 Studio (format version {version}, this one reads up to "
            f"{FORMAT_VERSION}); update sapiens2-studio or export the file again"
        )
    try:
        spec_fields = _json(props, "spec")
        spec_fields["kv_heads"] = tuple(spec_fields["kv_heads"])
        spec_fields["gqa_layers"] = tuple(spec_fields["gqa_layers"])
        if spec_fields.get("fixed_input_size") is not None:
            spec_fields["fixed_input_size"] = tuple(spec_fields["fixed_input_size"])
        spec = ModelSpec(**spec_fields)
        height, width = _json(props, "input_size")
        return OnnxMetadata(
            task=props[PREFIX + "task"],
            size=props[PREFIX + "size"],
            input_size=(int(height), int(width)),
            weights_dtype=props[PREFIX + "weights_dtype"],
            rope_dtype=props.get(PREFIX + "rope_dtype", "bf16"),
            spec=spec,
            outputs=tuple(_json(props, "outputs")),
            source_checkpoint=props.get(PREFIX + "source_checkpoint", ""),
            source_sha256=props.get(PREFIX + "source_sha256", ""),
            normal_frame=props.get(PREFIX + "normal_frame"),
            class_names=tuple(_json(props, "class_names", ())),
            keypoint_names=tuple(_json(props, "keypoint_names", ())),
            exporter=props.get(PREFIX + "exporter", ""),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise OnnxFileError(
            f"{where}: its Sapiens2 metadata is damaged ({type(exc).__name__}: {exc})"
        ) from None
