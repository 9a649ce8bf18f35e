"""Sapiens2 core: the model family, checkpoint loading, and (in submodules) pipeline, formats, shading and the
application engine (`core.studio`).

No ComfyUI or Blender imports anywhere in here. The names below are loaded on first use (PEP 562), so light
modules (`core.errors`, `core.catalogue`) and `sapiens2 --help` do not import torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "CheckpointError": ".checkpoints",
    "ModelSpec": ".arch",
    "Sapiens2Model": ".arch",
    "infer_config": ".checkpoints",
    "load_model": ".checkpoints",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
