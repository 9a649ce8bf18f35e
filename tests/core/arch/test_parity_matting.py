"""Matting parity with Hugging Face Transformers 5.23 `Sapiens2ForImageMatting` (fp32, CPU), on synthetic weights in
the official layout loaded through Transformers' own key conversion (`tests/matting_parity.py` builds them).

Tolerances (relative L2 over the whole output): head on the same feature map ≤ 1e-6 (measured: 0, bit-identical);
whole model ≤ 1e-5 with fp32 RoPE and exact periods (measured ≈ 3e-7). Transformers computes RoPE in float32 from
the formula and ignores the file's bf16 `rope_embed.periods`; our default reproduces the released bf16 RoPE, which
differs from it by ~5e-4 (measured below, for information).

Transformers' image processor (`post_process_image_matting`) imports torchvision, which the registry has no CPU build
of for our CPU torch, so it is not run here; its post-processing (sigmoid in the model, bilinear resize without
antialiasing, clip to [0, 1], composite fg + (1 − α)·bg) was read from its source and is checked in
`test_pipeline_matting.py`.
"""

from __future__ import annotations

import pytest
import torch
from matting_parity import PARITY_CONFIG, load_transformers, measure, write_checkpoint

pytest.importorskip("transformers", minversion="5.23")

HEAD_TOL = 1e-6
WHOLE_TOL = 1e-5


@pytest.fixture(scope="module")
def checkpoint_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("matting_parity")
    write_checkpoint(folder)
    return folder


def test_transformers_converts_every_official_key(checkpoint_folder):
    from safetensors.torch import load_file

    model, info = load_transformers(checkpoint_folder)
    assert not info["missing_keys"] and not info["mismatched_keys"] and not info["error_msgs"]
    assert not info["unexpected_keys"]  # `rope_embed.periods` is dropped on purpose by Transformers
    official = load_file(str(checkpoint_folder / "model.safetensors"))
    theirs = model.state_dict()
    assert torch.equal(theirs["decode_head.predictor.weight"], official["decode_head.conv_matting.weight"])
    assert torch.equal(
        theirs["decode_head.conv_layers.2.convolution.weight"], official["decode_head.conv_layers.6.weight"]
    )
    assert torch.equal(
        theirs["model.model.layer.1.attention.k_proj.weight"], official["backbone.blocks.1.attn.wk.weight"]
    )
    gate, up = official["backbone.blocks.3.ffn.w12.weight"].chunk(2)
    assert torch.equal(theirs["model.model.layer.3.mlp.gate_proj.weight"], gate)
    assert torch.equal(theirs["model.model.layer.3.mlp.up_proj.weight"], up)
    assert model.config.num_key_value_heads_per_layer == list(PARITY_CONFIG.backbone.kv_heads)


@pytest.mark.parametrize("shape", [(2, 3, 256, 192), (1, 3, 1024, 768)], ids=["256x192x2", "1024x768"])
def test_model_matches_transformers(checkpoint_folder, shape):
    inputs = torch.randn(shape)
    numbers, _ = measure(checkpoint_folder, inputs)
    assert numbers.head <= HEAD_TOL, numbers
    assert numbers.whole_fp32_exact <= WHOLE_TOL, numbers
    assert numbers.featmap_fp32_exact <= WHOLE_TOL, numbers
    # Why the exact-periods option exists: with the file's bf16-rounded periods (the reference's fp32 RoPE) or the
    # released bf16 RoPE, the two implementations really differ.
    assert numbers.whole_fp32_checkpoint > 5 * WHOLE_TOL, numbers
    assert numbers.whole_bf16 > numbers.whole_fp32_checkpoint, numbers
