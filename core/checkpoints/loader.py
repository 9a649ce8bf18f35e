"""`load_model`: checkpoint (path or mapping) → a ready Sapiens2 model on the target device and dtype.

The model is first built on the meta device from the inferred config, its expected key → shape map is compared
with the checkpoint (strict: every missing, unexpected or mis-shaped key is an error), then weights are streamed
tensor by tensor into storage allocated once on the target device in the target dtype.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch

from ..arch import Sapiens2Model
from ..catalogue import ALL_TASKS, task_file_hint
from .errors import CheckpointError
from .infer import infer_config
from .reader import PICKLE_HINT, SafetensorsReader, sniff_format

_DTYPE_NAMES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """None/"auto" → bfloat16 on CUDA (the released models were trained in bf16), float32 elsewhere."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if dtype not in _DTYPE_NAMES:
        raise CheckpointError(f"unknown dtype {dtype!r}; use one of auto, {', '.join(sorted(_DTYPE_NAMES))}")
    return _DTYPE_NAMES[dtype]


def expected_shapes(model: Sapiens2Model, *, prefixed: bool) -> dict[str, tuple[int, ...]]:
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    if prefixed:
        return shapes
    return {k[len("backbone.") :]: v for k, v in shapes.items()}


def check_keys(expected: Mapping[str, tuple], found: Mapping[str, tuple], description: str) -> None:
    """Strict comparison; the error lists the first few offenders of each kind and says what the file is."""
    missing = [k for k in expected if k not in found]
    unexpected = [k for k in found if k not in expected]
    mismatched = [
        f"{k}: file {tuple(found[k])} vs model {tuple(expected[k])}"
        for k in expected
        if k in found and tuple(found[k]) != tuple(expected[k])
    ]
    if not (missing or unexpected or mismatched):
        return
    parts = [f"the checkpoint does not fit the model inferred from it ({description})"]
    for label, items in (
        ("missing keys", missing),
        ("unexpected keys", unexpected),
        ("shape mismatches", mismatched),
    ):
        if items:
            more = f", … (+{len(items) - 5} more)" if len(items) > 5 else ""
            parts.append(f"{label} ({len(items)}): {', '.join(items[:5])}{more}")
    raise CheckpointError("; ".join(parts))


def _pickle_state_dict(path: Path) -> dict[str, torch.Tensor]:
    data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    for wrapper in ("state_dict", "model", "module"):
        if isinstance(data, dict) and isinstance(data.get(wrapper), dict):
            data = data[wrapper]
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise CheckpointError(f"{path.name} does not hold a flat state dict of tensors")
    return data


def load_model(
    source: str | os.PathLike | Mapping[str, torch.Tensor],
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype | None = None,
    *,
    task: str | None = None,
    rope_dtype: str = "bf16",
    allow_pickle: bool = False,
) -> Sapiens2Model:
    """Build the Sapiens2 model a checkpoint describes and load it strictly.

    source: a `.safetensors` path (pretrain file with bare backbone keys, or task file with `backbone.*` +
        `decode_head.*`), or a mapping key → tensor (meta tensors allowed: the model is then built on `meta`).
    task: when given, a checkpoint of another task raises `CheckpointError` naming both.
    dtype: None/"auto" = bf16 on CUDA, fp32 otherwise.  `rope_embed.periods` always stays bfloat16.
    """
    device = torch.device(device)
    reader: SafetensorsReader | None = None
    tensors: Mapping[str, torch.Tensor] | None = None
    if isinstance(source, Mapping):
        tensors = source
        name = "state dict"
    else:
        path = Path(source)
        name = path.name
        if not path.is_file():
            raise CheckpointError(f"checkpoint not found: {path}")
        kind = sniff_format(path)
        if kind.startswith("pickle"):
            if not allow_pickle:
                raise CheckpointError(
                    f"{name} is a PyTorch pickle (.pth/.bin/.pt), not safetensors. {PICKLE_HINT}"
                )
            tensors = _pickle_state_dict(path)
        else:
            reader = SafetensorsReader(path)
    shapes = reader.shapes if reader is not None else {k: tuple(v.shape) for k, v in tensors.items()}
    cfg = infer_config(shapes, rope_dtype=rope_dtype)
    if task is not None and cfg.task != task:
        raise CheckpointError(
            f"{name} is a {cfg.task} checkpoint, but a {task} model is needed here: choose "
            f"{task_file_hint(task) if task in ALL_TASKS else task}"
        )
    target_dtype = resolve_dtype(dtype, device)
    model = Sapiens2Model(cfg, device="meta", dtype=target_dtype)
    prefixed = cfg.task != "pretrain"
    layout = "task file: backbone.* + decode_head.*" if prefixed else "pretrain file: bare backbone keys"
    check_keys(
        expected_shapes(model, prefixed=prefixed),
        shapes,
        f"{name}, {layout}, {len(shapes)} keys, inferred {cfg.backbone.size_name} {cfg.task}",
    )
    if tensors is not None and any(t.device.type == "meta" for t in tensors.values()):
        device = torch.device("meta")
    if device.type != "meta":
        model.materialize_(device)
        _fill(model, reader, tensors, prefixed)
    return model.eval().requires_grad_(False)


def _fill(model: Sapiens2Model, reader: SafetensorsReader | None, tensors, prefixed: bool) -> None:
    targets = model.state_dict(keep_vars=True)
    with torch.no_grad():
        if reader is not None:
            with open(reader.path, "rb") as handle:
                for key, param in targets.items():
                    file_key = key if prefixed else key[len("backbone.") :]
                    reader.read_into(file_key, param.data, handle)
        else:
            for key, param in targets.items():
                file_key = key if prefixed else key[len("backbone.") :]
                param.data.copy_(tensors[file_key])
