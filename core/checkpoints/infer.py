"""Infer the architecture and the task of a checkpoint from its key names and tensor shapes alone.

File names are never consulted: embed width, depth, head_dim (`q_norm`), KV heads per layer (`wk` rows), FFN
width, tokenizer layers and every head width come from shapes, so the six released sizes and tiny test models go
through the same code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ..arch.config import BackboneConfig, DenseHeadConfig, HeatmapHeadConfig, ModelConfig
from .errors import CheckpointError

Shapes = Mapping[str, tuple[int, ...]]

OUTPUT_CONVS = {
    "conv_pose": "pose",
    "conv_seg": "seg",
    "conv_normal": "normal",
    "conv_albedo": "albedo",
    "conv_pointmap": "pointmap",
    "conv_matting": "matting",
}


def _indices(shapes: Shapes, pattern: str) -> list[int]:
    regex = re.compile(pattern)
    found = {int(m.group(1)) for key in shapes if (m := regex.match(key))}
    return sorted(found)


def _describe_foreign_layout(keys: list[str]) -> str:
    sample = ", ".join(keys[:5])
    if any(k.startswith(("layers.", "backbone.layers.")) for k in keys):
        return (
            "it looks like a Sapiens (v1) checkpoint (keys 'layers.N…'); Sapiens2 Studio runs Sapiens2 models only. "
            "Download a Sapiens2 file from https://huggingface.co/facebook (e.g. facebook/sapiens2-pose-0.4b)."
        )
    if any(k.startswith(("embeddings.", "encoder.", "sapiens2.", "model.")) for k in keys):
        return (
            "it looks like a converted checkpoint (e.g. Hugging Face Transformers layout); use the original "
            "facebook/sapiens2-* .safetensors files, which load unchanged."
        )
    return f"its keys ({sample}, …) are not the Sapiens2 layout."


def split_layout(shapes: Shapes) -> tuple[str, dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """('pretrain' | 'task', backbone shapes without prefix, head shapes without prefix)."""
    keys = list(shapes)
    if not keys:
        raise CheckpointError("the checkpoint holds no tensors")
    if "backbone.patch_embed.projection.weight" in shapes:
        backbone = {k[len("backbone.") :]: v for k, v in shapes.items() if k.startswith("backbone.")}
        head = {k[len("decode_head.") :]: v for k, v in shapes.items() if k.startswith("decode_head.")}
        other = [k for k in keys if not k.startswith(("backbone.", "decode_head."))]
        if other:
            raise CheckpointError(
                f"unexpected keys outside 'backbone.'/'decode_head.' ({len(other)}): {', '.join(other[:5])}"
            )
        return "task", backbone, head
    if "patch_embed.projection.weight" in shapes:
        return "pretrain", dict(shapes), {}
    raise CheckpointError(f"unknown checkpoint layout: {_describe_foreign_layout(keys)}")


def _need(shapes: Shapes, key: str, where: str) -> tuple[int, ...]:
    if key not in shapes:
        raise CheckpointError(
            f"missing key {where}{key}: the checkpoint is incomplete or not a Sapiens2 file"
        )
    return tuple(shapes[key])


def infer_backbone(bb: Shapes, *, rope_dtype: str = "bf16", where: str = "") -> BackboneConfig:
    embed_dim, in_channels, patch, _ = _need(bb, "patch_embed.projection.weight", where)
    blocks = _indices(bb, r"blocks\.(\d+)\.")
    if not blocks:
        raise CheckpointError(f"no transformer blocks ({where}blocks.N.*) found")
    if blocks != list(range(len(blocks))):
        missing = sorted(set(range(blocks[-1] + 1)) - set(blocks))
        raise CheckpointError(f"transformer blocks are not contiguous; missing {where}blocks.{missing[0]}.*")
    depth = len(blocks)
    use_qk_norm = "blocks.0.attn.q_norm.weight" in bb
    if use_qk_norm:
        head_dim = _need(bb, "blocks.0.attn.q_norm.weight", where)[0]
    else:
        head_dim = _need(bb, "rope_embed.periods", where)[0] * 4
    kv_heads = []
    for i in range(depth):
        rows = _need(bb, f"blocks.{i}.attn.wk.weight", where)[0]
        if rows % head_dim:
            raise CheckpointError(
                f"{where}blocks.{i}.attn.wk.weight has {rows} rows, not a multiple of head_dim {head_dim}"
            )
        kv_heads.append(rows // head_dim)
    ffn_hidden = _need(bb, "blocks.0.ffn.w3.weight", where)[1]
    registers = _need(bb, "storage_tokens", where)[1] if "storage_tokens" in bb else 0
    tokenizer_layers = len(_indices(bb, r"tokenizer\.blocks\.(\d+)\."))
    window = 4
    if tokenizer_layers:
        window = math.isqrt(_need(bb, "tokenizer.local_pos_embed", where)[1] - 1)
    try:
        return BackboneConfig(
            embed_dim=embed_dim,
            depth=depth,
            head_dim=head_dim,
            kv_heads=tuple(kv_heads),
            ffn_hidden=ffn_hidden,
            patch_size=patch,
            in_channels=in_channels,
            num_register_tokens=registers,
            use_qk_norm=use_qk_norm,
            use_layer_scale="blocks.0.attn.gamma.weight" in bb,
            tokenizer_layers=tokenizer_layers,
            tokenizer_window=window,
            rope_dtype=rope_dtype,
        )
    except ValueError as exc:
        raise CheckpointError(f"inconsistent backbone shapes: {exc}") from None


def detect_task(head: Shapes) -> str:
    found = {task for name, task in OUTPUT_CONVS.items() if f"{name}.weight" in head}
    if len(found) != 1:
        names = ", ".join(f"decode_head.{n}.weight" for n in OUTPUT_CONVS)
        raise CheckpointError(
            f"cannot tell the task of this checkpoint: expected exactly one of {names}; found {sorted(found) or 'none'}"
        )
    return found.pop()


def _conv_chain(head: Shapes, prefix: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    channels, kernels = [], []
    for i in _indices(head, rf"{re.escape(prefix)}\.(\d+)\.weight"):
        if i % 3:  # norm weights (albedo) sit at 1, 4, 7
            continue
        shape = head[f"{prefix}.{i}.weight"]
        channels.append(shape[0])
        kernels.append(shape[-1])
    return tuple(channels), tuple(kernels)


def infer_head(task: str, head: Shapes, in_channels: int) -> HeatmapHeadConfig | DenseHeadConfig:
    out_name = next(n for n, t in OUTPUT_CONVS.items() if t == task)
    out_channels = _need(head, f"{out_name}.weight", "decode_head.")[0]
    if task in ("pose", "seg"):
        deconv_channels, deconv_kernels = [], []
        for i in _indices(head, r"deconv_layers\.(\d+)\.weight"):
            shape = head[f"deconv_layers.{i}.weight"]  # (in, out, k, k) for transposed convs
            deconv_channels.append(shape[1])
            deconv_kernels.append(shape[-1])
        conv_channels, conv_kernels = _conv_chain(head, "conv_layers")
        return HeatmapHeadConfig(
            in_channels=in_channels,
            deconv_channels=tuple(deconv_channels),
            deconv_kernels=tuple(deconv_kernels),
            conv_channels=conv_channels,
            conv_kernels=conv_kernels,
            out_channels=out_channels,
        )
    upsample = []
    upsample_kernel = 3
    for i in _indices(head, r"upsample_blocks\.(\d+)\.0\.weight"):
        shape = head[f"upsample_blocks.{i}.0.weight"]
        if shape[0] % 4:
            raise CheckpointError(
                f"decode_head.upsample_blocks.{i}.0.weight has {shape[0]} channels (not 4x)"
            )
        upsample.append(shape[0] // 4)
        upsample_kernel = shape[-1]
    conv_channels, conv_kernels = _conv_chain(head, "conv_layers")
    scale_channels, scale_kernels = _conv_chain(head, "scale_conv_layers")
    mlp: list[int] = []
    for i in _indices(head, r"scale_final_layer\.(\d+)\.weight"):
        out_features, in_features = head[f"scale_final_layer.{i}.weight"]
        if not mlp:
            mlp.append(in_features)
        mlp.append(out_features)
    return DenseHeadConfig(
        in_channels=in_channels,
        upsample_channels=tuple(upsample),
        conv_channels=conv_channels,
        conv_kernels=conv_kernels,
        out_channels=out_channels,
        input_kernel=_need(head, "input_conv.0.weight", "decode_head.")[-1],
        upsample_kernel=upsample_kernel,
        norm="rms" if any(k.endswith(".norm.weight") for k in head) else "instance",
        scale_conv_channels=scale_channels,
        scale_conv_kernels=scale_kernels,
        scale_mlp=tuple(mlp),
    )


def infer_config(shapes: Shapes, *, rope_dtype: str = "bf16") -> ModelConfig:
    """The full model description of a checkpoint (pretrain or task file) from its key → shape map."""
    layout, bb, head = split_layout(shapes)
    backbone = infer_backbone(bb, rope_dtype=rope_dtype, where="backbone." if layout == "task" else "")
    if layout == "pretrain":
        return ModelConfig(backbone=backbone)
    if not head:
        raise CheckpointError("the checkpoint has 'backbone.*' keys but no 'decode_head.*' keys")
    task = detect_task(head)
    return ModelConfig(backbone=backbone, task=task, head=infer_head(task, head, backbone.embed_dim))
