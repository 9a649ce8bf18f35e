"""The fixture synthesizer described in ../shared/fixtures/parity/README.md, re-implemented from that text.

Each tensor comes from its own generator seeded with (seed << 32) | crc32(key); `rope_embed.periods` is the
model's own bf16 buffer.  The sha256 values in the fixture JSONs confirm the regenerated weights bit for bit.
"""

from __future__ import annotations

import hashlib
import zlib

import torch
from sapiens2_studio.core.arch.rope import rope_periods


def fixture_tensor(key: str, shape: tuple[int, ...], seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed((seed << 32) | zlib.crc32(key.encode("utf-8")))
    if key.endswith("attn.gamma.weight"):
        return 0.3 + 0.7 * torch.rand(shape, generator=gen, dtype=torch.float32)
    z = torch.randn(shape, generator=gen, dtype=torch.float32)
    if key.endswith(("cls_token", "storage_tokens", "w_cls", "local_pos_embed")):
        return z
    if key.endswith(".bias"):
        return 0.02 * z
    if key.endswith(".weight") and len(shape) == 1:
        return 1.0 + 0.1 * z
    if key.endswith(".weight"):
        fan_in = 1
        for s in shape[1:]:
            fan_in *= s
        return z * (1 / fan_in**0.5)
    raise KeyError(f"the fixture synthesizer has no rule for {key}")


def fixture_state_dict(shapes: dict[str, list[int]], head_dim: int, seed: int = 1) -> dict[str, torch.Tensor]:
    out = {}
    for key, shape in shapes.items():
        if key.endswith("rope_embed.periods"):
            out[key] = rope_periods(head_dim)
        else:
            out[key] = fixture_tensor(key, tuple(shape), seed)
    return out


def tensor_sha256(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()
