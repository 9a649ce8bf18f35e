"""2-axis rotary position embedding (DINOv3 style) as used by Sapiens2.

Parity target: the released models compute coordinates, angles, sin and cos in bfloat16 and round q/k through
bfloat16 before rotating them (`rope_dtype="bf16"`, the default).  The fp32 option keeps the stored bf16
`periods` values and only changes the compute dtype (the official code built with `pos_embed_rope_dtype="fp32"`).
`periods="exact"` (fp32 only) uses base ** (4i / head_dim) in float32 instead of the stored bf16-rounded buffer,
which is what Hugging Face Transformers' port computes (it ignores `rope_embed.periods` when loading).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

_DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
PERIOD_SOURCES = ("checkpoint", "exact")


def rope_periods(head_dim: int, base: float = 100.0, device=None) -> Tensor:
    """The `periods` buffer exactly as the released checkpoints store it (computed in bfloat16)."""
    quarter = head_dim // 4
    exponent = 2 * torch.arange(quarter, dtype=torch.bfloat16, device=device) / (head_dim // 2)
    return base**exponent


class RopeEmbedding(nn.Module):
    """Produces (sin, cos) of shape (H*W, head_dim) for a patch grid; `periods` is a persistent buffer."""

    def __init__(self, head_dim: int, *, base: float = 100.0, rope_dtype: str = "bf16", device=None) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.base = base
        self.rope_dtype = rope_dtype
        self.periods_source = "checkpoint"  # or "exact" (fp32 only): see the module docstring
        periods = torch.empty(head_dim // 4, dtype=torch.bfloat16, device=device)
        if periods.device.type != "meta":
            periods.copy_(rope_periods(head_dim, base, device=periods.device))
        self.register_buffer("periods", periods, persistent=True)
        self._cache: dict[tuple, tuple[Tensor, Tensor]] = {}

    @property
    def compute_dtype(self) -> torch.dtype:
        return _DTYPES[self.rope_dtype]

    def _apply(self, fn, recurse=True):  # device/dtype moves invalidate the sin/cos cache
        self._cache.clear()
        return super()._apply(fn, recurse)

    def forward(self, *, height: int, width: int) -> tuple[Tensor, Tensor]:
        key = (height, width, self.periods.device, self.rope_dtype, self.periods_source)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        dtype = self.compute_dtype
        device = self.periods.device
        # Keep the op order of the reference: every step rounds to `dtype`.
        coords_h = torch.arange(0.5, height, dtype=dtype, device=device) / height
        coords_w = torch.arange(0.5, width, dtype=dtype, device=device) / width
        coords = torch.stack(torch.meshgrid(coords_h, coords_w, indexing="ij"), dim=-1).flatten(0, 1)
        coords = 2.0 * coords - 1.0
        if self.periods_source == "exact":  # float64 on the CPU (MPS has none), rounded once to `dtype`
            exponent = torch.arange(self.head_dim // 4, dtype=torch.float64) * 4 / self.head_dim
            periods = (self.base**exponent).to(device=device, dtype=dtype)
        else:
            periods = self.periods.to(dtype)
        angles = 2 * math.pi * coords[:, :, None] / periods[None, None, :]
        angles = angles.flatten(1, 2).tile(2)
        result = (torch.sin(angles), torch.cos(angles))
        if not torch.compiler.is_compiling():
            self._cache[key] = result
        return result


def rotate_half(x: Tensor) -> Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def _rotate_into(out: Tensor, x: Tensor, sin: Tensor, cos: Tensor) -> None:
    """out = x*cos + rotate_half(x)*sin, computed on the two halves without building rotate_half(x).

    sin/cos repeat their first half (angles are tiled twice), and (-a)*b == -(a*b) exactly, so this equals the
    reference expression bit for bit while skipping two temporaries and a concatenation.
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    s, c = sin[..., :half], cos[..., :half]
    torch.sub(x1 * c, x2 * s, out=out[..., :half])
    torch.add(x2 * c, x1 * s, out=out[..., half:])


def apply_rope(q: Tensor, k: Tensor, sin: Tensor, cos: Tensor) -> tuple[Tensor, Tensor]:
    """Rotate the last H*W tokens of q and k (B, heads, N, D); prefix tokens pass through.

    Both tensors make a round trip through the RoPE dtype (all tokens, prefix included) as the reference does.
    """
    out_dtype = q.dtype
    prefix = q.shape[-2] - sin.shape[-2]
    rotated = []
    for x in (q, k):
        x = x.to(sin.dtype)
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        out[..., :prefix, :] = x[..., :prefix, :]
        _rotate_into(out[..., prefix:, :], x[..., prefix:, :], sin, cos)
        rotated.append(out.to(out_dtype))
    return rotated[0], rotated[1]
