"""Matting parity with Hugging Face Transformers' `Sapiens2ForImageMatting` (an independent implementation).

Builds a tiny matting checkpoint in the official key layout (seeded synthetic weights: GQA layers, three 3x3 head
convs, 4 outputs, as the released 1B head), writes it as `model.safetensors` with a Transformers `config.json`, and
loads it with `from_pretrained`, so Transformers' own key conversion (`conversion_mapping.py`, entries "sapiens2" and
"Sapiens2ForImageMatting") maps the official keys. Nothing is written outside a temporary folder; no weights are
kept. Run `python tests/matting_parity.py` to print the measured numbers (used in docs/matting.md).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from sapiens2_studio.core import load_model
from sapiens2_studio.core.arch.config import BackboneConfig, DenseHeadConfig, ModelConfig
from sapiens2_studio.core.testing.synthetic import state_dict_for

# Tiny, but with what the released model has: grouped-query layers (2 of 4 KV heads), a PixelShuffle head with
# four upsampling blocks and three 3x3 convs, a 4-channel output.
PARITY_CONFIG = ModelConfig(
    backbone=BackboneConfig(embed_dim=64, depth=4, head_dim=16, kv_heads=(4, 2, 2, 4), ffn_hidden=256),
    task="matting",
    head=DenseHeadConfig(64, (32, 16, 16, 8), (8, 8, 8), (3, 3, 3), out_channels=4),
)
SEED = 7


def transformers_config(cfg: ModelConfig, image_hw: tuple[int, int]) -> dict[str, Any]:
    """The Transformers `config.json` describing the same architecture."""
    bb, head = cfg.backbone, cfg.head
    assert isinstance(head, DenseHeadConfig)
    return {
        "model_type": "sapiens2",
        "architectures": ["Sapiens2ForImageMatting"],
        "hidden_size": bb.embed_dim,
        "intermediate_size": bb.ffn_hidden,
        "num_hidden_layers": bb.depth,
        "num_attention_heads": bb.num_heads,
        "num_key_value_heads_per_layer": list(bb.kv_heads),
        "num_register_tokens": bb.num_register_tokens,
        "patch_size": bb.patch_size,
        "image_size": list(image_hw),
        "rope_theta": bb.rope_base,
        "rms_norm_eps": bb.eps,
        "num_labels": head.out_channels,
        "head_config": {
            "use_pixel_shuffle": True,
            "upsample_out_channels": list(head.upsample_channels),
            "upsample_kernel_sizes": [head.upsample_kernel] * len(head.upsample_channels),
            "conv_out_channels": list(head.conv_channels),
            "conv_kernel_sizes": list(head.conv_kernels),
        },
    }


def write_checkpoint(folder: Path, cfg: ModelConfig = PARITY_CONFIG, seed: int = SEED) -> Path:
    """Official-layout `model.safetensors` + Transformers `config.json` in `folder`; returns the weights file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.safetensors"
    save_file(state_dict_for(cfg, seed=seed), str(path))
    (folder / "config.json").write_text(json.dumps(transformers_config(cfg, (1024, 768)), indent=1))
    return path


def load_transformers(folder: Path) -> tuple[torch.nn.Module, dict[str, Any]]:
    """`Sapiens2ForImageMatting.from_pretrained` on the folder (offline), in eval mode, with its loading info."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import Sapiens2ForImageMatting

    model, info = Sapiens2ForImageMatting.from_pretrained(str(folder), output_loading_info=True)
    return model.eval(), info


def rel_l2(ours: torch.Tensor, ref: torch.Tensor) -> float:
    """‖ours − ref‖₂ / ‖ref‖₂ over the whole tensor."""
    return ((ours.double() - ref.double()).norm() / ref.double().norm()).item()


@dataclass
class ParityNumbers:
    head: float  # decode head on the same (Transformers) feature map, sigmoid included
    whole_fp32_exact: float  # whole model, our fp32 RoPE with exact periods (what Transformers computes)
    whole_fp32_checkpoint: float  # whole model, fp32 RoPE with the file's bf16-rounded periods
    whole_bf16: float  # whole model, our default (the released behaviour)
    featmap_fp32_exact: float


def measure(folder: Path, inputs: torch.Tensor) -> tuple[ParityNumbers, dict[str, Any]]:
    """Run both implementations (fp32, CPU) on `inputs` (B, 3, H, W) normalised; return rel-L2 numbers."""
    theirs, info = load_transformers(folder)
    ours = load_model(folder / "model.safetensors", task="matting", dtype="fp32")
    batch, _, height, width = inputs.shape
    patch = PARITY_CONFIG.backbone.patch_size
    with torch.no_grad():
        out = theirs(pixel_values=inputs)
        reference = torch.cat([out.foregrounds, out.alphas], dim=1)
        tokens = theirs.model(pixel_values=inputs).last_hidden_state
        prefix = PARITY_CONFIG.backbone.num_prefix_tokens
        featmap = tokens[:, prefix:].transpose(1, 2).reshape(batch, -1, height // patch, width // patch)
        head = rel_l2(ours.decode_head(featmap), theirs.decode_head(featmap).sigmoid())
        whole_bf16 = rel_l2(ours(inputs), reference)
        ours.set_rope_dtype("fp32")
        whole_checkpoint = rel_l2(ours(inputs), reference)
        ours.set_rope_dtype("fp32", periods="exact")
        whole_exact = rel_l2(ours(inputs), reference)
        featmap_exact = rel_l2(ours.backbone(inputs), featmap)
    numbers = ParityNumbers(head, whole_exact, whole_checkpoint, whole_bf16, featmap_exact)
    return numbers, {"loading_info": info, "transformers": theirs, "ours": ours, "reference": reference}


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_checkpoint(folder)
        for shape in ((2, 3, 256, 192), (1, 3, 1024, 768)):
            numbers, _ = measure(folder, torch.randn(shape))
            print(shape, json.dumps(numbers.__dict__))


if __name__ == "__main__":
    main()
