"""Sapiens2 architecture: backbone trunk, 4K tokenizer, task heads, and the configs that describe them."""

from .backbone import Sapiens2Backbone
from .config import (
    SIZE_PRESETS,
    TASKS,
    BackboneConfig,
    DenseHeadConfig,
    HeatmapHeadConfig,
    ModelConfig,
    official_kv_heads,
)
from .model import ModelSpec, Sapiens2Model

__all__ = [
    "SIZE_PRESETS",
    "TASKS",
    "BackboneConfig",
    "DenseHeadConfig",
    "HeatmapHeadConfig",
    "ModelConfig",
    "ModelSpec",
    "Sapiens2Backbone",
    "Sapiens2Model",
    "official_kv_heads",
]
