"""Synthetic checkpoints in the official key layout, for tests, demos without weights, and benchmarks.

They go through exactly the same load path as released files.  Values are seeded per key and scaled so that
activations stay O(1) through any depth (norm weights ≈ 1, linears ~ 1/sqrt(fan_in), layer-scale 0.3–1).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import torch

from ..arch.config import (
    BackboneConfig,
    DenseHeadConfig,
    HeatmapHeadConfig,
    ModelConfig,
    official_kv_heads,
)
from ..arch.heads.dense_heads import OUTPUT_CONV_NAMES as DENSE_OUTPUT_CONVS
from ..arch.model import Sapiens2Model
from ..arch.official_heads import HEADS
from ..arch.rope import rope_periods
from ..checkpoints.errors import CheckpointError


def tiny_config(
    task: str = "pretrain",
    *,
    embed_dim: int = 32,
    depth: int = 2,
    head_dim: int = 16,
    kv_heads: tuple[int, ...] | None = None,
    tokenizer_layers: int = 0,
    head_width: int = 8,
    input_size: tuple[int, int] = (1024, 768),
) -> ModelConfig:
    """A small model of the official topology; `input_size` fixes the pointmap scale branch's MLP width."""
    num_heads = embed_dim // head_dim
    backbone = BackboneConfig(
        embed_dim=embed_dim,
        depth=depth,
        head_dim=head_dim,
        kv_heads=kv_heads or official_kv_heads(depth, num_heads),
        ffn_hidden=4 * embed_dim,
        tokenizer_layers=tokenizer_layers,
    )
    w = head_width
    head: HeatmapHeadConfig | DenseHeadConfig | None
    facts = HEADS.get(task)  # the official head's facts (core/arch/presets)
    if task == "pretrain":
        head = None
    elif facts is None:
        head = _declared_head(task, embed_dim, w)
    elif facts.kind == "heatmap":
        deconvs, convs = facts.tiny_layers
        head = HeatmapHeadConfig(
            embed_dim, (w,) * deconvs, (4,) * deconvs, (w,) * convs, (1,) * convs, facts.out_channels
        )
    else:
        scale: dict = {}
        if facts.scale_branch:
            stride = 16 * (4 if tokenizer_layers else 1) * 8
            cells = (input_size[0] // stride) * (input_size[1] // stride)
            scale = {
                "scale_conv_channels": (w, w, w),
                "scale_conv_kernels": (1, 1, 1),
                "scale_mlp": (cells * w, w, 1),
            }
        head = DenseHeadConfig(
            embed_dim,
            (w, w, w, w),
            (w,),
            (3,),
            out_channels=facts.out_channels,
            norm=facts.norm,
            **scale,
        )
    return ModelConfig(backbone=backbone, task=task, head=head)


def _declared_head(task: str, embed_dim: int, w: int) -> HeatmapHeadConfig | DenseHeadConfig:
    """A light head for a registered task without an official head (a built-in whose weights users train, or a
    trusted plug-in): the kind, output conv and output count its task declares (1 output when it takes any)."""
    from ..tasks import registry

    if not registry.has(task):
        raise CheckpointError(f"unknown task {task!r}")
    spec = registry.get(task)
    channels, name = spec.out_channels or 1, spec.output_conv
    if spec.head_kind == "heatmap":
        return HeatmapHeadConfig(embed_dim, (w, w), (4, 4), (w,), (1,), channels, output_name=name)
    return DenseHeadConfig(embed_dim, (w,) * 4, (w,), (3,), out_channels=channels, output_name=name)


def _value(key: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed((seed << 32) | zlib.crc32(key.encode()))
    z = torch.randn(shape, generator=gen)
    if key.endswith("attn.gamma.weight"):
        return 0.3 + 0.7 * torch.rand(shape, generator=gen)
    if key.endswith(("cls_token", "storage_tokens", "w_cls", "local_pos_embed")):
        return z
    if key.endswith(".bias"):
        return 0.02 * z
    if len(shape) == 1:
        return 1.0 + 0.1 * z
    fan_in = 1
    for s in shape[1:]:
        fan_in *= s
    return z / fan_in**0.5


def state_dict_for(
    cfg: ModelConfig, *, seed: int = 0, dtype: torch.dtype = torch.float32
) -> dict[str, torch.Tensor]:
    """Seeded weights for `cfg`, keyed exactly as released files are (bare keys for pretrain)."""
    model = Sapiens2Model(cfg, device="meta")
    out: dict[str, torch.Tensor] = {}
    for key, meta in model.state_dict().items():
        file_key = key if cfg.task != "pretrain" else key[len("backbone.") :]
        if key.endswith("rope_embed.periods"):
            out[file_key] = rope_periods(cfg.backbone.head_dim)
        else:
            out[file_key] = _value(file_key, tuple(meta.shape), seed).to(dtype)
    return out


def synthetic_state_dict(task: str = "pretrain", *, seed: int = 0, **dims) -> dict[str, torch.Tensor]:
    """Tiny official-layout weights for `task` (see `tiny_config` for the dimensions you can change)."""
    return state_dict_for(tiny_config(task, **dims), seed=seed)


def write_synthetic_checkpoint(
    path: str | os.PathLike, task: str = "pretrain", *, seed: int = 0, **dims
) -> Path:
    """Write a tiny official-layout `.safetensors` checkpoint and return its path."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(synthetic_state_dict(task, seed=seed, **dims), str(path))
    return path


def constant_output_state_dict(
    task: str,
    value: tuple[float, ...],
    *,
    scale: float | None = None,
    seed: int = 0,
    **dims,
) -> dict[str, torch.Tensor]:
    """Tiny official-layout weights of a dense model whose raw output is `value` at every pixel.

    Why: a known raw output is the only way to test, without real weights, what the pipeline does to a
    prediction (e.g. that a normal model's raw (0, 0.6, 0.8) is stored as its canonical-frame conversion).
    The head's 1×1 output convolution gets zero weights and `value` as bias, so the backbone's features
    do not matter. For a pointmap model `scale` fixes the predicted scale the same way (last scale layer).
    A matting model takes 4 values: the logits of the pre-multiplied R, G, B and of alpha (the head's sigmoid
    follows, so the result is sigmoid(value) everywhere).
    """
    if task not in DENSE_OUTPUT_CONVS:  # a dense head's 1×1 output conv: zero weights + a bias = that bias
        raise CheckpointError(f"constant outputs exist for {', '.join(DENSE_OUTPUT_CONVS)}, not {task!r}")
    state = synthetic_state_dict(task, seed=seed, **dims)
    conv = f"decode_head.{DENSE_OUTPUT_CONVS[task]}"
    channels = state[f"{conv}.bias"].shape[0]
    if len(value) != channels:
        raise CheckpointError(f"the constant {task} output needs {channels} values, got {value!r}")
    state[f"{conv}.weight"] = torch.zeros_like(state[f"{conv}.weight"])
    state[f"{conv}.bias"] = torch.tensor([float(v) for v in value], dtype=state[f"{conv}.bias"].dtype)
    if scale is not None:
        if not HEADS[task].scale_branch:
            raise CheckpointError("only a pointmap model predicts a scale")
        last = max(
            (k for k in state if k.startswith("decode_head.scale_final_layer.") and k.endswith(".weight")),
            key=lambda k: int(k.split(".")[2]),
        )
        state[last] = torch.zeros_like(state[last])
        bias = last.replace(".weight", ".bias")
        state[bias] = torch.full_like(state[bias], float(scale))
    return state


def write_constant_output_checkpoint(
    path: str | os.PathLike,
    task: str,
    value: tuple[float, ...],
    *,
    scale: float | None = None,
    seed: int = 0,
    **dims,
) -> Path:
    """Write `constant_output_state_dict(...)` as a `.safetensors` file and return its path."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(constant_output_state_dict(task, value, scale=scale, seed=seed, **dims), str(path))
    return path
