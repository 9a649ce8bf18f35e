"""Every released checkpoint layout (key → shape lists in shared/fixtures/checkpoint_keys) builds and loads
strictly on the meta device, and the inferred spec matches the official architecture table."""

from __future__ import annotations

import json

import pytest
import torch
from sapiens2_studio.core import load_model

# size: (embed, depth, heads, head_dim, gqa layers, kv heads in GQA layers, tokenizer layers in the file)
OFFICIAL = {
    "0.1b": (768, 12, 12, 64, (), None, 0),
    "0.4b": (1024, 24, 16, 64, tuple(range(8, 16)), 8, 0),
    "0.8b": (1280, 32, 16, 80, tuple(range(8, 24)), 8, 0),
    "1b": (1536, 40, 24, 64, tuple(range(8, 32)), 12, 0),
    "1b-4k": (1536, 40, 24, 64, tuple(range(8, 32)), 12, 4),
    "5b": (2432, 56, 32, 76, tuple(range(8, 48)), 16, 0),
}
# Head widths per (size, task) from the official configs (sapiens2.md §3).
HEADS = {
    "pose": {
        "0.4b": ((1024, 768), (512, 512, 256)),
        "0.8b": ((1024, 768), (512, 512, 256)),
        "1b": ((1536, 1024), (768, 512, 256)),
        "5b": ((1024, 768), (512, 512, 256)),
    },
    "normal": {"0.4b": ((768, 512, 256, 128), (64, 32, 16)), "5b": ((1536, 768, 512, 256), (128, 64, 32))},
    "albedo": {"0.4b": ((768, 512, 256, 128), (64, 32, 16)), "5b": ((1536, 768, 512, 256), (64, 32, 16))},
    "pointmap": {"1b": ((1536, 768, 512, 256), (64, 32, 16)), "5b": ((1536, 768, 768, 768), (128, 64, 32))},
}


def _manifests():
    from conftest import CHECKPOINT_KEYS

    return sorted(p for p in CHECKPOINT_KEYS.glob("sapiens2_*.json")) if CHECKPOINT_KEYS.exists() else []


def _size_task(stem: str) -> tuple[str, str]:
    parts = stem.split("_")[1:]  # sapiens2_<size>[_4k]_<task>
    task = parts[-1]
    size = "-".join(parts[:-1])
    return size, task


@pytest.mark.parametrize("manifest", _manifests(), ids=lambda p: p.stem)
def test_released_layout_loads_strictly(manifest):
    keys = json.loads(manifest.read_text())["keys"]
    size, task = _size_task(manifest.stem)
    state = {k: torch.empty(shape, device="meta") for k, shape in keys.items()}
    model = load_model(state, task=task)
    spec = model.spec
    embed, depth, heads, head_dim, gqa, kv, tok = OFFICIAL[size]
    assert (spec.size, spec.task) == (size, task)
    assert (spec.embed_dim, spec.depth, spec.num_heads, spec.head_dim) == (embed, depth, heads, head_dim)
    assert spec.gqa_layers == gqa
    assert spec.kv_heads == tuple(kv if i in gqa else heads for i in range(depth))
    assert spec.tokenizer_layers == tok
    assert spec.ffn_hidden == 4 * embed
    assert next(model.parameters()).device.type == "meta"
    # The model expects exactly the file's keys and shapes.
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {
        (k if task != "pretrain" else f"backbone.{k}"): tuple(v) for k, v in keys.items()
    }
    head_cfg = model.cfg.head
    if task == "pose" and size in HEADS["pose"]:
        assert (head_cfg.deconv_channels, head_cfg.conv_channels) == HEADS["pose"][size]
    if task in ("normal", "albedo", "pointmap") and size in HEADS[task]:
        assert (head_cfg.upsample_channels, head_cfg.conv_channels) == HEADS[task][size]
    if task == "pointmap":
        assert head_cfg.scale_mlp == (6144, 512, 128, 1)
        assert spec.fixed_input_size == (1024, 768)
    if task == "albedo":
        assert head_cfg.norm == "rms"


def test_all_26_layouts_present():
    from conftest import CHECKPOINT_KEYS, need_shared

    need_shared(CHECKPOINT_KEYS)
    assert len(_manifests()) == 26
