"""ONNX export of Sapiens2 models and an ONNX Runtime path under the one engine (docs/deploy.md).

`onnx`, `onnxscript` (export) and `onnxruntime` (running) are the optional extra `sapiens2-studio[onnx]`; this
package imports them only when used.
"""

from __future__ import annotations

from .errors import OnnxError, OnnxExportError, OnnxFileError, OnnxMissingError
from .export import ExportReport, export_onnx
from .file_metadata import OnnxMetadata
from .session import OnnxModel, choose_providers, read_metadata

__all__ = [
    "ExportReport",
    "OnnxError",
    "OnnxExportError",
    "OnnxFileError",
    "OnnxMetadata",
    "OnnxMissingError",
    "OnnxModel",
    "choose_providers",
    "export_onnx",
    "read_metadata",
]
