"""The matting task in the core: catalogue entry, task detection from keys, the released 1B layout, the head."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from sapiens2_studio.core import CheckpointError, catalogue, load_model
from sapiens2_studio.core.arch.errors import ModelConfigError
from sapiens2_studio.core.testing.synthetic import synthetic_state_dict

# The released head (configs/matting/gss_p3m_metasim/sapiens2_1b_matting_gss_p3m_metasim-1024x768.py):
# PixelShuffle upsampling 768, 512, 256, 128; three 3x3 convs 64, 32, 16; a 1x1 conv to 4 channels.
UPSAMPLE, CONVS, OUT = (768, 512, 256, 128), (64, 32, 16), 4


def official_matting_head(embed: int) -> dict[str, tuple[int, ...]]:
    """decode_head key → shape of the official matting head on an `embed`-wide backbone."""
    shapes = {
        "decode_head.input_conv.0.weight": (embed, embed, 3, 3),
        "decode_head.input_conv.0.bias": (embed,),
    }
    channels = embed
    for i, out in enumerate(UPSAMPLE):
        shapes[f"decode_head.upsample_blocks.{i}.0.weight"] = (out * 4, channels, 3, 3)
        shapes[f"decode_head.upsample_blocks.{i}.0.bias"] = (out * 4,)
        channels = out
    for i, out in enumerate(CONVS):
        shapes[f"decode_head.conv_layers.{3 * i}.weight"] = (out, channels, 3, 3)
        shapes[f"decode_head.conv_layers.{3 * i}.bias"] = (out,)
        channels = out
    shapes["decode_head.conv_matting.weight"] = (OUT, channels, 1, 1)
    shapes["decode_head.conv_matting.bias"] = (OUT,)
    return shapes


@pytest.mark.parametrize(("size", "embed"), [("1b", 1536), ("0.4b", 1024)])
def test_official_matting_layout_loads_strictly(checkpoint_keys_dir, size, embed):
    """The 1B file's layout (official backbone dump + the config's head) and a future 0.4B one, on meta."""
    backbone = json.loads((checkpoint_keys_dir / f"sapiens2_{size}_pretrain.json").read_text())["keys"]
    shapes = {f"backbone.{k}": tuple(v) for k, v in backbone.items()}
    shapes.update(official_matting_head(embed))
    model = load_model({k: torch.empty(v, device="meta") for k, v in shapes.items()}, task="matting")
    assert (model.spec.size, model.spec.task) == (size, "matting")
    head = model.cfg.head
    assert (head.upsample_channels, head.conv_channels, head.conv_kernels) == (UPSAMPLE, CONVS, (3, 3, 3))
    assert head.out_channels == OUT and head.norm == "instance" and not head.scale_mlp
    assert model.spec.fixed_input_size is None  # no scale branch: any multiple of 16 works
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == shapes


def test_matting_output_is_the_sigmoid_of_the_output_conv(tiny_checkpoints):
    model = load_model(tiny_checkpoints["matting"], task="matting")
    head = model.decode_head
    x = torch.randn(2, 3, 128, 96)
    with torch.no_grad():
        featmap = model.backbone(x)
        logits = head.conv_matting(head.conv_layers(head.upsample_blocks(head.input_conv(featmap))))
        out = model(x)
    assert out.shape == (2, 4, 128, 96)
    assert torch.equal(out, logits.sigmoid())
    assert float(out.min()) > 0.0 and float(out.max()) < 1.0


def test_task_is_read_from_the_output_conv(tmp_path):
    state = synthetic_state_dict("normal")
    renamed = {k.replace("conv_normal", "conv_matting"): v for k, v in state.items()}
    renamed["decode_head.conv_matting.weight"] = torch.randn(4, 8, 1, 1) * 0.3
    renamed["decode_head.conv_matting.bias"] = torch.zeros(4)
    save_file(renamed, str(tmp_path / "custom_name.safetensors"))
    assert load_model(tmp_path / "custom_name.safetensors").task == "matting"
    both = dict(state, **{k: v for k, v in renamed.items() if "conv_matting" in k})
    save_file(both, str(tmp_path / "both.safetensors"))
    with pytest.raises(CheckpointError, match=r"cannot tell the task.*conv_matting"):
        load_model(tmp_path / "both.safetensors")


def test_wrong_task_points_to_the_released_matting_file(tiny_checkpoints):
    with pytest.raises(CheckpointError, match=r"normal checkpoint, but a matting model.*sapiens2_1b_matting"):
        load_model(tiny_checkpoints["normal"], task="matting")
    with pytest.raises(CheckpointError, match=r"matting checkpoint, but a seg model"):
        load_model(tiny_checkpoints["matting"], task="seg")


def test_catalogue_knows_matting():
    assert "matting" in catalogue.TASKS and catalogue.RUN_ORDER[-1] == "matting"
    assert set(catalogue.RUN_ORDER) == set(catalogue.TASKS)
    ref = catalogue.official_file("matting", "1b")
    assert (ref.repo_id, ref.filename) == ("facebook/sapiens2-matting-1b", "sapiens2_1b_matting.safetensors")
    assert catalogue.RELEASED["matting"] == ("1b",) and catalogue.official_file("matting", "1b") == ref
    assert catalogue.parse_official_name("sapiens2_1b_matting.safetensors") == ("matting", "1b")
    assert catalogue.default_size("matting") == "1b" and catalogue.default_size("pose") == "0.4b"
    with pytest.raises(catalogue.CatalogueError, match=r"no official matting checkpoint of size 0.4b.*1b"):
        catalogue.official_file("matting", "0.4b")
    for task in catalogue.TASKS:
        assert task in catalogue.TASK_LABELS and task in catalogue.RELEASED


def test_exact_rope_periods_are_an_fp32_option(tiny_checkpoints):
    model = load_model(tiny_checkpoints["matting"])
    stored = model.backbone.rope_embed.periods.clone()
    with pytest.raises(ModelConfigError, match="float32"):
        model.set_rope_dtype("bf16", periods="exact")
    with pytest.raises(ModelConfigError, match="periods must be"):
        model.set_rope_dtype("fp32", periods="formula")
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        model.set_rope_dtype("fp32")
        checkpoint_periods = model(x)
        model.set_rope_dtype("fp32", periods="exact")
        exact = model(x)
    assert torch.equal(model.backbone.rope_embed.periods, stored)  # the buffer (and state dict) is untouched
    assert not torch.equal(exact, checkpoint_periods)
