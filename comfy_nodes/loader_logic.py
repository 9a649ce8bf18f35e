"""Model loading for the loader node: dtype and attention choices, optional compile, verified download.

Plain functions over ``core``; the node adds ComfyUI's model folder and ModelPatcher around them.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..core import load_model
from ..core.catalogue import ALL_TASKS, PRETRAIN, SIZES, TASK_SIZES_RELEASED
from ..core.checkpoints import hub
from .types import LoadedModel

DTYPE_CHOICES = ("auto", "bf16", "fp16", "fp32")
ATTENTION_CHOICES = ("auto", "sdpa", "math")
DOWNLOAD_TASKS = tuple(t for t in ("pose", "seg", "normal", "pointmap", "albedo", PRETRAIN) if t in ALL_TASKS)
DOWNLOAD_SIZES = (*TASK_SIZES_RELEASED, *(s for s in SIZES if s not in TASK_SIZES_RELEASED))
DOWNLOAD_CHOICE = "(download: task + size below)"
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def resolve_dtype(choice: str, compute: torch.device, *, bf16_supported: bool | None = None) -> torch.dtype:
    """``auto``: bf16 where the accelerator has it (the models were trained in bf16), fp16 on other GPUs,
    fp32 on the CPU (CPU half precision is slow and gains nothing)."""
    if choice in _DTYPES:
        return _DTYPES[choice]
    if choice != "auto":
        raise ValueError(f"unknown dtype {choice!r}; choose one of {', '.join(DTYPE_CHOICES)}")
    if compute.type == "cpu":
        return torch.float32
    if bf16_supported is None:
        bf16_supported = compute.type == "cuda" and torch.cuda.is_bf16_supported()
    return torch.bfloat16 if bf16_supported else torch.float16


def apply_attention(model, choice: str, compute: torch.device) -> str:
    """Set the attention backend; ``auto`` = fused SDPA, zero-padding odd head sizes (5B: 76) on accelerators."""
    if choice not in ATTENTION_CHOICES:
        raise ValueError(
            f"unknown attention backend {choice!r}; choose one of {', '.join(ATTENTION_CHOICES)}"
        )
    backend = "sdpa" if choice == "auto" else choice
    pad = 8 if (choice == "auto" and compute.type != "cpu" and model.spec.head_dim % 8) else 0
    model.set_attention(backend, pad_head_dim_to=pad)
    return backend if not pad else f"{backend} (head dim padded to a multiple of {pad})"


def load_sapiens2(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    dtype: str = "auto",
    attention: str = "auto",
    compile_model: bool = False,
    compute: str | torch.device = "cpu",
    storage: str | torch.device = "cpu",
    bf16_supported: bool | None = None,
) -> LoadedModel:
    """Load a checkpoint onto ``storage`` (ComfyUI's offload device) in the dtype chosen for ``compute``."""
    compute = torch.device(compute)
    torch_dtype = resolve_dtype(dtype, compute, bf16_supported=bf16_supported)
    model = load_model(path, device=storage, dtype=torch_dtype)
    backend = apply_attention(model, attention, compute)
    if compile_model:
        # In place, so the module keeps its attributes (task, spec) and ModelPatcher can still move it.
        model.compile(dynamic=False)
    return LoadedModel(
        model=model,
        task=model.task,
        spec=model.spec,
        checkpoint=name or Path(path).name,
        dtype=torch_dtype,
        attention=backend,
        compile=compile_model,
        extra={"path": str(path)},
    )


def download(task: str, size: str, folder: str | os.PathLike) -> Path:
    """The official ``task``/``size`` checkpoint under ``folder/<task>/``, downloaded and sha256-checked once."""
    if task not in DOWNLOAD_TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(DOWNLOAD_TASKS)}")
    return hub.ensure_checkpoint(task, size, home=folder)


def download_target(task: str, size: str, folder: str | os.PathLike) -> Path | None:
    """Where the download entry keeps ``task``/``size`` under ``folder`` (None where no official file exists)."""
    try:
        return hub.local_checkpoint_path(task, size, home=folder)
    except hub.HubError:
        return None


def missing_checkpoint_hint(name: str) -> str:
    """For a missing file named like an official one (``sapiens2_1b_pose.safetensors``, as the example workflows
    name them), how to fetch it with the download entry; '' otherwise."""
    stem = Path(name).name.removesuffix(".safetensors")
    parts = stem.split("_")
    if len(parts) != 3 or parts[0] != "sapiens2":
        return ""
    size, task = parts[1], parts[2]
    try:
        hub.checkpoint_ref(task, size)
    except hub.HubError:
        return ""
    return (
        f", or set 'checkpoint' to '{DOWNLOAD_CHOICE}' with download_task '{task}' and download_size '{size}' to "
        "fetch the official file"
    )


def checkpoint_fingerprint(path: str | os.PathLike | None) -> str:
    """Cheap identity of a checkpoint file for ComfyUI's cache: path, size and modification time.

    An unchanged file keeps the loaded model cached; a file replaced under the same name loads again.  Hashing
    is no option here: ComfyUI asks on every queued prompt and a 5B checkpoint is 20 GB.
    """
    if path is None:
        return "no file"
    try:
        stat = os.stat(path)
    except OSError:
        return f"{path}|missing"  # the loader runs and reports what is wrong
    return f"{path}|{stat.st_size}|{stat.st_mtime_ns}"


def checkpoint_sha256(record: dict) -> str | None:
    """sha256 of the file behind a model record (cached by path, size and mtime next to the checkpoint)."""
    if record.get("sha256"):
        return record["sha256"]
    path = record.get("path")
    if not path or not Path(path).is_file():
        return None
    return hub.file_sha256(path, home=Path(path).parent)
