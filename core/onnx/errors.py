"""Errors of the ONNX layer: a model that cannot be exported, a file that cannot be run, a missing package."""

from __future__ import annotations

from ..errors import Sapiens2Error

INSTALL_HINTS = {
    "cli": "install the extra: pip install 'sapiens2-studio[onnx]'",
    "python": "pip install 'sapiens2-studio[onnx]'",
    "comfyui": "install onnx and onnxruntime into ComfyUI's Python (pip install onnx onnxruntime), then restart",
}


class OnnxError(Sapiens2Error, RuntimeError):
    """Export or ONNX Runtime execution failed in a way the user can act on."""


class OnnxExportError(OnnxError):
    """This model (size, task, option) cannot be exported; the message says why."""


class OnnxFileError(OnnxError):
    """An ONNX file that is damaged, not ours, or made for another task."""


class OnnxMissingError(OnnxError, ImportError):
    """onnx / onnxruntime are not installed (they are an optional extra)."""
