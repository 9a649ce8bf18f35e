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
from ..dtypes import UnknownDtypeError
from ..dtypes import resolve_dtype as resolve_choice
from .errors import CheckpointError
from .identity import (  # re-exported: the header checks' long-standing import path
    CheckpointIdentity,
    checked_model,
    identify,
    size_contradiction,
)
from .infer import infer_config
from .reader import SafetensorsReader, pickle_refusal, sniff_format


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """The one dtype rule (`core/dtypes.resolve_dtype`); a bad name is this layer's CheckpointError."""
    try:
        return resolve_choice(dtype, device)[0]
    except UnknownDtypeError as error:
        raise CheckpointError(error.message) from None


def _pickle_state_dict(path: Path) -> dict[str, torch.Tensor]:
    data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    for wrapper in ("state_dict", "model", "module"):
        if isinstance(data, dict) and isinstance(data.get(wrapper), dict):
            data = data[wrapper]
    if not isinstance(data, dict) or not all(isinstance(v, torch.Tensor) for v in data.values()):
        raise CheckpointError(f"{path.name} does not hold a flat state dict of tensors")
    return data


def convert_to_safetensors(source: str | os.PathLike, destination: str | os.PathLike) -> Path:
    """Convert a pickled checkpoint (.pth/.bin/.pt) the user trusts into a .safetensors file, once.

    Why: the CLI and ComfyUI load safetensors only (a pickle can run code when loaded); this is their way to use an
    old file. The pickle is read with `torch.load(weights_only=True)`, wrappers (`state_dict`, `model`, `module`)
    are unwrapped, the result is checked to be a Sapiens2 checkpoint, and the file is written atomically."""
    from safetensors.torch import save_file

    src, dst = Path(source).expanduser(), Path(destination).expanduser()
    if not src.is_file():
        raise CheckpointError(f"checkpoint not found: {src}")
    if not sniff_format(src).startswith("pickle"):
        raise CheckpointError(f"{src.name} is not a PyTorch pickle; only .pth/.bin/.pt files need converting")
    if dst.suffix != ".safetensors":
        raise CheckpointError(f"the converted file must end in .safetensors, got {dst.name}")
    tensors = {k: v.contiguous() for k, v in _pickle_state_dict(src).items()}
    infer_config({k: tuple(v.shape) for k, v in tensors.items()})  # refuse what is not a Sapiens2 file
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    try:
        save_file(tensors, str(tmp))
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
    return dst


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
    dtype: None/"auto" = `core/dtypes.auto_dtype` (fp32 on the CPU, bf16 where native, else fp16).
        `rope_embed.periods` always stays bfloat16.
    """
    device = torch.device(device)
    tensors: Mapping[str, torch.Tensor] | None = None
    if isinstance(source, Mapping):
        tensors = source
        name = "state dict"
    else:
        path = Path(source)
        name = path.name
        if not path.is_file():
            raise CheckpointError(f"checkpoint not found: {path}")
        if not sniff_format(path).startswith("pickle"):  # a safetensors file: its identity, then its weights
            return load_identity(identify(path, task=task, rope_dtype=rope_dtype), device, dtype)
        if not allow_pickle:
            raise pickle_refusal(path)
        tensors = _pickle_state_dict(path)
    shapes = {k: tuple(v.shape) for k, v in tensors.items()}
    model = checked_model(
        shapes, name, task=task, rope_dtype=rope_dtype, dtype=lambda: resolve_dtype(dtype, device)
    )
    if any(t.device.type == "meta" for t in tensors.values()):
        device = torch.device("meta")
    if device.type != "meta":
        model.materialize_(device)
        _fill(model, None, tensors, model.cfg.task != "pretrain")
    return model.eval().requires_grad_(False)


def load_identity(
    identity: CheckpointIdentity, device: str | torch.device = "cpu", dtype: str | torch.dtype | None = None
) -> Sapiens2Model:
    """The model of a checked checkpoint (`identity.identify`), its weights streamed from the header parsed
    then: no second header read, no second key check. A file changed since is identified again."""
    if identity.header is None or identity.config is None:
        raise CheckpointError(f"{identity.name} has no parsed safetensors header to load weights from")
    if not identity.is_current():  # replaced on disk since: what it is now is what loads
        rope = identity.config.backbone.rope_dtype
        identity = identify(identity.path, task=identity.task, rope_dtype=rope, hash_home=identity.hash_home)
    device = torch.device(device)
    model = Sapiens2Model(identity.config, device="meta", dtype=resolve_dtype(dtype, device))
    if device.type != "meta":
        model.materialize_(device)
        _fill(model, identity.header, None, identity.config.task != "pretrain")
    return model.eval().requires_grad_(False)


def refuse_size_contradiction(path: str | os.PathLike | CheckpointIdentity, size: str) -> None:
    """Refuse an official file fetched for an explicitly asked `size` whose architecture (read from the header
    alone, before any image is read; an identity's, when given one) is another size. Why: the user asked for that
    size's results; a warning is enough only when the size was not asked for (`size_contradiction`)."""
    file = path.path if isinstance(path, CheckpointIdentity) else Path(path)
    if file.suffix.lower() != ".safetensors" or not file.is_file():
        return
    spec = path.spec if isinstance(path, CheckpointIdentity) else identify(file).spec
    if spec is None:
        return
    message = size_contradiction(file.name, spec, requested=size)
    if message is not None:
        raise CheckpointError(
            message.replace("; its results are not the official model's", ", so it is refused"),
            hints={
                "cli": f"replace it (sapiens2 download --task {spec.task} --size {size} --force), or leave out "
                f"--size to run it anyway with a warning, or pass --checkpoint {spec.task}=PATH",
                "python": f"replace it, or leave size=None to run it anyway with a warning, or give it as the "
                f"{spec.task} checkpoint",
            },
        )


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
