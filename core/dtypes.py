"""The one `auto` dtype rule and the one parser of dtype choices, below every layer that needs them.

`core/checkpoints.load_model` (the low-level Python API) and `core/studio/runtime/execution` (every front-end) both turn a
user's dtype choice into a torch dtype; before this module each had its own names and its own `auto` rule, and
they disagreed on Apple MPS (fp32 vs bf16/fp16). Both now call `resolve_dtype`, so the same choice on the same
device gives the same dtype whichever door a user comes in by. A bad name raises `UnknownDtypeError`, which each
caller turns into its own layer's error (CheckpointError, StudioError).
"""

from __future__ import annotations

import torch

from .errors import Sapiens2Error

# The names a user may give, shown in menus and errors; `auto` applies `auto_dtype`.
DTYPE_CHOICES = ("auto", "bf16", "fp16", "fp32")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
# torch's own spellings, accepted everywhere (the low-level loader always took them)
ALIASES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


class UnknownDtypeError(Sapiens2Error, ValueError):
    """A dtype name that is neither a choice nor an alias; callers re-raise it as their layer's error."""


def bf16_native(device: torch.device) -> bool:
    """Whether `device` runs bfloat16 natively (CUDA with bf16 support, MPS on macOS 14 or newer)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "mps":
        backend = torch.backends.mps
        if not backend.is_available():  # its macOS version query raises off macOS
            return False
        return bool(getattr(backend, "is_macos_or_newer", lambda *_: False)(14, 0))
    return False


def auto_dtype(device: torch.device, *, bf16_supported: bool | None = None) -> tuple[torch.dtype, str]:
    """bf16 on accelerators that have it (the models were trained in bf16), fp16 on other accelerators (their
    fast half type), fp32 on the CPU -- also on CPUs with native bf16, by a measured decision
    (docs/performance.md): fp32 is bit-exact with the official implementation and gives the same numbers on
    every CPU, which a farm of mixed machines needs. Returns (dtype, reason).

    `bf16_supported` lets a host that knows better (ComfyUI's model management) answer for the device.
    """
    if device.type == "cpu":
        return torch.float32, "auto: fp32 on the CPU"
    supported = bf16_native(device) if bf16_supported is None else bf16_supported
    if supported:
        return torch.bfloat16, f"auto: bf16 on {device.type} (as trained)"
    return torch.float16, f"auto: fp16 ({device.type} without native bf16)"


def resolve_dtype(
    choice: str | torch.dtype | None, device: torch.device, *, bf16_supported: bool | None = None
) -> tuple[torch.dtype, str]:
    """A torch dtype or a name (a choice or an alias) as asked; None or `auto` by `auto_dtype`.

    Returns (dtype, reason); raises `UnknownDtypeError` for any other name.
    """
    if isinstance(choice, torch.dtype):
        return choice, "as asked"
    if choice is None or choice == "auto":
        return auto_dtype(device, bf16_supported=bf16_supported)
    name = ALIASES.get(choice, choice) if isinstance(choice, str) else choice
    if name not in DTYPES:
        raise UnknownDtypeError(f"unknown dtype {choice!r}; choose one of {', '.join(DTYPE_CHOICES)}")
    return DTYPES[name], "as asked"
