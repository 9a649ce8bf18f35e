"""Export a Sapiens2 checkpoint (backbone + head) to one self-describing ONNX file with a dynamic batch.

Pre- and post-processing stay in our pipeline (core/pipeline), which both runtimes share, so the graph is only
`normalised image -> raw task outputs`, exactly what `Sapiens2Model` computes. The spatial size is fixed (the
pipeline always feeds 1024x768, and the pointmap head only accepts its training size); the batch is dynamic.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ..arch.model import Sapiens2Model
from ..checkpoints.loader import load_model
from ..pipeline.preprocess import NET_H, NET_W
from .compat import exportable
from .errors import INSTALL_HINTS, OnnxExportError, OnnxMissingError
from .file_metadata import INPUT_NAME, OnnxMetadata, build_props, graph_outputs, parse_props
from .wire import data_file, seal

WEIGHT_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
OPSET = 18
# Largest batch the exported graph is declared for (any batch up to it runs from the one file).
MAX_BATCH = 1024
# Weights above this go to `<out>.data` beside the file (ONNX's protobuf cannot exceed 2 GB).
EXTERNAL_DATA_BYTES = 1_800_000_000


def require_export_packages() -> None:
    """The exporter needs onnx and onnxscript (torch's dynamo exporter); say so before any work."""
    missing = [name for name in ("onnx", "onnxscript") if importlib.util.find_spec(name) is None]
    if missing:
        raise OnnxMissingError(
            f"ONNX export needs {' and '.join(missing)}, which is not installed", hints=INSTALL_HINTS
        )


@dataclass(frozen=True)
class ExportReport:
    """Where the file went and what it cost."""

    path: Path
    seconds: float
    size_bytes: int
    metadata: OnnxMetadata

    def describe(self) -> str:
        meta = self.metadata
        return (
            f"exported Sapiens2 {meta.size} {meta.task} ({meta.weights_dtype} weights, input "
            f"{meta.input_size[0]}x{meta.input_size[1]}, dynamic batch) to {self.path} "
            f"({self.size_bytes / 1e6:.1f} MB) in {self.seconds:.1f} s"
        )


class _Graph(nn.Module):
    """backbone + head as one traceable function with named, float32 inputs and outputs.

    `Sapiens2Model.forward` checks fp16 features for overflow with a data-dependent branch, which a graph cannot
    hold; the ONNX runtime wrapper does that check on the outputs instead (`session.OnnxModel`)."""

    def __init__(self, model: Sapiens2Model) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: Tensor) -> tuple[Tensor, ...]:
        dtype = self.model.dtype
        features = self.model.backbone(image.to(dtype))
        head = getattr(self.model, "decode_head", None)
        out = features if head is None else head(features)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(t.to(torch.float32) for t in outs)


def patch_grid(model: Sapiens2Model, input_size: tuple[int, int]) -> tuple[int, int]:
    """The grid the backbone's blocks see for `input_size`, or OnnxExportError saying why it cannot be used."""
    cfg = model.cfg.backbone
    height, width = input_size
    step = cfg.patch_size * (cfg.tokenizer_window if cfg.tokenizer_layers else 1)
    if height % step or width % step:
        raise OnnxExportError(
            f"input size {height}x{width} does not fit this {cfg.size_name} model: both sides must be multiples "
            f"of {step} px"
        )
    grid = (height // cfg.patch_size, width // cfg.patch_size)
    if cfg.tokenizer_layers:
        grid = (grid[0] // cfg.tokenizer_window, grid[1] // cfg.tokenizer_window)
    fixed = model.spec.fixed_input_size
    if fixed is not None and tuple(fixed) != tuple(input_size):
        raise OnnxExportError(
            f"this pointmap model's scale branch only accepts {fixed[0]}x{fixed[1]} inputs, not {height}x{width}"
        )
    return grid


def check_exportable(model: Sapiens2Model) -> None:
    """Refuse, with the reason, what the exporter cannot turn into a dynamic-batch graph."""
    cfg = model.cfg.backbone
    if cfg.tokenizer_layers:
        check_size_exportable(cfg.size_name, tokenizer=True)


def check_size_exportable(size: str, *, tokenizer: bool = False) -> None:
    """The same refusal by size name, before an official file is looked up or downloaded (the 4K model is 4+ GB)."""
    if tokenizer or size.endswith("-4k"):
        raise OnnxExportError(
            f"the {size} model's 4K window tokenizer cannot be exported with a dynamic batch: its windows run in a "
            "Python loop of batch x windows / chunk steps, so tracing fixes the batch (a traced file runs only the "
            "batch size it was traced with); export a non-4K size, or run it in PyTorch"
        )


def export_onnx(
    source: str | os.PathLike | Sapiens2Model,
    out: str | os.PathLike,
    *,
    task: str | None = None,
    dtype: str = "fp32",
    input_size: tuple[int, int] = (NET_H, NET_W),
    source_sha256: str = "",
    overwrite: bool = False,
) -> ExportReport:
    """Export `source` (a checkpoint path or a loaded model) to the ONNX file `out`.

    task: refuse a checkpoint of another task. dtype: "fp32" (default, matches PyTorch fp32 within rel-L2 1e-5)
    or "fp16" weights and compute (inputs and outputs stay float32). The file's metadata_props describe it
    (`metadata.build_props`); weights above ONNX's 2 GB protobuf limit go to `<out>.data` beside it.
    """
    require_export_packages()
    if dtype not in WEIGHT_DTYPES:
        raise OnnxExportError(f"unknown export dtype {dtype!r}; choose fp32 or fp16")
    target = Path(out).expanduser()
    if target.suffix.lower() != ".onnx":
        raise OnnxExportError(f"the output file must end in .onnx, got {target.name!r}")
    if target.exists() and not overwrite:
        raise OnnxExportError(
            f"{target} exists; choose another name or overwrite it", hints={"cli": "add --overwrite"}
        )
    started = time.perf_counter()
    if isinstance(source, Sapiens2Model):
        model = source if source.dtype == WEIGHT_DTYPES[dtype] else source.to(WEIGHT_DTYPES[dtype])
        name = "model"
        if task is not None and model.task != task:
            raise OnnxExportError(f"the model is a {model.task} model, not {task}")
    else:
        path = Path(source).expanduser()
        name = path.name
        model = load_model(path, device="cpu", dtype=WEIGHT_DTYPES[dtype], task=task)
    check_exportable(model)
    grid = patch_grid(model, input_size)
    rope_dtype = model.backbone.rope_embed.rope_dtype
    props = build_props(
        model.spec,
        input_size=input_size,
        weights_dtype=dtype,
        rope_dtype=rope_dtype,
        source_checkpoint=name,
        source_sha256=source_sha256,
        exporter=f"torch {torch.__version__} dynamo, opset {OPSET}",
    )
    program = _trace(model, input_size, grid)
    program.model.metadata_props.update(props)
    program.model.doc_string = f"Sapiens2 {model.spec.size} {model.task} (sapiens2-studio export)"
    _save(program, target)
    return ExportReport(
        path=target,
        seconds=time.perf_counter() - started,
        size_bytes=target.stat().st_size + _data_size(target),
        metadata=parse_props(props, target.name),
    )


def _trace(model: Sapiens2Model, input_size: tuple[int, int], grid: tuple[int, int]) -> Any:
    """torch.export → ONNX (dynamo exporter), quietly; its own failure becomes an OnnxExportError."""
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    example = torch.zeros(2, 3, *input_size)  # batch 2: torch.export specialises sizes 0 and 1
    graph = _Graph(model).eval()
    noise = io.StringIO()
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)  # "torchvision is not installed" and progress lines are not the user's
    try:
        with (
            exportable(model, grid),
            torch.no_grad(),
            contextlib.redirect_stdout(noise),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            return torch.onnx.export(
                graph,
                (example,),
                dynamo=True,
                input_names=[INPUT_NAME],
                output_names=[name for name, _ in graph_outputs(model.task)],
                dynamic_shapes=({0: batch},),
                opset_version=OPSET,
                verbose=False,
                optimize=True,
            )
    except Exception as exc:  # the exporter raises many private types; the cause is in the text
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OnnxExportError(
            f"torch.onnx could not export the {model.spec.size} {model.task} model: {first}"
        ) from exc
    finally:
        logger.setLevel(level)


def _data_size(target: Path) -> int:
    data = data_file(target)
    return data.stat().st_size if data.is_file() else 0


def _save(program: Any, target: Path) -> None:
    """Write into a temporary folder beside the target, then move: a failed export leaves no half file (the
    external-data file keeps the name the graph refers to)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".onnx-export-") as tmp:
        staged = Path(tmp) / target.name
        large = sum(v.const_value.nbytes for v in program.model.graph.initializers.values() if v.const_value)
        program.save(str(staged), external_data=large > EXTERNAL_DATA_BYTES)
        seal(staged)
        data = data_file(staged)
        old_data = data_file(target)
        if old_data.exists() and not data.exists():
            old_data.unlink()
        if data.exists():
            os.replace(data, old_data)
        os.replace(staged, target)
        shutil.rmtree(tmp, ignore_errors=True)
