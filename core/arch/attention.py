"""Grouped-query self-attention with per-head QK RMSNorm, RoPE and LayerScale.

All attention maths goes through `attend()`, one function, so the backend choice (SDPA kernels, a plain math
reference, head-dim padding for kernels that need a multiple of 8) stays in one place.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .errors import ModelConfigError
from .rope import apply_rope

ATTENTION_BACKENDS = ("sdpa", "math")


def attend(q: Tensor, k: Tensor, v: Tensor, *, backend: str = "sdpa", pad_head_dim_to: int = 0) -> Tensor:
    """Softmax attention over (B, heads, N, D) tensors with the default 1/sqrt(D) scale.

    `pad_head_dim_to`: zero-pad D up to a multiple of this (e.g. 8 for the 5B model's head_dim 76) so fused
    kernels accept it; zero columns change neither q·k nor the attention-weighted v, and the scale stays 1/sqrt(D).
    On CUDA a head_dim that is not a multiple of 8 is padded to 8 automatically (flash/cuDNN need it).
    """
    head_dim = q.shape[-1]
    if not pad_head_dim_to and q.is_cuda and head_dim % 8:
        pad_head_dim_to = 8
    if backend == "math":
        scores = (q.float() @ k.float().transpose(-2, -1)) * (head_dim**-0.5)
        return (scores.softmax(dim=-1) @ v.float()).to(q.dtype)
    if backend != "sdpa":
        raise ModelConfigError(f"unknown attention backend {backend!r}; expected one of {ATTENTION_BACKENDS}")
    pad = (-head_dim) % pad_head_dim_to if pad_head_dim_to else 0
    if pad:
        q, k, v = (F.pad(t, (0, pad)) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(head_dim))
        return out[..., :head_dim]
    return F.scaled_dot_product_attention(q, k, v)


class LayerScale(nn.Module):
    """Per-channel scale on the attention branch (key `attn.gamma.weight`)."""

    def __init__(self, dim: int, *, device=None, dtype=None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, device=device, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.weight if torch.is_grad_enabled() else x.mul_(self.weight)


class GroupedQueryAttention(nn.Module):
    """q/k/v/proj linears with bias; `kv_heads < num_heads` shares each K/V head across a group of query heads."""

    def __init__(
        self,
        dim: int,
        *,
        head_dim: int,
        kv_heads: int,
        qk_norm: bool,
        layer_scale: bool,
        eps: float = 1e-6,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_heads = dim // head_dim
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        self.wq = nn.Linear(dim, dim, **factory)
        self.wk = nn.Linear(dim, kv_heads * head_dim, **factory)
        self.wv = nn.Linear(dim, kv_heads * head_dim, **factory)
        self.proj = nn.Linear(dim, dim, **factory)
        self.q_norm = nn.RMSNorm(head_dim, eps=eps, **factory) if qk_norm else None
        self.k_norm = nn.RMSNorm(head_dim, eps=eps, **factory) if qk_norm else None
        self.gamma = LayerScale(dim, **factory) if layer_scale else None
        self.backend = "sdpa"
        self.pad_head_dim_to = 0
        self._fused: tuple[Tensor, Tensor] | None = None

    def fuse_qkv_(self) -> None:
        """Make q/k/v one GEMM: their weights become views into one (q+k+v, C) tensor, so no memory is added
        and the state dict keeps its keys.  Moving the whole model re-fuses (`_apply`); moving q/k/v one by one
        (as ComfyUI's ModelPatcher does) drops the fused copy and falls back to three GEMMs."""
        with torch.no_grad():
            weight = torch.cat((self.wq.weight, self.wk.weight, self.wv.weight))
            bias = torch.cat((self.wq.bias, self.wk.bias, self.wv.bias))
        self._adopt_fused(weight, bias)

    def allocate_fused_qkv_(self, device: torch.device) -> None:
        """Allocate (uninitialised) fused q/k/v storage on `device` for a meta-built module, before loading."""
        rows = sum(self._qkv_rows)
        factory = {"device": device, "dtype": self.wq.weight.dtype}
        self._adopt_fused(torch.empty(rows, self.wq.in_features, **factory), torch.empty(rows, **factory))

    @property
    def _qkv_rows(self) -> tuple[int, int, int]:
        return (self.wq.out_features, self.wk.out_features, self.wv.out_features)

    def _adopt_fused(self, weight: Tensor, bias: Tensor) -> None:
        rows = self._qkv_rows
        for linear, w, b in zip((self.wq, self.wk, self.wv), weight.split(rows), bias.split(rows)):
            linear.weight = nn.Parameter(w, requires_grad=False)
            linear.bias = nn.Parameter(b, requires_grad=False)
        self._fused = (weight, bias)

    def _fused_is_current(self) -> bool:
        """True while all six q/k/v tensors are still views of the fused pair (no module was moved on its own)."""
        weight, bias = self._fused
        return all(
            linear.weight.untyped_storage().data_ptr() == weight.untyped_storage().data_ptr()
            and linear.bias.untyped_storage().data_ptr() == bias.untyped_storage().data_ptr()
            for linear in (self.wq, self.wk, self.wv)
        )

    def _apply(self, fn, recurse=True):
        """`model.to(...)` gives each parameter new storage: fuse again on the new device/dtype."""
        was_fused = self._fused is not None
        self._fused = None
        result = super()._apply(fn, recurse)
        if was_fused and self.wq.weight.device.type != "meta":
            self.fuse_qkv_()
        return result

    def _project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if self._fused is not None:
            if self._fused_is_current():
                return F.linear(x, *self._fused).split(self._qkv_rows, dim=-1)
            self._fused = None  # stale copy on the old device: release it rather than keep two
        return self.wq(x), self.wk(x), self.wv(x)

    def _split(self, x: Tensor, heads: int) -> Tensor:
        return x.unflatten(-1, (heads, self.head_dim)).transpose(1, 2)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor] | None = None) -> Tensor:
        batch, tokens, dim = x.shape
        q, k, v = self._project_qkv(x)
        q = self._split(q, self.num_heads)
        k = self._split(k, self.kv_heads)
        v = self._split(v, self.kv_heads)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.kv_heads != self.num_heads:
            group = self.num_heads // self.kv_heads
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
        if rope is not None:
            q, k = apply_rope(q, k, *rope)
        out = attend(q, k, v, backend=self.backend, pad_head_dim_to=self.pad_head_dim_to)
        out = self.proj(out.transpose(1, 2).reshape(batch, tokens, dim))
        return self.gamma(out) if self.gamma is not None else out
