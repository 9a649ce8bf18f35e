"""A tiny garment checkpoint in the official layout (`backbone.*` + `decode_head.*`), as real safetensors.

What a fine-tuning run saves is the same layout at full size: the Sapiens2 backbone's keys under `backbone.` and
the head's under `decode_head.`, the output conv named `conv_garment` with one output channel per class. Tests
and demos use this small one (random weights, seeded) to run the whole path without trained weights.
"""

from __future__ import annotations

import os
from pathlib import Path

from .garment import CLASSES


def tiny_state_dict(*, classes: int = len(CLASSES), seed: int = 0, head_width: int = 8) -> dict:
    """Seeded weights of a small backbone and a light garment head (two x2 transposed convs, one conv)."""
    from sapiens2_studio.core.arch.config import HeatmapHeadConfig, ModelConfig
    from sapiens2_studio.core.testing.synthetic import state_dict_for, tiny_config

    backbone = tiny_config().backbone
    w = head_width
    head = HeatmapHeadConfig(
        backbone.embed_dim, (w, w), (4, 4), (w,), (1,), classes, output_name="conv_garment"
    )
    return state_dict_for(ModelConfig(backbone=backbone, task="garment", head=head), seed=seed)


def write_tiny_checkpoint(
    path: str | os.PathLike[str], *, classes: int = len(CLASSES), seed: int = 0
) -> Path:
    """Write the tiny checkpoint to `path` (a .safetensors file) and return the path."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tiny_state_dict(classes=classes, seed=seed), str(path))
    return path


if __name__ == "__main__":  # python -m sapiens2_garment_seg.checkpoint OUT.safetensors [CLASSES]
    import sys

    write_tiny_checkpoint(sys.argv[1], classes=int(sys.argv[2]) if len(sys.argv) > 2 else len(CLASSES))
