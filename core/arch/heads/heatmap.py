"""Pose heatmap head and segmentation head: the same deconv/conv topology with a different 1x1 output conv.

Pose: 308 heatmaps at 1/4 of the input size (two x2 deconvs on the 1/16 feature map).
Seg: 29 class logits at the input size (four x2 deconvs).
"""

from __future__ import annotations

from torch import Tensor, nn

from ..config import HeatmapHeadConfig
from ..official_heads import output_convs
from .blocks import conv_stack

OUTPUT_CONV_NAMES = output_convs("heatmap")


class HeatmapHead(nn.Module):
    def __init__(self, cfg: HeatmapHeadConfig, task: str, *, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.cfg = cfg
        self.output_name = cfg.output_name or OUTPUT_CONV_NAMES[task]
        self.deconv_layers = conv_stack(
            cfg.in_channels, cfg.deconv_channels, cfg.deconv_kernels, transposed=True, **factory
        )
        last = cfg.deconv_channels[-1] if cfg.deconv_channels else cfg.in_channels
        self.conv_layers = conv_stack(last, cfg.conv_channels, cfg.conv_kernels, **factory)
        last = cfg.conv_channels[-1] if cfg.conv_channels else last
        setattr(self, self.output_name, nn.Conv2d(last, cfg.out_channels, 1, **factory))

    def forward(self, featmap: Tensor) -> Tensor:
        x = self.conv_layers(self.deconv_layers(featmap))
        return getattr(self, self.output_name)(x)
