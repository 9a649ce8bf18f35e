"""The Sapiens2 ViT trunk: patch embed (+ optional 4K tokenizer), CLS + register tokens, blocks, final RMSNorm.

Module and parameter names equal the released checkpoint keys, so a state dict loads without renaming.
Token order: [cls, reg0..reg7, patches row-major]; RoPE rotates only the patch tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .block import Block
from .config import BackboneConfig
from .patch_embed import PatchEmbed
from .rope import RopeEmbedding
from .tokenizer import WindowTokenizer


class Sapiens2Backbone(nn.Module):
    def __init__(self, cfg: BackboneConfig, *, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.cfg = cfg
        dim = cfg.embed_dim
        self.patch_embed = PatchEmbed(cfg.in_channels, dim, cfg.patch_size, **factory)
        self.tokenizer = (
            WindowTokenizer(
                dim,
                num_layers=cfg.tokenizer_layers,
                head_dim=cfg.head_dim,
                ffn_hidden=cfg.ffn_hidden,
                window=cfg.tokenizer_window,
                eps=cfg.eps,
                **factory,
            )
            if cfg.tokenizer_layers
            else None
        )
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim, **factory))
        self.storage_tokens = nn.Parameter(torch.zeros(1, cfg.num_register_tokens, dim, **factory))
        self.rope_embed = RopeEmbedding(
            cfg.head_dim, base=cfg.rope_base, rope_dtype=cfg.rope_dtype, device=device
        )
        self.blocks = nn.ModuleList(
            Block(
                dim,
                head_dim=cfg.head_dim,
                kv_heads=kv,
                ffn_hidden=cfg.ffn_hidden,
                qk_norm=cfg.use_qk_norm,
                layer_scale=cfg.use_layer_scale,
                eps=cfg.eps,
                **factory,
            )
            for kv in cfg.kv_heads
        )
        self.ln1 = nn.RMSNorm(dim, eps=cfg.eps, **factory)

    def forward_tokens(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """All tokens after the final norm, (B, 9 + h*w, C), and the patch grid (h, w)."""
        tokens, grid = self.patch_embed(x)
        if self.tokenizer is not None:
            tokens, grid = self.tokenizer(tokens, grid)
        batch = tokens.shape[0]
        prefix = (self.cls_token.expand(batch, -1, -1), self.storage_tokens.expand(batch, -1, -1))
        tokens = torch.cat((*prefix, tokens), dim=1)
        rope = self.rope_embed(height=grid[0], width=grid[1])
        for block in self.blocks:
            tokens = block(tokens, rope)
        return self.ln1(tokens), grid

    def forward(self, x: Tensor) -> Tensor:
        """Feature map (B, C, h, w) of the patch tokens, as every task head consumes it."""
        tokens, (height, width) = self.forward_tokens(x)
        patches = tokens[:, self.cfg.num_prefix_tokens :]
        return patches.reshape(patches.shape[0], height, width, -1).permute(0, 3, 1, 2)
