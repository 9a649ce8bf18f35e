"""Run an exported file with ONNX Runtime as a drop-in for the PyTorch model inside the one engine.

`OnnxModel` answers what the predictors ask of a model (`task`, `device`, `dtype`, `spec`, a call on a normalised
(B, 3, H, W) float32 tensor returning the same outputs), so pre-processing, post-processing, capture, bundle and
previews are the very code the PyTorch path runs. Tensors go in and out on the CPU; the execution provider moves
them to its device itself.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..arch.errors import ModelOverflowError
from .errors import INSTALL_HINTS, OnnxError, OnnxFileError, OnnxMissingError
from .file_metadata import INPUT_NAME, OnnxMetadata, parse_props
from .wire import verify

# Best first; CPU is always the last resort. TensorRT builds an engine per input shape on first use (minutes for
# large models), so it is taken only when asked for by name (`providers=`, SAPIENS2_ORT_PROVIDERS).
PREFERRED = (
    "CUDAExecutionProvider",
    "DmlExecutionProvider",
    "CoreMLExecutionProvider",
    "OpenVINOExecutionProvider",
    "CPUExecutionProvider",
)
ACCELERATED = {"cuda": ("TensorrtExecutionProvider", "CUDAExecutionProvider")}
PROVIDERS_ENV = "SAPIENS2_ORT_PROVIDERS"


def require_onnxruntime() -> Any:
    if importlib.util.find_spec("onnxruntime") is None:
        raise OnnxMissingError(
            "the ONNX Runtime path needs onnxruntime, which is not installed", hints=INSTALL_HINTS
        )
    import onnxruntime

    return onnxruntime


def read_metadata(path: str | os.PathLike, *, task: str | None = None) -> OnnxMetadata:
    """The file's Sapiens2 metadata after checking it is whole and unchanged (cheap: no session, no weights
    parsed); `task` refuses a file exported for another task."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise OnnxFileError(f"ONNX file not found: {file}")
    meta = parse_props(verify(file), file.name)
    if task is not None and meta.task != task:
        raise OnnxFileError(
            f"{file.name} was exported for the {meta.task} task, but a {task} model is needed here; export the "
            f"{task} checkpoint (sapiens2 export onnx --task {task} …) or pick the {meta.task} task",
        )
    return meta


def choose_providers(device: str = "auto", providers: list[str] | tuple[str, ...] | None = None) -> list[str]:
    """The execution providers to ask for, best first: given ones, else $SAPIENS2_ORT_PROVIDERS, else the best
    installed for `device` ("auto", "cpu", "cuda"; DirectML/CoreML/OpenVINO count as "auto")."""
    ort = require_onnxruntime()
    available = list(ort.get_available_providers())
    asked = list(providers) if providers else [p for p in os.environ.get(PROVIDERS_ENV, "").split(",") if p]
    if asked:
        missing = [p for p in asked if p not in available]
        if missing:
            raise OnnxError(
                f"execution provider {', '.join(missing)} is not in this onnxruntime (it has "
                f"{', '.join(available)}); install the onnxruntime build that has it (onnxruntime-gpu, "
                "onnxruntime-directml, onnxruntime-openvino)"
            )
        return asked + (["CPUExecutionProvider"] if "CPUExecutionProvider" not in asked else [])
    kind = str(device).split(":")[0].strip().lower() or "auto"
    if kind == "cpu":
        return ["CPUExecutionProvider"]
    if kind == "cuda":
        if "CUDAExecutionProvider" not in available:
            raise OnnxError(
                f"device {device!r}: this onnxruntime has no CUDA execution provider (it has "
                f"{', '.join(available)}); pip install onnxruntime-gpu, or use device auto or cpu"
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if kind != "auto":
        raise OnnxError(f"device {device!r} is not one the ONNX Runtime path knows; use auto, cpu or cuda")
    return [p for p in PREFERRED if p in available] or ["CPUExecutionProvider"]


class OnnxModel:
    """An exported Sapiens2 model in an ONNX Runtime session, callable like `Sapiens2Model`."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        task: str | None = None,
        device: str = "auto",
        providers: list[str] | tuple[str, ...] | None = None,
        threads: int | None = None,
    ) -> None:
        ort = require_onnxruntime()
        self.path = Path(path).expanduser()
        self.metadata = read_metadata(self.path, task=task)
        options = ort.SessionOptions()
        options.log_severity_level = 3  # warnings about unused initialisers are not the user's business
        if threads:
            options.intra_op_num_threads = int(threads)
        asked = choose_providers(device, providers)
        try:
            self.session = ort.InferenceSession(str(self.path), options, providers=asked)
        except Exception as exc:  # onnxruntime's own exception types are not importable in a stable place
            raise OnnxFileError(
                f"ONNX Runtime cannot open {self.path.name}: {str(exc).strip()[:300]}"
            ) from None
        self.providers = tuple(self.session.get_providers())
        self.output_names = tuple(o.name for o in self.session.get_outputs())

    # what the predictors and the engine ask of a model --------------------------------------------------------
    @property
    def task(self) -> str:
        return self.metadata.task

    @property
    def spec(self) -> Any:
        return self.metadata.spec

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")  # inputs and outputs; the provider's own device is in `provider`

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32  # the graph's interface; fp16 files cast inside

    @property
    def provider(self) -> str:
        """The execution provider that runs the graph (the first one the session accepted)."""
        return self.providers[0]

    def to(self, *_: Any, **__: Any) -> OnnxModel:
        return self

    def eval(self) -> OnnxModel:
        return self

    def __call__(self, x: Tensor) -> Tensor | tuple[Tensor, ...]:
        if tuple(x.shape[-2:]) != self.metadata.input_size:
            raise OnnxError(
                f"{self.path.name} takes {self.metadata.input_size[0]}x{self.metadata.input_size[1]} inputs, not "
                f"{x.shape[-2]}x{x.shape[-1]}"
            )
        array = np.ascontiguousarray(x.detach().to("cpu", torch.float32).numpy())
        outs = [torch.from_numpy(o) for o in self.session.run(list(self.output_names), {INPUT_NAME: array})]
        if self.metadata.weights_dtype == "fp16" and not all(bool(torch.isfinite(o).all()) for o in outs):
            raise ModelOverflowError(
                f"{self.path.name} overflowed in float16 (non-finite outputs); export it with fp32 weights"
            )
        return outs[0] if len(outs) == 1 else tuple(outs)

    def describe(self) -> str:
        meta = self.metadata
        return f"ONNX {meta.weights_dtype} {meta.size} {meta.task} on {self.provider} ({self.path.name})"
