"""Pre-norm transformer block: x + attn(ln1(x)), then x + ffn(ln2(x)) — LayerScale sits on attention only."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .attention import GroupedQueryAttention
from .ffn import SwiGLUFFN


class Block(nn.Module):
    def __init__(
        self,
        dim: int,
        *,
        head_dim: int,
        kv_heads: int,
        ffn_hidden: int,
        qk_norm: bool,
        layer_scale: bool,
        eps: float = 1e-6,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.ln1 = nn.RMSNorm(dim, eps=eps, **factory)
        self.attn = GroupedQueryAttention(
            dim,
            head_dim=head_dim,
            kv_heads=kv_heads,
            qk_norm=qk_norm,
            layer_scale=layer_scale,
            eps=eps,
            **factory,
        )
        self.ln2 = nn.RMSNorm(dim, eps=eps, **factory)
        self.ffn = SwiGLUFFN(dim, ffn_hidden, **factory)

    def forward(self, x: Tensor, rope=None) -> Tensor:
        if torch.is_grad_enabled():
            x = x + self.attn(self.ln1(x), rope)
            return x + self.ffn(self.ln2(x))
        # Inference: reuse each branch's output buffer for the residual sum (x + y == y + x exactly).
        x = self.attn(self.ln1(x), rope).add_(x)
        return self.ffn(self.ln2(x)).add_(x)
