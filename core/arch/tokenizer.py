"""1B-4K hierarchical tokenizer: attention inside 4x4-patch windows pooled into one token per window.

Each window is `[w_cls] + 16 patch tokens` plus a learned local position embedding, run through plain blocks (no
QK-norm, no LayerScale, no RoPE); the window's CLS output becomes one token of a (H/4, W/4) grid.  Windows are
processed in chunks so a 4096x3072 input (12,288 windows) keeps activation memory bounded.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .block import Block
from .errors import ModelConfigError


class WindowTokenizer(nn.Module):
    def __init__(
        self,
        dim: int,
        *,
        num_layers: int,
        head_dim: int,
        ffn_hidden: int,
        window: int = 4,
        eps: float = 1e-6,
        chunk_windows: int = 1024,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.window = window
        self.chunk_windows = chunk_windows
        self.local_pos_embed = nn.Parameter(torch.zeros(1, 1 + window * window, dim, **factory))
        self.w_cls = nn.Parameter(torch.zeros(1, 1, dim, **factory))
        num_heads = dim // head_dim
        self.blocks = nn.ModuleList(
            Block(
                dim,
                head_dim=head_dim,
                kv_heads=num_heads,
                ffn_hidden=ffn_hidden,
                qk_norm=False,
                layer_scale=False,
                eps=eps,
                **factory,
            )
            for _ in range(num_layers)
        )

    def forward(self, tokens: Tensor, grid: tuple[int, int]) -> tuple[Tensor, tuple[int, int]]:
        batch, _, dim = tokens.shape
        height, width = grid
        ws = self.window
        if height % ws or width % ws:
            raise ModelConfigError(
                f"the 4K tokenizer needs a patch grid divisible by {ws}; got {height}x{width} patches "
                f"(image sides must be multiples of {16 * ws} px)"
            )
        rows, cols = height // ws, width // ws
        windows = (
            tokens.view(batch, rows, ws, cols, ws, dim).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, dim)
        )
        pooled = windows.new_empty(windows.shape[0], dim)
        for start in range(0, windows.shape[0], self.chunk_windows):
            chunk = windows[start : start + self.chunk_windows]
            x = torch.cat((self.w_cls.expand(chunk.shape[0], -1, -1), chunk), dim=1) + self.local_pos_embed
            for block in self.blocks:
                x = block(x)
            pooled[start : start + chunk.shape[0]] = x[:, 0]
        return pooled.view(batch, rows * cols, dim), (rows, cols)
