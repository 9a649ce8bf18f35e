"""SwiGLU feed-forward: one `w12` linear whose first half is the SiLU gate, then `w3` (all with bias)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SwiGLUFFN(nn.Module):
    def __init__(self, dim: int, hidden: int, *, device=None, dtype=None) -> None:
        super().__init__()
        self.w12 = nn.Linear(dim, 2 * hidden, device=device, dtype=dtype)
        self.w3 = nn.Linear(hidden, dim, device=device, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        gate, value = self.w12(x).chunk(2, dim=-1)
        hidden = F.silu(gate)
        return self.w3(hidden.mul_(value) if not torch.is_grad_enabled() else hidden * value)
