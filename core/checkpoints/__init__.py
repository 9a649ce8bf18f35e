"""Checkpoints: read safetensors, infer architecture and task from shapes, load strictly."""

from .errors import CheckpointError
from .infer import infer_config
from .loader import convert_to_safetensors, load_model, resolve_dtype
from .reader import SafetensorsReader

__all__ = [
    "CheckpointError",
    "SafetensorsReader",
    "convert_to_safetensors",
    "infer_config",
    "load_model",
    "resolve_dtype",
]
