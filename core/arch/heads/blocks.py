"""Building blocks shared by the heads: conv → norm → SiLU triples laid out as the checkpoints index them.

One "layer" is three `nn.Sequential` entries (conv, norm, activation), so conv weights sit at indices 0, 3, 6 ….
"""

from __future__ import annotations

from torch import Tensor, nn

from ..errors import ModelConfigError


class RMSNorm2d(nn.Module):
    """RMSNorm over channels at each pixel (albedo head); the weight lives at `<index>.norm.weight`."""

    def __init__(self, channels: int, eps: float = 1e-6, *, device=None, dtype=None) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(channels, eps=eps, device=device, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        # Channels-last contiguous, as the reference does: RMSNorm then reads rows, and results match bit for bit.
        return self.norm(x.movedim(1, -1).contiguous()).movedim(-1, 1).contiguous()


def make_norm(kind: str, channels: int, *, device=None, dtype=None) -> nn.Module:
    if kind == "instance":
        return nn.InstanceNorm2d(channels)  # affine-free, eps 1e-5, per-sample statistics: no keys
    if kind == "rms":
        return RMSNorm2d(channels, device=device, dtype=dtype)
    raise ModelConfigError(f"unknown head norm {kind!r}")


def deconv_padding(kernel: int) -> tuple[int, int]:
    """(padding, output_padding) that make a stride-2 transposed conv exactly double the size."""
    table = {4: (1, 0), 3: (1, 1), 2: (0, 0)}
    if kernel not in table:
        raise ModelConfigError(f"unsupported transposed-conv kernel {kernel}; expected 2, 3 or 4")
    return table[kernel]


def conv_stack(
    in_channels: int,
    channels: tuple[int, ...],
    kernels: tuple[int, ...],
    *,
    norm: str = "instance",
    stride: int = 1,
    transposed: bool = False,
    device=None,
    dtype=None,
) -> nn.Sequential:
    factory = {"device": device, "dtype": dtype}
    layers: list[nn.Module] = []
    for out_channels, kernel in zip(channels, kernels, strict=True):
        if transposed:
            padding, output_padding = deconv_padding(kernel)
            conv: nn.Module = nn.ConvTranspose2d(
                in_channels,
                out_channels,
                kernel,
                stride=2,
                padding=padding,
                output_padding=output_padding,
                bias=False,
                **factory,
            )
        else:
            conv = nn.Conv2d(
                in_channels, out_channels, kernel, stride=stride, padding=(kernel - 1) // 2, **factory
            )
        layers += [conv, make_norm(norm, out_channels, **factory), nn.SiLU()]
        in_channels = out_channels
    return nn.Sequential(*layers)
