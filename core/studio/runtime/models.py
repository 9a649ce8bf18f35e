"""Loaded models with their provenance, and a cache keyed by file and execution plan.

A `LoadedModel` is what every front-end passes around (ComfyUI's SAPIENS2_MODEL socket carries one): the module,
its task and architecture, the execution plan it runs under, and where it came from (file name, size, sha256 on
demand), which becomes the capture bundle's `models` entry. Where it came from is the file's one
`CheckpointIdentity` (`core/checkpoints/identity.py`): the header is read and checked once, the weights load from
that parsed header, and the sha256 is the identity's (hashed at most once).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ... import catalogue
from ...checkpoints import hub
from ...checkpoints.identity import CheckpointIdentity, identify, identify_file
from ...checkpoints.loader import load_identity, size_contradiction
from ..errors import StudioError
from .execution import ExecutionPlan, apply_plan, plan_execution

# Who computes the forward pass: PyTorch, or ONNX Runtime on an exported file (core/onnx; docs/deploy.md).
# Everything before and after the forward pass is the same code either way.
RUNTIMES = ("torch", "onnxruntime")
ONNX_SUFFIX = ".onnx"
_PROVIDER_DEVICES = {
    "CPUExecutionProvider": "cpu",
    "CUDAExecutionProvider": "cuda",
    "TensorrtExecutionProvider": "cuda",
}


@dataclass
class LoadedModel:
    """A model ready to run, with where it came from.

    `model` rests on `storage` until a host activates it on the plan's device; `host_handle` is a front-end's own
    wrapper (ComfyUI's ModelPatcher), None elsewhere.
    """

    model: Any
    task: str
    spec: Any
    checkpoint: str
    plan: ExecutionPlan
    path: Path | None = None
    size_bytes: int | None = None
    sha256: str | None = None
    hash_cache_dir: Path | None = None
    host_handle: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    runtime: str = "torch"
    identity: CheckpointIdentity | None = None

    @property
    def dtype(self) -> torch.dtype:
        return self.plan.dtype

    def describe(self) -> str:
        label = catalogue.TASK_LABELS.get(self.task, self.task)
        size = f" ({self.size_bytes / 1e9:.2f} GB)" if self.size_bytes and self.size_bytes >= 1e8 else ""
        return f"Sapiens2 {self.spec.size} {label} from {self.checkpoint}{size}"

    def checkpoint_sha256(self) -> str | None:
        """sha256 of the file: its identity's (hashed once, then cached next to the checkpoints by path, size and
        mtime)."""
        if self.sha256 is None and self.identity is not None and self.identity.is_current():
            self.sha256 = self.identity.sha256
        elif self.sha256 is None and self.path is not None and self.path.is_file():
            self.sha256 = hub.file_sha256(self.path, self.hash_cache_dir)
        return self.sha256

    def record(self) -> dict[str, Any]:
        """The capture bundle's `models` entry: task, size, file, sha256 and how it ran."""
        return {
            "task": self.task,
            "size": self.spec.size,
            "checkpoint": self.checkpoint,
            "sha256": self.checkpoint_sha256(),
            "dtype": self.plan.dtype_name,
            "device": self.plan.device.type,
            # the file's architecture contradicts its official name (checkpoints.loader.size_contradiction)
            **({"warning": self.extra["warning"]} if self.extra.get("warning") else {}),
            **self.extra.get("runtime_record", {}),
        }


def file_fingerprint(path: str | os.PathLike | None) -> str:
    """Cheap identity of a checkpoint file (path, size, mtime): an unchanged file stays cached, a file replaced
    under the same name loads again. Hashing is no option here: hosts ask on every run and a 5B file is 20 GB."""
    if path is None:
        return "no file"
    try:
        stat = os.stat(path)
    except OSError:
        return f"{path}|missing"
    return f"{Path(path).resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


def load(
    path: str | os.PathLike | CheckpointIdentity,
    *,
    task: str | None = None,
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
    attention: str = "auto",
    compile: bool = False,
    storage: str | torch.device | None = None,
    bf16_supported: bool | None = None,
    name: str | None = None,
    hash_cache_dir: str | os.PathLike | None = None,
    runtime: str = "torch",
) -> LoadedModel:
    """Load a checkpoint under the plan the one `auto` rule gives; weights rest on `storage` (default: the compute
    device; ComfyUI passes its offload device). runtime "onnxruntime": an exported `.onnx` file, or a checkpoint
    exported once into `<checkpoint folder>/onnx` (see `_load_onnx`). `path` may be the file's identity, made when
    the job planned (`check_checkpoint`): its header is then not read again."""
    identity = path if isinstance(path, CheckpointIdentity) else None
    file = identity.path if identity is not None else Path(path).expanduser()
    if identity is not None and not identity.is_current():  # replaced since it was identified
        identity = None
    if not file.is_file():
        raise StudioError(
            f"checkpoint not found: {file}",
            hints={
                "cli": "check the --checkpoint path",
                "comfyui": "put it into models/sapiens2 and press R",
            },
        )
    check_runtime(file, runtime)
    if runtime == "onnxruntime":
        return _load_onnx(
            file,
            task=task,
            device=device,
            dtype=dtype,
            name=name,
            hash_cache_dir=hash_cache_dir,
            identity=identity,
        )
    identity = _checked(file, identity, task=task, hash_home=hash_cache_dir)  # the header, read once
    assert identity.spec is not None
    plan = plan_execution(
        device, dtype, attention, compile, head_dim=identity.spec.head_dim, bf16_supported=bf16_supported
    )
    model = load_identity(identity, device=storage if storage is not None else plan.device, dtype=plan.dtype)
    apply_plan(model, plan)
    return _loaded(model, file, plan, name=name, hash_cache_dir=hash_cache_dir, identity=identity)


def _checked(
    file: Path,
    identity: CheckpointIdentity | None,
    *,
    task: str | None,
    hash_home: str | os.PathLike | None,
    cache: ModelCache | None = None,
) -> CheckpointIdentity:
    """The identity of the checkpoint `file`, checked for `task`: the given one when it has a parsed header,
    else the cache's, else read now (the header and every key and shape, `checkpoints.identity.identify`)."""
    if identity is None or identity.header is None:
        if cache is not None:
            return cache.identity(file, task=task, hash_home=hash_home)
        return identify(file, task=task, hash_home=hash_home)
    if task is not None:
        identity.require_task(task)
    return identity


def runtime_for(path: str | os.PathLike) -> str:
    """The runtime a file needs where the front-end offers no choice (ComfyUI's loader): ONNX Runtime for an
    exported .onnx file, PyTorch for a checkpoint."""
    return "onnxruntime" if Path(path).suffix.lower() == ONNX_SUFFIX else "torch"


def check_runtime(path: Path, runtime: str) -> None:
    """A known runtime, and a file it can run (an .onnx file is ONNX Runtime's only)."""
    if runtime not in RUNTIMES:
        raise StudioError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    if runtime == "torch" and path.suffix.lower() == ONNX_SUFFIX:
        raise StudioError(
            f"{path.name} is an ONNX file, which runs with ONNX Runtime, not PyTorch",
            hints={
                "cli": "add --runtime onnxruntime",
                "python": "pass runtime='onnxruntime'",
                "comfyui": "set runtime to onnxruntime",
            },
        )
    if runtime == "onnxruntime":  # the optional extra: say how to install it before any image is read
        from ...onnx.export import require_export_packages
        from ...onnx.session import require_onnxruntime

        require_onnxruntime()
        if path.suffix.lower() != ONNX_SUFFIX:
            require_export_packages()  # a checkpoint is exported once first


def check_checkpoint(
    path: str | os.PathLike,
    *,
    task: str,
    runtime: str = "torch",
    cache: ModelCache | None = None,
    hash_home: str | os.PathLike | None = None,
) -> CheckpointIdentity:
    """Cheap checks before any image is read: the runtime fits the file, the file is whole and of `task`
    (a checkpoint's header; an ONNX file's top level and integrity seal). Returns the file's identity, which
    the loader and the run records then read instead of the file (`cache`: one identity per file version)."""
    file = Path(path)
    check_runtime(file, runtime)
    if file.suffix.lower() == ONNX_SUFFIX:
        from ...onnx.session import read_metadata

        read_metadata(file, task=task)
        return identify_file(file, task=task, hash_home=hash_home)
    return _checked(file, None, task=task, hash_home=hash_home, cache=cache)


def _load_onnx(
    file: Path,
    *,
    task: str | None,
    device: str | torch.device,
    dtype: str | torch.dtype,
    name: str | None,
    hash_cache_dir: str | os.PathLike | None,
    identity: CheckpointIdentity | None = None,
) -> LoadedModel:
    """The ONNX Runtime model of `file`; a checkpoint is exported first (once: kept under the checkpoint
    folder's `onnx/`, named by the checkpoint's fingerprint). Pre/post-processing run on the CPU; the execution
    provider (the best one installed, `onnx.session.choose_providers`) is recorded in the bundle's models entry."""
    from ...onnx.cache import ensure_exported
    from ...onnx.session import OnnxModel

    weights = "fp16" if str(dtype) in ("fp16", "torch.float16") else "fp32"
    notes: dict[str, str] = {}
    onnx_file = file
    if file.suffix.lower() != ONNX_SUFFIX:
        # a wrong or damaged checkpoint says so before exporting
        identity = _checked(file, identity, task=task, hash_home=hash_cache_dir)
        folder = hub.checkpoint_home(hash_cache_dir) / "onnx"
        onnx_file, made = ensure_exported(
            file, task=task, dtype=weights, folder=folder, fingerprint=file_fingerprint(file)
        )
        notes["export"] = f"{'exported now' if made else 'exported before'} to {onnx_file}"
    model = OnnxModel(onnx_file, task=task, device=str(device))
    if identity is None:  # an exported file: its own metadata was checked by OnnxModel
        identity = identify_file(file, task=model.task, hash_home=hash_cache_dir)
    meta = model.metadata
    reasons = {
        "runtime": f"onnxruntime on {model.provider}",
        "dtype": f"{meta.weights_dtype} weights in the file",
    }
    plan = ExecutionPlan(torch.device("cpu"), torch.float32, "onnxruntime", 0, False, {**reasons, **notes})
    record = {
        "dtype": meta.weights_dtype,
        "device": _PROVIDER_DEVICES.get(
            model.provider, model.provider.removesuffix("ExecutionProvider").lower()
        ),
        "runtime": "onnxruntime",
        "provider": model.provider,
        "onnx_file": onnx_file.name,
        "onnx_weights": meta.weights_dtype,
    }
    return _loaded(
        model,
        file,
        plan,
        name=name,
        hash_cache_dir=hash_cache_dir,
        extra={"runtime_record": record},
        runtime="onnxruntime",
        exported_from=meta.source_checkpoint if file.suffix.lower() == ONNX_SUFFIX else None,
        identity=identity,
    )


def _loaded(
    model: Any,
    file: Path,
    plan: ExecutionPlan,
    *,
    name: str | None,
    hash_cache_dir: str | os.PathLike | None,
    extra: dict[str, Any] | None = None,
    runtime: str = "torch",
    exported_from: str | None = None,
    identity: CheckpointIdentity | None = None,
) -> LoadedModel:
    """The LoadedModel of `model` read from `file`, with the size warning either runtime gives: a file whose
    official name promises another size than its tensors hold (`size_contradiction`). An .onnx file is judged
    by its own name and by the checkpoint it was exported from (`exported_from`, from its metadata), since the
    export carries the checkpoint's architecture and not its name."""
    checkpoint = name or file.name
    extra = dict(extra or {})
    warning = size_contradiction(checkpoint, model.spec)
    if warning is None and exported_from:
        warning = size_contradiction(exported_from, model.spec)
        warning = warning and f"{warning} ({checkpoint} was exported from it)"
    if warning:
        extra["warning"] = warning
    return LoadedModel(
        model=model,
        task=model.task,
        spec=model.spec,
        checkpoint=checkpoint,
        plan=plan,
        path=file,
        size_bytes=identity.size_bytes if identity is not None else file.stat().st_size,
        hash_cache_dir=None if hash_cache_dir is None else Path(hash_cache_dir),
        extra=extra,
        runtime=runtime,
        identity=identity,
    )


class ModelCache:
    """Models loaded once per (file fingerprint, task, plan choices): a second request gets the same object. It
    keeps each checkpoint's identity too (`identity`): a host or a distributed run's worker that plans many jobs
    reads a file's header once per file version, not once per job."""

    def __init__(self) -> None:
        self._models: dict[tuple, LoadedModel] = {}
        self._identities: dict[tuple, CheckpointIdentity] = {}

    def get(self, path: str | os.PathLike | CheckpointIdentity, **options: Any) -> LoadedModel:
        file = path.path if isinstance(path, CheckpointIdentity) else path
        key = (file_fingerprint(file), tuple(sorted((k, str(v)) for k, v in options.items())))
        cached = self._models.get(key)
        if cached is None:
            cached = self._models[key] = load(path, **options)
        return cached

    def identity(
        self, path: str | os.PathLike, *, task: str | None = None, hash_home: str | os.PathLike | None = None
    ) -> CheckpointIdentity:
        """The checkpoint's identity (`checkpoints.identity.identify`), read once per file version, checked for
        `task` on every request."""
        key = (file_fingerprint(path), str(hash_home))
        known = self._identities.get(key)
        if known is None:
            known = self._identities[key] = identify(path, task=task, hash_home=hash_home)
        elif task is not None:
            known.require_task(task)
        return known

    def clear(self) -> None:
        self._models.clear()
        self._identities.clear()

    def __len__(self) -> int:
        return len(self._models)
