"""Architecture descriptions: a frozen dataclass per part, filled from checkpoint shapes or presets.

Nothing here is guessed from file names: `core.checkpoints.infer` reads every number from tensor shapes, and the
six released sizes are only named presets used to label a model (`BackboneConfig.size_name`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..catalogue import ALL_TASKS
from .errors import ModelConfigError

# Released backbone sizes: (embed_dim, depth, head_dim, has_tokenizer) -> public name.
SIZE_PRESETS: dict[tuple[int, int, int, bool], str] = {
    (768, 12, 64, False): "0.1b",
    (1024, 24, 64, False): "0.4b",
    (1280, 32, 80, False): "0.8b",
    (1536, 40, 64, False): "1b",
    (1536, 40, 64, True): "1b-4k",
    (2432, 56, 76, False): "5b",
}

TASKS = ALL_TASKS

# The official GQA rule: the first and last 8 layers are full multi-head attention, the others use heads // 2
# key/value heads.  Only used to build presets; loaded checkpoints give the schedule through `wk` shapes.
MHSA_EARLY, MHSA_LATE = 8, 8


def official_kv_heads(depth: int, num_heads: int) -> tuple[int, ...]:
    """KV heads per layer as the reference builds them (first/last 8 layers full MHSA)."""
    return tuple(
        num_heads if (i < MHSA_EARLY or i >= depth - MHSA_LATE) else num_heads // 2 for i in range(depth)
    )


@dataclass(frozen=True)
class BackboneConfig:
    """Sapiens2 ViT trunk.  `kv_heads[i]` is the number of key/value heads of layer i (GQA when < num_heads)."""

    embed_dim: int
    depth: int
    head_dim: int
    kv_heads: tuple[int, ...]
    ffn_hidden: int
    patch_size: int = 16
    in_channels: int = 3
    num_register_tokens: int = 8
    use_qk_norm: bool = True
    use_layer_scale: bool = True
    tokenizer_layers: int = 0
    tokenizer_window: int = 4
    rope_base: float = 100.0
    # "bf16" reproduces the released models (sin/cos and a q/k round trip in bfloat16); "fp32" is an option.
    rope_dtype: str = "bf16"
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.embed_dim % self.head_dim:
            raise ModelConfigError(
                f"embed_dim {self.embed_dim} is not a multiple of head_dim {self.head_dim}"
            )
        if len(self.kv_heads) != self.depth:
            raise ModelConfigError(f"kv_heads has {len(self.kv_heads)} entries for depth {self.depth}")
        for i, kv in enumerate(self.kv_heads):
            if kv <= 0 or self.num_heads % kv:
                raise ModelConfigError(f"layer {i}: {kv} KV heads do not divide {self.num_heads} heads")
        if self.head_dim % 4:
            raise ModelConfigError(f"head_dim {self.head_dim} must be a multiple of 4 for 2-axis RoPE")
        if self.rope_dtype not in ("bf16", "fp32"):
            raise ModelConfigError(f"rope_dtype must be 'bf16' or 'fp32', not {self.rope_dtype!r}")

    @property
    def num_heads(self) -> int:
        return self.embed_dim // self.head_dim

    @property
    def num_prefix_tokens(self) -> int:
        return 1 + self.num_register_tokens

    @property
    def size_name(self) -> str:
        key = (self.embed_dim, self.depth, self.head_dim, self.tokenizer_layers > 0)
        return SIZE_PRESETS.get(key, "custom")

    @property
    def gqa_layers(self) -> tuple[int, ...]:
        return tuple(i for i, kv in enumerate(self.kv_heads) if kv != self.num_heads)


@dataclass(frozen=True)
class HeatmapHeadConfig:
    """Pose heatmap head and segmentation head: transposed convs (x2 each), 1x1/kxk convs, a final 1x1 conv."""

    in_channels: int
    deconv_channels: tuple[int, ...]
    deconv_kernels: tuple[int, ...]
    conv_channels: tuple[int, ...]
    conv_kernels: tuple[int, ...]
    out_channels: int
    output_name: str = ""  # the output conv's name (`decode_head.<name>`); "" = the built-in task's


@dataclass(frozen=True)
class DenseHeadConfig:
    """Normal / albedo / pointmap / matting head: 3x3 input conv, PixelShuffle upsampling blocks, convs, 1x1 output
    conv (3 channels; 4 for matting: pre-multiplied foreground RGB + alpha)."""

    in_channels: int
    upsample_channels: tuple[int, ...]
    conv_channels: tuple[int, ...]
    conv_kernels: tuple[int, ...]
    out_channels: int = 3
    input_kernel: int = 3
    upsample_kernel: int = 3
    norm: str = "instance"  # "instance" (normal, pointmap, matting) or "rms" (albedo)
    # Pointmap only: the scale branch (stride-2 convs then an MLP whose first width fixes the input size).
    scale_conv_channels: tuple[int, ...] = ()
    scale_conv_kernels: tuple[int, ...] = ()
    scale_mlp: tuple[int, ...] = ()
    output_name: str = ""  # the output conv's name (`decode_head.<name>`); "" = the built-in task's


@dataclass(frozen=True)
class ModelConfig:
    backbone: BackboneConfig
    task: str = "pretrain"
    head: HeatmapHeadConfig | DenseHeadConfig | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        # a task from outside the project (core/tasks plug-in) names its head's output conv itself
        plugin = self.head is not None and bool(self.head.output_name) and self.task.isidentifier()
        if self.task not in TASKS and not plugin:
            raise ModelConfigError(f"unknown task {self.task!r}; expected one of {TASKS}")
        if (self.head is None) != (self.task == "pretrain"):
            raise ModelConfigError(
                f"task {self.task!r} and head {type(self.head).__name__} do not fit together"
            )
