"""Dense heads at input resolution: normal, albedo, pointmap and matting.

Topology: 3x3 input conv → upsampling blocks (conv to 4x channels → PixelShuffle(2) → norm → SiLU) → convs →
1x1 output conv (3 channels; 4 for matting).  Albedo uses per-pixel RMSNorm where the others use InstanceNorm.  The
pointmap head adds a scale branch on the feature map (stride-2 1x1 convs, flatten in C,H,W order, MLP) whose first
linear width fixes the input size the model accepts (1024x768 for the released weights).  The matting head ends in a
sigmoid at network resolution, as the reference's `MattingHead.forward` does: channels 0–2 are the pre-multiplied
foreground RGB, channel 3 the alpha.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..config import DenseHeadConfig
from ..errors import ModelConfigError
from ..official_heads import HEADS, output_convs
from .blocks import conv_stack, make_norm

OUTPUT_CONV_NAMES = output_convs("dense")
# Tasks whose head applies a sigmoid to the output conv (part of the model in the reference, not post-processing).
SIGMOID_TASKS = frozenset(task for task, facts in HEADS.items() if facts.sigmoid)


class DenseHead(nn.Module):
    def __init__(self, cfg: DenseHeadConfig, task: str, *, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.cfg = cfg
        self.output_name = cfg.output_name or OUTPUT_CONV_NAMES[task]
        self.sigmoid_output = task in SIGMOID_TASKS
        channels = cfg.in_channels
        self.input_conv = conv_stack(channels, (channels,), (cfg.input_kernel,), norm=cfg.norm, **factory)
        blocks = []
        for out_channels in cfg.upsample_channels:
            blocks.append(
                nn.Sequential(
                    nn.Conv2d(
                        channels,
                        out_channels * 4,
                        cfg.upsample_kernel,
                        padding=cfg.upsample_kernel // 2,
                        **factory,
                    ),
                    nn.PixelShuffle(2),
                    make_norm(cfg.norm, out_channels, **factory),
                    nn.SiLU(),
                )
            )
            channels = out_channels
        self.upsample_blocks = nn.Sequential(*blocks)
        self.conv_layers = conv_stack(channels, cfg.conv_channels, cfg.conv_kernels, norm=cfg.norm, **factory)
        channels = cfg.conv_channels[-1] if cfg.conv_channels else channels
        setattr(self, self.output_name, nn.Conv2d(channels, cfg.out_channels, 1, **factory))
        if cfg.scale_mlp:
            self.scale_conv_layers = conv_stack(
                cfg.in_channels, cfg.scale_conv_channels, cfg.scale_conv_kernels, stride=2, **factory
            )
            layers: list[nn.Module] = [nn.Flatten()]
            for i in range(1, len(cfg.scale_mlp)):
                layers.append(nn.Linear(cfg.scale_mlp[i - 1], cfg.scale_mlp[i], **factory))
                if i < len(cfg.scale_mlp) - 1:
                    layers.append(nn.SiLU())
            self.scale_final_layer = nn.Sequential(*layers)

    @property
    def has_scale(self) -> bool:
        return bool(self.cfg.scale_mlp)

    def forward(self, featmap: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        x = self.conv_layers(self.upsample_blocks(self.input_conv(featmap)))
        dense = getattr(self, self.output_name)(x)
        if self.sigmoid_output:
            dense = dense.sigmoid()
        if not self.has_scale:
            return dense
        pooled = self.scale_conv_layers(featmap)
        expected = self.cfg.scale_mlp[0]
        if pooled[0].numel() != expected:
            height, width = featmap.shape[-2:]
            raise ModelConfigError(
                f"this pointmap model's scale branch was trained for a fixed input size ({expected} features) "
                f"but a {height * 16}x{width * 16} input gives {pooled[0].numel()}; feed 1024x768 images "
                "(the pipeline resizes and pads for you)"
            )
        return dense, self.scale_final_layer(pooled)
