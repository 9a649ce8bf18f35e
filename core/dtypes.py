"""The one `auto` dtype rule, below every layer that needs it.

`core/checkpoints.load_model` (the low-level Python API) and `core/studio/execution` (every front-end) both resolve
`dtype="auto"`; before this module each had its own rule and they disagreed on Apple MPS (fp32 vs bf16/fp16).
Both now ask `auto_dtype`, so the same device gives the same dtype whichever door a user comes in by.
"""

from __future__ import annotations

import torch


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
