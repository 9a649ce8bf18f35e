"""The released Sapiens2 architectures as configs, for building models without a file (benchmarks, meta
previews, docs).  Loading never uses this table: `core.checkpoints.infer` reads every number from the weights."""

from __future__ import annotations

from dataclasses import dataclass

from .config import BackboneConfig, DenseHeadConfig, HeatmapHeadConfig, ModelConfig, official_kv_heads
from .errors import ModelConfigError

# size: (embed_dim, depth, head_dim, tokenizer layers)
BACKBONES = {
    "0.1b": (768, 12, 64, 0),
    "0.4b": (1024, 24, 64, 0),
    "0.8b": (1280, 32, 80, 0),
    "1b": (1536, 40, 64, 0),
    "1b-4k": (1536, 40, 64, 4),
    "5b": (2432, 56, 76, 0),
}
# Head widths of the released task models (official configs; the 1B pose and the 5B dense heads differ).
POSE = {"1b": ((1536, 1024), (768, 512, 256))}
POSE_DEFAULT = ((1024, 768), (512, 512, 256))
SEG = ((512, 256, 128, 64), (64, 64))
DENSE = {
    ("normal", "5b"): ((1536, 768, 512, 256), (128, 64, 32)),
    ("albedo", "5b"): ((1536, 768, 512, 256), (64, 32, 16)),
    ("pointmap", "5b"): ((1536, 768, 768, 768), (128, 64, 32)),
    ("pointmap", "default"): ((1536, 768, 512, 256), (64, 32, 16)),
}
DENSE_DEFAULT = ((768, 512, 256, 128), (64, 32, 16))


@dataclass(frozen=True)
class HeadFacts:
    """What an official task head is besides its widths, in one place for the presets and the tiny test models
    (core/testing/synthetic): its kind, output channels, norm, whether it has the pointmap's scale branch, and for a
    heatmap head the (×2 deconvs, convs) of its tiny test version (pose ends at 1/4 of the input, seg at full size)."""

    kind: str  # "heatmap" | "dense"
    out_channels: int
    norm: str = "instance"
    scale_branch: bool = False
    tiny_layers: tuple[int, int] = (0, 0)


# The official heads (matting: pre-multiplied foreground RGB + alpha; albedo: per-pixel RMSNorm).
HEADS = {
    "pose": HeadFacts("heatmap", 308, tiny_layers=(2, 2)),
    "seg": HeadFacts("heatmap", 29, tiny_layers=(4, 1)),
    "normal": HeadFacts("dense", 3),
    "albedo": HeadFacts("dense", 3, norm="rms"),
    "pointmap": HeadFacts("dense", 3, scale_branch=True),
    "matting": HeadFacts("dense", 4),
}
# Output channels of the dense heads.
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

    Matting is released at 1B only (`configs/matting/gss_p3m_metasim`: the normal head's widths, 4 outputs); other
    sizes get the same head, as a guess at future files — loading never uses this table."""
    backbone = backbone_config(size)
    embed = backbone.embed_dim
    if task == "pretrain":
        return ModelConfig(backbone=backbone)
    facts = HEADS.get(task)
    if facts is None:
        raise ModelConfigError(f"unknown task {task!r}")
    if facts.kind == "heatmap":
        # pose's widths depend on the size; seg's head is one for all sizes
        deconv, conv = POSE.get(size, POSE_DEFAULT) if task == "pose" else SEG
        head = HeatmapHeadConfig(
            embed, deconv, (4,) * len(deconv), conv, (1,) * len(conv), facts.out_channels
        )
    else:
        upsample, conv = DENSE.get((task, size), DENSE.get((task, "default"), DENSE_DEFAULT))
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
