"""16-px patch embedding (a strided conv, no padding) returning tokens row-major and the grid size."""

from __future__ import annotations

from torch import Tensor, nn

from .errors import ModelConfigError


class PatchEmbed(nn.Module):
    def __init__(self, in_channels: int, dim: int, patch_size: int, *, device=None, dtype=None) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.projection = nn.Conv2d(
            in_channels, dim, kernel_size=patch_size, stride=patch_size, device=device, dtype=dtype
        )

    def forward(self, x: Tensor) -> tuple[Tensor, tuple[int, int]]:
        height, width = x.shape[-2:]
        if height % self.patch_size or width % self.patch_size:
            raise ModelConfigError(
                f"input {height}x{width} is not a multiple of the {self.patch_size}-px patch size; "
                "resize or pad the image first (the pipeline does this for you)"
            )
        x = self.projection(x)
        grid = (x.shape[2], x.shape[3])
        return x.flatten(2).transpose(1, 2), grid
