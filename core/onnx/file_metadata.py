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
from ..pipeline.preprocess import MEAN, NET_H, NET_W, STD
from ..tasks import registry as tasks_registry
from .errors import OnnxExportError, OnnxFileError

FORMAT = "sapiens2-onnx"
FORMAT_VERSION = 1
PREFIX = "sapiens2."

INPUT_NAME = "image"
PRETRAIN = "pretrain"  # a backbone without a head (no task)
# The backbone's output (name, meaning); a task's head declares its own outputs (`Task.onnx_outputs`).
PRETRAIN_OUTPUTS = (("featmap", "(B, C, H/16, W/16) patch features after the final norm"),)


def graph_outputs(task: str) -> tuple[tuple[str, str], ...]:
    """The graph's outputs of a model of `task`, in order, as (name, meaning) pairs (the PyTorch model's outputs,
    see Sapiens2Model): the backbone's for pretrain, else what the task's module declares."""
    if task == PRETRAIN:
        return PRETRAIN_OUTPUTS
    outputs = tasks_registry.get(task).onnx_outputs
    if not outputs:
        raise OnnxExportError(
            f"the {task} task declares no ONNX outputs (Task.onnx_outputs); it cannot be exported"
        )
    return outputs


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
    outputs = graph_outputs(task)
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
        "outputs": [name for name, _ in outputs],
        "output_meaning": dict(outputs),
        "weights_dtype": weights_dtype,
        "rope_dtype": rope_dtype,
        "spec": dataclasses.asdict(spec),
        "source_checkpoint": source_checkpoint,
        "source_sha256": source_sha256,
        "exporter": exporter,
    }
    if task != PRETRAIN:
        props.update(tasks_registry.get(task).onnx_props())  # what a reader needs to interpret the outputs
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
