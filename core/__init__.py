"""Sapiens2 core: the model family, checkpoint loading, and (in submodules) pipeline, formats and shading.

No ComfyUI or Blender imports anywhere in here.
"""

from .arch import ModelSpec, Sapiens2Model
from .checkpoints import CheckpointError, infer_config, load_model

__all__ = ["CheckpointError", "ModelSpec", "Sapiens2Model", "infer_config", "load_model"]
