"""A whole Sapiens2 model: backbone plus (for task checkpoints) a `decode_head`, named as in the checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .attention import ATTENTION_BACKENDS, GroupedQueryAttention
from .backbone import Sapiens2Backbone
from .config import DenseHeadConfig, HeatmapHeadConfig, ModelConfig
from .errors import ModelConfigError, ModelOverflowError
from .heads import DenseHead, HeatmapHead
from .rope import PERIOD_SOURCES


@dataclass(frozen=True)
class ModelSpec:
    """What a loaded model is, read from its weights: the public description other code and users see."""

    size: str
    task: str
    embed_dim: int
    depth: int
    num_heads: int
    head_dim: int
    kv_heads: tuple[int, ...]
    tokenizer_layers: int
    patch_size: int
    ffn_hidden: int
    gqa_layers: tuple[int, ...]
    num_parameters: int
    # Only for the pointmap head: the input (H, W) its scale branch accepts, when it can be recovered.
    fixed_input_size: tuple[int, int] | None = None

    def describe(self) -> str:
        gqa = f"layers {self.gqa_layers[0]}-{self.gqa_layers[-1]}" if self.gqa_layers else "none"
        lines = [
            f"Sapiens2 {self.size} {self.task}",
            f"  embed_dim {self.embed_dim}, depth {self.depth}, heads {self.num_heads} x {self.head_dim}",
            f"  GQA: {gqa} (kv heads {sorted(set(self.kv_heads))}), FFN hidden {self.ffn_hidden}",
            f"  4K tokenizer layers: {self.tokenizer_layers}",
            f"  parameters: {self.num_parameters:,}",
        ]
        if self.fixed_input_size:
            lines.append(f"  fixed input size: {self.fixed_input_size[0]}x{self.fixed_input_size[1]}")
        return "\n".join(lines)


def build_head(cfg: ModelConfig, *, device=None, dtype=None) -> nn.Module | None:
    if cfg.head is None:
        return None
    if isinstance(cfg.head, HeatmapHeadConfig):
        return HeatmapHead(cfg.head, cfg.task, device=device, dtype=dtype)
    if isinstance(cfg.head, DenseHeadConfig):
        return DenseHead(cfg.head, cfg.task, device=device, dtype=dtype)
    raise ModelConfigError(f"unknown head config {type(cfg.head).__name__}")


def _fixed_input_size(cfg: ModelConfig) -> tuple[int, int] | None:
    """Recover the pointmap input size from the scale MLP width, assuming the released 4:3 (H:W) aspect."""
    head = cfg.head
    if not isinstance(head, DenseHeadConfig) or not head.scale_mlp or not head.scale_conv_channels:
        return None
    cells = head.scale_mlp[0] // head.scale_conv_channels[-1]
    stride = cfg.backbone.patch_size * 2 ** len(head.scale_conv_channels)
    if cfg.backbone.tokenizer_layers:
        stride *= cfg.backbone.tokenizer_window
    # cells = (H/stride) * (W/stride) with H:W = 4:3  ->  W/stride = sqrt(cells * 3 / 4)
    for width_cells in range(1, cells + 1):
        if cells % width_cells == 0 and (cells // width_cells) * 3 == width_cells * 4:
            return (cells // width_cells * stride, width_cells * stride)
    return None


class Sapiens2Model(nn.Module):
    """Callable on a normalised (B, 3, H, W) tensor; returns the task's raw outputs.

    pretrain → featmap (B, C, H/16, W/16); pose → heatmaps (B, 308, H/4, W/4); seg → logits (B, 29, H, W);
    normal / albedo → (B, 3, H, W); pointmap → (pointmap (B, 3, H, W), scale (B, 1)); matting → (B, 4, H, W) in
    (0, 1) after the head's sigmoid (pre-multiplied foreground RGB, then alpha).
    """

    def __init__(self, cfg: ModelConfig, *, device=None, dtype=None) -> None:
        super().__init__()
        self.cfg = cfg
        self.backbone = Sapiens2Backbone(cfg.backbone, device=device, dtype=dtype)
        head = build_head(cfg, device=device, dtype=dtype)
        if head is not None:
            self.decode_head = head

    @property
    def task(self) -> str:
        return self.cfg.task

    @property
    def spec(self) -> ModelSpec:
        bb = self.cfg.backbone
        return ModelSpec(
            size=bb.size_name,
            task=self.cfg.task,
            embed_dim=bb.embed_dim,
            depth=bb.depth,
            num_heads=bb.num_heads,
            head_dim=bb.head_dim,
            kv_heads=bb.kv_heads,
            tokenizer_layers=bb.tokenizer_layers,
            patch_size=bb.patch_size,
            ffn_hidden=bb.ffn_hidden,
            gqa_layers=bb.gqa_layers,
            num_parameters=sum(p.numel() for p in self.parameters()),
            fixed_input_size=_fixed_input_size(self.cfg),
        )

    @property
    def device(self) -> torch.device:
        return self.backbone.cls_token.device

    @property
    def dtype(self) -> torch.dtype:
        return self.backbone.cls_token.dtype

    def forward_tokens(self, x: Tensor) -> Tensor:
        """Raw backbone tokens (B, 9 + h*w, C) after the final norm, prefix tokens included."""
        return self.backbone.forward_tokens(x)[0]

    def forward(self, x: Tensor):
        featmap = self.backbone(x)
        if featmap.dtype == torch.float16 and not torch.isfinite(featmap).all():
            # fp16 tops out at 65504; a ViT residual stream can exceed that where bf16/fp32 cannot.
            raise ModelOverflowError(
                "the model overflowed in float16 (non-finite features); run it in bfloat16 (dtype='bf16', "
                "same speed on recent GPUs) or float32"
            )
        if self.cfg.head is None:
            return featmap
        return self.decode_head(featmap)

    def set_attention(self, backend: str = "sdpa", *, pad_head_dim_to: int = 0) -> None:
        """Choose the attention backend for every block ("sdpa" or "math") and optional head-dim padding."""
        if backend not in ATTENTION_BACKENDS:
            raise ModelConfigError(
                f"unknown attention backend {backend!r}; expected one of {ATTENTION_BACKENDS}"
            )
        for module in self._attention_modules():
            module.backend = backend
            module.pad_head_dim_to = pad_head_dim_to

    def _attention_modules(self) -> list[GroupedQueryAttention]:
        return [m for m in self.modules() if isinstance(m, GroupedQueryAttention)]

    def fuse_qkv_(self) -> Sapiens2Model:
        """One q/k/v GEMM per block (weights become views of one tensor: no extra memory, same keys)."""
        if self.device.type != "meta":
            for module in self._attention_modules():
                module.fuse_qkv_()
        return self

    def materialize_(self, device: torch.device) -> Sapiens2Model:
        """Allocate uninitialised storage for a meta-built model, q/k/v already fused, so that loading writes each
        weight once into its final place (peak host memory = the weights, nothing more)."""
        for module in self._attention_modules():
            module.allocate_fused_qkv_(device)
        for module in self.modules():
            for name, param in list(module._parameters.items()):
                if param is not None and param.is_meta:
                    module._parameters[name] = nn.Parameter(
                        torch.empty_like(param, device=device), requires_grad=False
                    )
            for name, buffer in list(module._buffers.items()):
                if buffer is not None and buffer.is_meta:
                    module._buffers[name] = torch.empty_like(buffer, device=device)
        self.backbone.rope_embed._cache.clear()
        return self

    def set_rope_dtype(self, rope_dtype: str, *, periods: str = "checkpoint") -> None:
        """ "bf16" (released behaviour, default) or "fp32" RoPE compute.

        periods: "checkpoint" (default) uses the file's bf16-rounded `rope_embed.periods`, as the reference does in
        both dtypes; "exact" (fp32 only) uses base ** (4i / head_dim) in float32, as Hugging Face Transformers does,
        for comparisons with that port (the state dict is unchanged either way).
        """
        if rope_dtype not in ("bf16", "fp32"):
            raise ModelConfigError(f"rope_dtype must be 'bf16' or 'fp32', not {rope_dtype!r}")
        if periods not in PERIOD_SOURCES:
            raise ModelConfigError(f"periods must be one of {PERIOD_SOURCES}, not {periods!r}")
        if periods == "exact" and rope_dtype != "fp32":
            raise ModelConfigError("periods='exact' is a float32 RoPE option; pass rope_dtype='fp32' with it")
        self.backbone.rope_embed.rope_dtype = rope_dtype
        self.backbone.rope_embed.periods_source = periods
        self.backbone.rope_embed._cache.clear()
