"""The released Sapiens2 architectures as configs, for building models without a file (benchmarks, meta
previews, docs).  Loading never uses this table: `core.checkpoints.infer` reads every number from the weights."""

from __future__ import annotations

from .config import BackboneConfig, DenseHeadConfig, HeatmapHeadConfig, ModelConfig, official_kv_heads
from .errors import ModelConfigError
from .official_heads import HEADS, HeadFacts

__all__ = ["BACKBONES", "DENSE_OUT_CHANNELS", "HEADS", "HeadFacts", "backbone_config", "preset_config"]

# size: (embed_dim, depth, head_dim, tokenizer layers)
BACKBONES = {
    "0.1b": (768, 12, 64, 0),
    "0.4b": (1024, 24, 64, 0),
    "0.8b": (1280, 32, 80, 0),
    "1b": (1536, 40, 64, 0),
    "1b-4k": (1536, 40, 64, 4),
    "5b": (2432, 56, 76, 0),
}
# The heads' facts and widths: official_heads.HEADS (re-exported here).
DENSE_OUT_CHANNELS = {task: facts.out_channels for task, facts in HEADS.items() if facts.kind == "dense"}


def backbone_config(size: str, *, rope_dtype: str = "bf16") -> BackboneConfig:
    if size not in BACKBONES:
        raise ModelConfigError(f"unknown Sapiens2 size {size!r}; expected one of {', '.join(BACKBONES)}")
    embed, depth, head_dim, tokenizer = BACKBONES[size]
    return BackboneConfig(
        embed_dim=embed,
        depth=depth,
        head_dim=head_dim,
        kv_heads=official_kv_heads(depth, embed // head_dim),
        ffn_hidden=4 * embed,
        tokenizer_layers=tokenizer,
        rope_dtype=rope_dtype,
    )


def preset_config(size: str, task: str = "pretrain") -> ModelConfig:
    """The architecture of a released (or, for albedo, announced) Sapiens2 model.

    Matting is released at 1B only; other sizes get the same head, as a guess at future files — loading never uses
    this table."""
    backbone = backbone_config(size)
    embed = backbone.embed_dim
    if task == "pretrain":
        return ModelConfig(backbone=backbone)
    facts = HEADS.get(task)
    if facts is None:
        raise ModelConfigError(f"unknown task {task!r}")
    if facts.kind == "heatmap":
        deconv, conv = facts.widths_for(size)
        head = HeatmapHeadConfig(
            embed, deconv, (4,) * len(deconv), conv, (1,) * len(conv), facts.out_channels
        )
    else:
        upsample, conv = facts.widths_for(size)
        extra: dict = {}
        if facts.scale_branch:
            extra = {
                "scale_conv_channels": (1536, 512, 128),
                "scale_conv_kernels": (1, 1, 1),
                "scale_mlp": (6144, 512, 128, 1),
            }
        head = DenseHeadConfig(
            embed,
            upsample,
            conv,
            (3,) * len(conv),
            out_channels=facts.out_channels,
            norm=facts.norm,
            **extra,
        )
    return ModelConfig(backbone=backbone, task=task, head=head)


def backbone_flops(cfg: BackboneConfig, height: int = 1024, width: int = 768) -> float:
    """Multiply-add FLOPs (2 per MAC) of one image through the trunk (and 4K tokenizer), attention included."""
    dim, hidden = cfg.embed_dim, cfg.ffn_hidden
    grid = (height // cfg.patch_size) * (width // cfg.patch_size)
    flops = 2.0 * grid * dim * cfg.in_channels * cfg.patch_size**2
    if cfg.tokenizer_layers:
        window_tokens = cfg.tokenizer_window**2 + 1
        windows = grid // cfg.tokenizer_window**2
        per_layer = 2 * window_tokens * (4 * dim * dim + 3 * dim * hidden) + 4 * window_tokens**2 * dim
        flops += windows * cfg.tokenizer_layers * per_layer
        grid = windows
    tokens = grid + cfg.num_prefix_tokens
    for kv in cfg.kv_heads:
        kv_dim = kv * cfg.head_dim
        linear = 2 * tokens * (2 * dim * dim + 2 * dim * kv_dim + 3 * dim * hidden)
        attention = 4 * tokens * tokens * dim
        flops += linear + attention
    return flops
