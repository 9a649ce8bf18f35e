"""Tiny checkpoints written as real .safetensors files in the official layout: load, dtype, and every bad input."""

from __future__ import annotations

import re
import struct

import pytest
import torch
from safetensors.torch import load_file, save_file
from sapiens2_studio.core import CheckpointError, load_model
from sapiens2_studio.core.testing.synthetic import synthetic_state_dict

TASKS = ("pretrain", "pose", "seg", "normal", "albedo", "pointmap", "matting")


@pytest.mark.parametrize("task", TASKS)
def test_tiny_file_loads_and_runs(tiny_checkpoints, task):
    model = load_model(tiny_checkpoints[task], task=task)
    assert model.task == task and model.spec.task == task
    assert model.spec.size == "custom" and model.dtype == torch.float32
    x = torch.randn(1, 3, 1024, 768)
    with torch.no_grad():
        out = model(x)
    expected = {
        "pretrain": [(1, 32, 64, 48)],
        "pose": [(1, 308, 256, 192)],
        "seg": [(1, 29, 1024, 768)],
        "normal": [(1, 3, 1024, 768)],
        "albedo": [(1, 3, 1024, 768)],
        "pointmap": [(1, 3, 1024, 768), (1, 1)],
        "matting": [(1, 4, 1024, 768)],
    }[task]
    outs = out if isinstance(out, tuple) else (out,)
    assert [tuple(o.shape) for o in outs] == expected
    assert all(torch.isfinite(o).all() for o in outs)


def test_weights_equal_the_file(tiny_checkpoints):
    path = tiny_checkpoints["normal"]
    model = load_model(path)
    file_state = load_file(str(path))
    for key, value in model.state_dict().items():
        assert torch.equal(value, file_state[key]), key


def test_bf16_file_into_fp32_and_fp32_file_into_bf16(tmp_path, tiny_checkpoints):
    state = synthetic_state_dict("pose")
    save_file({k: v.to(torch.bfloat16) for k, v in state.items()}, str(tmp_path / "bf16.safetensors"))
    m32 = load_model(tmp_path / "bf16.safetensors", dtype="fp32")
    assert m32.dtype == torch.float32
    assert m32.backbone.rope_embed.periods.dtype == torch.bfloat16
    m16 = load_model(tiny_checkpoints["pose"], dtype="bf16")
    assert m16.dtype == torch.bfloat16 and m16.backbone.rope_embed.periods.dtype == torch.bfloat16
    ref = load_model(tiny_checkpoints["pose"])
    x = torch.randn(1, 3, 256, 192)
    with torch.no_grad():
        a, b = ref(x), m16(x.bfloat16()).float()
    assert ((a - b).norm() / a.norm()).item() < 0.05


def test_meta_mapping_builds_without_memory():
    state = {k: torch.empty(v.shape, device="meta") for k, v in synthetic_state_dict("seg").items()}
    model = load_model(state)
    assert model.task == "seg" and next(model.parameters()).is_meta


def _write(path, state):
    save_file(state, str(path))
    return path


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_model(tmp_path / "nope.safetensors")


def test_truncated_file(tmp_path, tiny_checkpoints):
    data = tiny_checkpoints["pose"].read_bytes()
    path = tmp_path / "cut.safetensors"
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(CheckpointError, match=r"truncated.*download it again"):
        load_model(path)


def test_corrupt_header(tmp_path):
    path = tmp_path / "bad.safetensors"
    header = b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]'  # no closing brace
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    with pytest.raises(CheckpointError, match="corrupt safetensors header"):
        load_model(path)


def test_html_page_instead_of_weights(tmp_path):
    path = tmp_path / "sapiens2_0.4b_pose.safetensors"
    path.write_text("<!DOCTYPE html><html>Access denied</html>")
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        load_model(path)


def test_pickle_refused_then_loaded_with_weights_only(tmp_path):
    path = tmp_path / "model.pth"
    torch.save({"state_dict": synthetic_state_dict("seg")}, path)
    with pytest.raises(CheckpointError, match="pickle"):
        load_model(path)
    model = load_model(path, allow_pickle=True)
    assert model.task == "seg"


def test_wrong_task(tiny_checkpoints):
    with pytest.raises(CheckpointError, match=r"is a seg checkpoint, but a pose model is needed.*pose file"):
        load_model(tiny_checkpoints["seg"], task="pose")


def test_missing_and_unexpected_keys_are_named(tmp_path):
    state = synthetic_state_dict("pose")
    del state["backbone.blocks.1.attn.q_norm.weight"]
    state["decode_head.extra.weight"] = torch.zeros(1)
    with pytest.raises(CheckpointError) as info:
        load_model(_write(tmp_path / "x.safetensors", state))
    message = str(info.value)
    assert "missing keys (1): backbone.blocks.1.attn.q_norm.weight" in message
    assert "unexpected keys (1): decode_head.extra.weight" in message


def test_shape_mismatch_is_named(tmp_path):
    state = synthetic_state_dict("normal")
    state["decode_head.conv_layers.0.bias"] = torch.zeros(5)
    with pytest.raises(CheckpointError, match=r"shape mismatches \(1\): decode_head.conv_layers.0.bias"):
        load_model(_write(tmp_path / "x.safetensors", state))


def test_sapiens_v1_layout_is_recognised(tmp_path):
    state = {"layers.0.ln1.weight": torch.ones(4), "pos_embed": torch.zeros(1, 4, 4)}
    with pytest.raises(CheckpointError, match=r"Sapiens \(v1\)"):
        load_model(_write(tmp_path / "v1.safetensors", state))


def test_head_without_output_conv(tmp_path):
    state = synthetic_state_dict("seg")
    state = {k: v for k, v in state.items() if "conv_seg" not in k}
    with pytest.raises(CheckpointError, match="cannot tell the task"):
        load_model(_write(tmp_path / "x.safetensors", state))


def test_pointmap_rejects_other_input_sizes(tiny_checkpoints):
    model = load_model(tiny_checkpoints["pointmap"])
    assert model.spec.fixed_input_size == (1024, 768)
    with pytest.raises(ValueError, match="1024x768"), torch.no_grad():
        model(torch.randn(1, 3, 512, 384))


def test_input_not_multiple_of_patch(tiny_checkpoints):
    model = load_model(tiny_checkpoints["pretrain"])
    with pytest.raises(ValueError, match="multiple of the 16-px patch"), torch.no_grad():
        model(torch.randn(1, 3, 100, 96))


# ------------------------------------------------------------------- messages that point the right way (#11)


def test_pickle_refusal_gives_each_front_end_its_own_way_out(tmp_path):
    """Only Python has allow_pickle=True; the CLI and ComfyUI are told to convert the file, and how."""
    path = tmp_path / "model.pth"
    torch.save({"state_dict": synthetic_state_dict("seg")}, path)
    with pytest.raises(CheckpointError) as info:
        load_model(path)
    error = info.value
    assert "allow_pickle=True" in error.text("python")
    assert "allow_pickle" not in error.text("cli") and "allow_pickle" not in error.text("comfyui")
    assert f"sapiens2 convert {path} {tmp_path / 'model.safetensors'}" in error.text("cli")
    assert "save_file(" in error.text("comfyui") and "models/sapiens2" in error.text("comfyui")
    from sapiens2_studio.core.checkpoints import convert_to_safetensors

    converted = convert_to_safetensors(path, tmp_path / "model.safetensors")
    assert load_model(converted).task == "seg"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("task", "key", "axis", "value"),
    [
        ("normal", "decode_head.conv_layers.0.weight", 0, 5),  # the head's width is read from it
        ("pose", "backbone.blocks.0.ffn.w3.weight", 1, 64),  # the FFN width is read from block 0
        ("seg", "decode_head.deconv_layers.3.weight", 1, 4),
    ],
)
def test_a_mis_shaped_source_tensor_is_named_not_its_neighbours(tmp_path, task, key, axis, value):
    state = synthetic_state_dict(task)
    right = tuple(state[key].shape)
    shape = list(right)
    shape[axis] = value
    state[key] = torch.zeros(shape)
    with pytest.raises(CheckpointError) as info:
        load_model(_write(tmp_path / "x.safetensors", state))
    message = str(info.value)
    assert f"tensor {key} has shape {tuple(shape)}, but the rest of the file implies {right}" in message
    assert "shape mismatches" not in message  # the neighbours, which are fine, are not listed


@pytest.mark.parametrize(
    "key",
    [
        "decode_head.conv_layers.0.weight",
        "decode_head.deconv_layers.0.weight",
        "backbone.blocks.0.attn.q_norm.weight",
        "backbone.blocks.0.attn.gamma.weight",
    ],
)
def test_one_missing_key_is_reported_alone(tmp_path, key):
    """A hole in a layer chain, or block 0's optional norms, used to renumber the chain / switch the flag off, so
    fine keys were listed as "unexpected" beside the one really missing."""
    state = synthetic_state_dict("pose")
    del state[key]
    with pytest.raises(CheckpointError, match=re.escape(key)) as info:
        load_model(_write(tmp_path / "x.safetensors", state))
    assert "unexpected" not in str(info.value)


def test_wrong_task_under_an_official_name_does_not_suggest_that_file(tmp_path):
    path = tmp_path / "pose" / "sapiens2_0.4b_pose.safetensors"
    path.parent.mkdir()
    _write(path, synthetic_state_dict("seg"))
    with pytest.raises(CheckpointError) as info:
        load_model(path, task="pose")
    error = info.value
    assert "holds a seg model, not the pose model its name promises" in error.message
    assert "such as sapiens2_0.4b_pose" not in error.text("cli")
    assert "sapiens2 download --task pose --size 0.4b --force" in error.text("cli")
