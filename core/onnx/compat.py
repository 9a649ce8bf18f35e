"""The model as ONNX can express it, with the same numbers: export-time adaptations, undone afterwards.

The released models compute RoPE in bfloat16 (sin/cos, and a round trip of q/k). ONNX Runtime has no bfloat16
Sin or Mul on the CPU, so during export:

* sin/cos of the (fixed) patch grid are computed once by our own PyTorch code and baked in as constants (the
  network input size is fixed by the pipeline: 1024x768), so they are the very values PyTorch uses;
* the bfloat16 arithmetic of `apply_rope` becomes float32 arithmetic with explicit bfloat16 roundings
  (Cast to bfloat16 and back). A product of two bfloat16 values is exact in float32 and PyTorch's CPU bfloat16
  ops compute in float32 and round once, so every rounded step gives the same bits;
* the fused q/k/v GEMM (a storage-identity check that tracing cannot answer) is set aside: the three linears
  are the same weights;
* the heads' affine-free InstanceNorm becomes its two-pass formula (mean, then the mean of squared deviations):
  ONNX Runtime's fused InstanceNormalization kernel is ~1.3e-5 (rel-L2) off the float64 result where PyTorch's is
  ~1e-6, which alone would miss the 1e-5 parity target on the seg, normal and pointmap heads.

Everything is restored on exit, so the model keeps running in PyTorch as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor

from ..arch import attention as attention_module
from ..arch.attention import GroupedQueryAttention
from ..arch.model import Sapiens2Model


def _bf16(x: Tensor) -> Tensor:
    """Round float32 values to the nearest bfloat16 (ties to even) and keep them as float32."""
    return x.to(torch.bfloat16).to(torch.float32)


def _same(x: Tensor) -> Tensor:
    return x


def _two_pass_instance_norm(module: torch.nn.InstanceNorm2d):
    """`module`'s forward (affine-free, no running statistics) as plain reductions ONNX Runtime computes exactly."""
    eps = module.eps

    def mean(x: Tensor) -> Tensor:  # rows first, then their means: two short sums instead of one of H*W terms
        return x.mean(dim=-1, keepdim=True).mean(dim=-2, keepdim=True)

    def forward(x: Tensor) -> Tensor:
        centred = x - mean(x)
        return centred * torch.rsqrt(mean(centred * centred) + eps)

    return forward


def exportable_apply_rope(rounded: bool):
    """`apply_rope` in float32 ops; `rounded` reproduces the bfloat16 compute step by step."""
    r = _bf16 if rounded else _same

    def apply(q: Tensor, k: Tensor, sin: Tensor, cos: Tensor) -> tuple[Tensor, Tensor]:
        out_dtype = q.dtype
        prefix = q.shape[-2] - sin.shape[-2]
        half = q.shape[-1] // 2
        s, c = sin[..., :half], cos[..., :half]
        rotated = []
        for x in (q, k):
            x = r(x.to(torch.float32))
            x1, x2 = x[..., prefix:, :half], x[..., prefix:, half:]
            first = r(r(x1 * c) - r(x2 * s))
            second = r(r(x2 * c) + r(x1 * s))
            out = torch.cat((x[..., :prefix, :], torch.cat((first, second), dim=-1)), dim=-2)
            rotated.append(out.to(out_dtype))
        return rotated[0], rotated[1]

    return apply


@contextlib.contextmanager
def exportable(model: Sapiens2Model, grid: tuple[int, int]) -> Iterator[Sapiens2Model]:
    """Within the block, `model` traces into ONNX-expressible ops that give PyTorch's numbers for `grid`
    (the patch grid the backbone's blocks see, after the 4K tokenizer if any)."""
    rope = model.backbone.rope_embed
    with torch.no_grad():
        sin, cos = (t.to(torch.float32) for t in rope(height=grid[0], width=grid[1]))
    attentions = [m for m in model.modules() if isinstance(m, GroupedQueryAttention)]
    fused = [m._fused for m in attentions]
    original_rope = attention_module.apply_rope
    norms = [
        m
        for m in model.modules()
        if isinstance(m, torch.nn.InstanceNorm2d) and not m.affine and not m.track_running_stats
    ]

    def constant_rope(*, height: int, width: int) -> tuple[Tensor, Tensor]:
        return sin, cos

    try:
        for module in attentions:
            module._fused = None
        for norm in norms:
            norm.forward = _two_pass_instance_norm(norm)
        rope.forward = constant_rope  # instance attribute: shadows the method until deleted
        attention_module.apply_rope = exportable_apply_rope(rope.rope_dtype == "bf16")
        yield model
    finally:
        attention_module.apply_rope = original_rope
        del rope.forward
        for norm in norms:
            del norm.forward
        for module, pair in zip(attentions, fused):
            module._fused = pair
