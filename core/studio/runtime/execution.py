"""Where and how models run: one rule for device, dtype, attention backend and compilation, with its reasons.

Every front-end asks this module; nothing else picks a device or dtype. The chosen plan is recorded with each
result (the bundle's `models` entries), so a user can tell why a run was bf16 on one machine and fp32 on another.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ...dtypes import DTYPE_CHOICES as DTYPE_CHOICES  # the menu front-ends show
from ...dtypes import DTYPE_NAMES, UnknownDtypeError
from ...dtypes import resolve_dtype as resolve_choice
from ..errors import StudioError

ATTENTION_CHOICES = ("auto", "sdpa", "math")
# Fused attention kernels want head sizes that are multiples of this (the 5B model's 76 is not).
HEAD_DIM_MULTIPLE = 8


@dataclass(frozen=True)
class ExecutionPlan:
    """The decisions for one model: compute device, dtype, attention backend, head padding, compile."""

    device: torch.device
    dtype: torch.dtype
    attention: str = "sdpa"
    pad_head_dim_to: int = 0
    compile: bool = False
    reasons: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES.get(self.dtype, str(self.dtype).removeprefix("torch."))

    def describe(self) -> str:
        attention = self.attention + (
            f" (head dim padded to ×{self.pad_head_dim_to})" if self.pad_head_dim_to else ""
        )
        return (
            f"device {self.device}, dtype {self.dtype_name} ({self.reasons.get('dtype', 'as asked')}), "
            f"attention {attention}, compile {'on' if self.compile else 'off'}"
        )

    def record(self) -> dict[str, Any]:
        """JSON-ready summary (what ran where, and why)."""
        return {
            "device": str(self.device),
            "dtype": self.dtype_name,
            "attention": self.attention,
            "compile": self.compile,
            "reasons": dict(self.reasons),
        }


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(name: str | torch.device = "auto") -> tuple[torch.device, str]:
    """`auto` → CUDA if present, else Apple MPS, else CPU; an explicit device must exist. Returns (device, reason)."""
    if isinstance(name, torch.device):
        return name, "given by the host"
    text = str(name).strip().lower()
    if text == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda"), "auto: CUDA is available"
        if _mps_available():
            return torch.device("mps"), "auto: Apple MPS is available"
        return torch.device("cpu"), "auto: no CUDA or MPS device"
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise StudioError(
            f"unknown device {name!r}; use cpu, cuda, cuda:N, mps or auto", hints={"cli": "see --device"}
        ) from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise StudioError(
                f"device {name!r}: CUDA is not available on this machine (CPU-only PyTorch, or no GPU)",
                hints={"cli": "use --device cpu", "python": "use device='cpu'"},
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise StudioError(
                f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s), numbered from 0"
            )
    elif device.type == "mps" and not _mps_available():
        raise StudioError(f"device {name!r}: Apple MPS is not available on this machine")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise StudioError(f"unknown device {name!r}; use cpu, cuda, cuda:N, mps or auto")
    return device, "as asked"


def resolve_dtype(
    choice: str | torch.dtype | None, device: torch.device, *, bf16_supported: bool | None = None
) -> tuple[torch.dtype, str]:
    """The one dtype rule (`core/dtypes.resolve_dtype`): a choice as asked, `auto` by device. Returns (dtype,
    reason); a bad name is this layer's StudioError.

    `bf16_supported` lets a host that knows better (ComfyUI's model management) answer for the device.
    """
    try:
        return resolve_choice(choice, device, bf16_supported=bf16_supported)
    except UnknownDtypeError as error:
        raise StudioError(error.message) from None


def resolve_attention(choice: str, device: torch.device, head_dim: int | None) -> tuple[str, int, str]:
    """`auto` = fused SDPA; on accelerators an odd head size is zero-padded so fused kernels apply (5B: 76 → 80).

    Returns (backend, pad multiple or 0, reason)."""
    if choice not in ATTENTION_CHOICES:
        raise StudioError(
            f"unknown attention backend {choice!r}; choose one of {', '.join(ATTENTION_CHOICES)}"
        )
    if choice != "auto":
        return choice, 0, "as asked"
    if device.type != "cpu" and head_dim is not None and head_dim % HEAD_DIM_MULTIPLE:
        return "sdpa", HEAD_DIM_MULTIPLE, f"auto: head dim {head_dim} padded for fused kernels"
    return "sdpa", 0, "auto: fused attention"


def plan_execution(
    device: str | torch.device = "auto",
    dtype: str | torch.dtype = "auto",
    attention: str = "auto",
    compile: bool = False,
    *,
    head_dim: int | None = None,
    bf16_supported: bool | None = None,
) -> ExecutionPlan:
    """Resolve every choice once; `head_dim` (from the checkpoint) decides head padding."""
    dev, device_reason = resolve_device(device)
    torch_dtype, dtype_reason = resolve_dtype(dtype, dev, bf16_supported=bf16_supported)
    backend, pad, attention_reason = resolve_attention(attention, dev, head_dim)
    reasons = {"device": device_reason, "dtype": dtype_reason, "attention": attention_reason}
    return ExecutionPlan(dev, torch_dtype, backend, pad, bool(compile), reasons)


def apply_plan(model: Any, plan: ExecutionPlan) -> None:
    """Set the attention backend and compile in place (the module keeps its attributes and stays movable, which
    ComfyUI's model management needs)."""
    model.set_attention(plan.attention, pad_head_dim_to=plan.pad_head_dim_to)
    if plan.compile:
        model.compile(dynamic=False)
