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
from ..arch.official_heads import HEADS
from .errors import CheckpointError

Shapes = Mapping[str, tuple[int, ...]]


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


def _layer_positions(
    shapes: Shapes, prefix: str, where: str, *, stride: int = 1, first: int = 0, weight: str = "weight"
) -> list[int]:
    """Positions of a numbered layer chain (`prefix.N.…`, one layer every `stride` indices from `first`), in order.

    Why not just count the `.weight` keys: a chain with a hole (a deleted `conv_layers.0.weight`) would then be
    inferred one layer shorter and renumbered, and the strict comparison would report the real missing key
    together with the later layers' keys as "unexpected", although those are fine. A hole is reported here, as the
    one missing key it is."""
    regex = re.compile(rf"{re.escape(prefix)}\.(\d+)\.")
    present = {int(m.group(1)) for key in shapes if (m := regex.match(key))}
    layers = sorted(i for i in present if i >= first and (i - first) % stride == 0)
    if not layers:
        return []
    missing = [f"{where}{prefix}.{i}.{weight}" for i in range(first, layers[-1] + 1, stride)]
    missing = [key for key in missing if key[len(where) :] not in shapes]
    if missing:
        raise CheckpointError(
            f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}: the checkpoint is incomplete "
            "or was edited; download it again"
        )
    return layers


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
    # Flags read from any block, not only block 0: with block 0's q_norm deleted, every other block's q/k norms
    # would otherwise be reported as "unexpected" next to the one key that is really missing.
    norms = [f"blocks.{i}.attn.{n}_norm.weight" for i in range(depth) for n in ("q", "k")]
    use_qk_norm = any(key in bb for key in norms)
    if use_qk_norm:
        head_dim = _need(bb, next(key for key in norms if key in bb), where)[0]
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
            use_layer_scale=any(f"blocks.{i}.attn.gamma.weight" in bb for i in range(depth)),
            tokenizer_layers=tokenizer_layers,
            tokenizer_window=window,
            rope_dtype=rope_dtype,
        )
    except ValueError as exc:
        raise CheckpointError(f"inconsistent backbone shapes: {exc}") from None


def detect_task(head: Shapes) -> str:
    """The registered task whose head output conv (`decode_head.<conv>.weight`, `Task.output_conv`) the head
    holds; exactly one must match. Built-ins and trusted plug-ins alike (the registry is read here, when a
    head is inspected)."""
    from ..tasks import registry

    found = [task.name for task in registry.all_tasks() if task.matches_head(head)]
    refused = registry.refused()  # a plug-in's checkpoint while its code is not trusted: say how to trust it
    if not found and refused:
        keys = ",".join(refused)
        raise CheckpointError(
            "this checkpoint's head is none of the registered tasks'; task plug-ins were found but not loaded "
            f"because their code is not trusted ({', '.join(refused)}): if the checkpoint is theirs, trust them",
            hints={
                "cli": f"add --trust-task-code {keys}",
                "python": f"pass trust_task_code={list(refused)!r}",
                "comfyui": f"start ComfyUI with SAPIENS2_TRUST_TASKS={keys} in its environment",
            },
        )
    if len(found) != 1:
        names = ", ".join(
            f"decode_head.{t.output_conv}.weight" for t in registry.all_tasks() if t.output_conv
        )
        raise CheckpointError(
            f"cannot tell the task of this checkpoint: expected exactly one of {names}; found {sorted(found) or 'none'}"
        )
    return found[0]


def _conv_chain(head: Shapes, prefix: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    channels, kernels = [], []
    for i in _layer_positions(head, prefix, "decode_head.", stride=3):  # norm weights (albedo) sit at 1, 4, 7
        shape = head[f"{prefix}.{i}.weight"]
        channels.append(shape[0])
        kernels.append(shape[-1])
    return tuple(channels), tuple(kernels)


def infer_head(task: str, head: Shapes, in_channels: int) -> HeatmapHeadConfig | DenseHeadConfig:
    from ..tasks import registry

    spec = registry.get(task)
    out_name = spec.output_conv
    # a task without an official head (a plug-in, or a built-in whose weights users train) has a head of one of
    # core.arch's kinds under its own output conv name
    own_name = {} if task in HEADS else {"output_name": out_name}
    out_channels = _need(head, f"{out_name}.weight", "decode_head.")[0]
    if spec.head_kind == "heatmap":
        deconv_channels, deconv_kernels = [], []
        for i in _layer_positions(head, "deconv_layers", "decode_head.", stride=3):
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
            **own_name,
        )
    upsample = []
    upsample_kernel = 3
    for i in _layer_positions(head, "upsample_blocks", "decode_head.", weight="0.weight"):
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
    for i in _layer_positions(head, "scale_final_layer", "decode_head.", stride=2, first=1):
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
        **own_name,
    )


class _ReadLog(dict):
    """A key → shape map that remembers the keys whose shape was read (`[]`), with their checkpoint prefix."""

    def __init__(self, data: Mapping[str, tuple[int, ...]], prefix: str, log: set[str]) -> None:
        super().__init__(data)
        self.prefix, self.log = prefix, log

    def __getitem__(self, key: str) -> tuple[int, ...]:
        self.log.add(self.prefix + key)
        return super().__getitem__(key)


def infer_config(shapes: Shapes, *, rope_dtype: str = "bf16", reads: set[str] | None = None) -> ModelConfig:
    """The full model description of a checkpoint (pretrain or task file) from its key → shape map.

    reads: when given, collects the keys whose shapes the description was taken from, so that a loader can tell
    a mis-shaped source tensor (the model then follows it and its neighbours look wrong) from a mis-shaped
    ordinary one."""
    layout, bb, head = split_layout(shapes)
    if reads is not None:
        bb = _ReadLog(bb, "backbone." if layout == "task" else "", reads)
        head = _ReadLog(head, "decode_head.", reads)
    backbone = infer_backbone(bb, rope_dtype=rope_dtype, where="backbone." if layout == "task" else "")
    if layout == "pretrain":
        return ModelConfig(backbone=backbone)
    if not head:
        raise CheckpointError("the checkpoint has 'backbone.*' keys but no 'decode_head.*' keys")
    task = detect_task(head)
    from ..tasks import registry

    spec = registry.get(task)
    if task not in HEADS:  # a task without an official head checks it before anything is built or read
        spec.check_head(head)
    return ModelConfig(backbone=backbone, task=task, head=infer_head(task, head, backbone.embed_dim))
