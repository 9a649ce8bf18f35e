"""The official task heads' facts, one record per released (or announced) task: the one place in `core/arch`
that names tasks.

Why here: `core/arch` sits below `core/tasks` (a task module names its head; the architecture never imports a
task), so the head kind, output conv, channels, norm, scale branch, sigmoid and widths of each official head are
declared once, for the heads, the presets (`presets.preset_config`) and the tiny test models
(`core/testing/synthetic`). Widths are from the official configs; loading never uses them
(`core.checkpoints.infer` reads every number from the weights).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Widths = tuple[tuple[int, ...], tuple[int, ...]]  # (deconv / upsampling widths, conv widths)
DENSE_DEFAULT: Widths = ((768, 512, 256, 128), (64, 32, 16))


@dataclass(frozen=True)
class HeadFacts:
    """One official head: kind ("heatmap" | "dense"), output channels, the 1×1 output conv's name, its widths by
    size ("default" for the other sizes), the norm of a dense head, whether it has the pointmap's scale branch or
    ends in a sigmoid, and for a heatmap head the (×2 deconvs, convs) of its tiny test version (pose ends at 1/4 of
    the input, seg at full size)."""

    kind: str
    out_channels: int
    output_conv: str
    widths: Mapping[str, Widths] = field(default_factory=dict)
    norm: str = "instance"
    scale_branch: bool = False
    sigmoid: bool = False
    tiny_layers: tuple[int, int] = (0, 0)

    def widths_for(self, size: str) -> Widths:
        return self.widths.get(size, self.widths["default"])


# The 1B pose and the 5B dense heads differ from their defaults; matting (released at 1B only,
# `configs/matting/gss_p3m_metasim`) has the normal head's widths and 4 outputs: pre-multiplied RGB + alpha.
HEADS: dict[str, HeadFacts] = {
    "pose": HeadFacts(
        "heatmap",
        308,
        "conv_pose",
        {"1b": ((1536, 1024), (768, 512, 256)), "default": ((1024, 768), (512, 512, 256))},
        tiny_layers=(2, 2),
    ),
    "seg": HeadFacts(
        "heatmap", 29, "conv_seg", {"default": ((512, 256, 128, 64), (64, 64))}, tiny_layers=(4, 1)
    ),
    "normal": HeadFacts(
        "dense", 3, "conv_normal", {"5b": ((1536, 768, 512, 256), (128, 64, 32)), "default": DENSE_DEFAULT}
    ),
    "albedo": HeadFacts(
        "dense",
        3,
        "conv_albedo",
        {"5b": ((1536, 768, 512, 256), (64, 32, 16)), "default": DENSE_DEFAULT},
        norm="rms",  # per-pixel RMSNorm where the others use InstanceNorm
    ),
    "pointmap": HeadFacts(
        "dense",
        3,
        "conv_pointmap",
        {"5b": ((1536, 768, 768, 768), (128, 64, 32)), "default": ((1536, 768, 512, 256), (64, 32, 16))},
        scale_branch=True,
    ),
    "matting": HeadFacts("dense", 4, "conv_matting", {"default": DENSE_DEFAULT}, sigmoid=True),
}


def output_convs(kind: str) -> dict[str, str]:
    """Task → the output conv name of the official heads of `kind`."""
    return {task: facts.output_conv for task, facts in HEADS.items() if facts.kind == kind}
