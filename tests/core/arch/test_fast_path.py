"""Fast-path options give the plain path's numbers: fused q/k/v, head-dim padding, the math attention backend,
bf16 compute, and torch.compile where it works on this CPU."""

from __future__ import annotations

import pytest
import torch
from sapiens2_studio.core import load_model
from sapiens2_studio.core.arch.attention import attend
from sapiens2_studio.core.testing.synthetic import synthetic_state_dict


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


@pytest.fixture(scope="module")
def gqa_model_state():
    # head_dim 12 (not a multiple of 8, like the 5B model's 76) and GQA in layer 1.
    return synthetic_state_dict("pose", embed_dim=48, depth=3, head_dim=12, kv_heads=(4, 2, 4))


def _unfused(model):
    for module in model.modules():
        if hasattr(module, "_fused"):
            module._fused = None
    return model


def test_fused_qkv_is_bit_identical_and_shares_storage(gqa_model_state):
    fused = load_model(gqa_model_state)
    attn = fused.backbone.blocks[1].attn
    assert attn._fused is not None and attn.wk.weight.data_ptr() > attn.wq.weight.data_ptr()
    assert attn.wq.weight.untyped_storage().data_ptr() == attn._fused[0].untyped_storage().data_ptr()
    plain = _unfused(load_model(gqa_model_state))
    x = torch.randn(2, 3, 128, 96)
    with torch.no_grad():
        assert rel(fused(x), plain(x)) < 1e-6
    # The state dict still has the official keys and values.
    assert set(fused.state_dict()) == set(gqa_model_state)
    assert torch.equal(
        fused.state_dict()["backbone.blocks.1.attn.wk.weight"],
        gqa_model_state["backbone.blocks.1.attn.wk.weight"],
    )


@pytest.mark.parametrize("pad_to", [8, 16])
def test_padded_head_dim_matches(gqa_model_state, pad_to):
    model = load_model(gqa_model_state)
    x = torch.randn(1, 3, 128, 96)
    with torch.no_grad():
        ref = model(x)
        model.set_attention("sdpa", pad_head_dim_to=pad_to)
        padded = model(x)
    assert rel(padded, ref) < 1e-5


def test_attend_padding_keeps_the_unpadded_scale():
    q, k, v = (torch.randn(1, 2, 10, 76) for _ in range(3))
    ref = torch.softmax(q @ k.transpose(-2, -1) / 76**0.5, dim=-1) @ v
    assert rel(attend(q, k, v, pad_head_dim_to=8), ref) < 1e-5
    assert rel(attend(q, k, v, backend="math"), ref) < 1e-5


def test_math_backend_matches(gqa_model_state):
    model = load_model(gqa_model_state)
    x = torch.randn(1, 3, 128, 96)
    with torch.no_grad():
        ref = model(x)
        model.set_attention("math")
        assert rel(model(x), ref) < 1e-3  # different fp32 summation order, amplified through the layers
    with pytest.raises(ValueError, match="unknown attention backend"):
        model.set_attention("flash3")


def test_bf16_within_documented_tolerance(gqa_model_state):
    """bf16 weights and compute stay within 3% relative L2 of fp32 (docs/performance.md)."""
    ref_model = load_model(gqa_model_state)
    bf16_model = load_model(gqa_model_state, dtype="bf16")
    x = torch.randn(1, 3, 128, 96)
    with torch.no_grad():
        ref = ref_model(x)
        out = bf16_model(x.bfloat16()).float()
    assert ((out - ref).norm() / ref.norm()).item() < 0.03


def test_inference_and_grad_paths_agree(gqa_model_state):
    """In-place residual updates are used only without autograd; both paths give the same numbers."""
    model = load_model(gqa_model_state)
    x = torch.randn(1, 3, 64, 48)
    with torch.inference_mode():
        fast = model(x)
    slow = model(x)
    assert rel(fast, slow.detach()) < 1e-6


@pytest.mark.slow
def test_torch_compile_matches(gqa_model_state):
    if not hasattr(torch, "compile"):
        pytest.skip("torch.compile not available")
    model = load_model(gqa_model_state)
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        ref = model(x)
        try:
            compiled = torch.compile(model, dynamic=False)
            out = compiled(x)
        except Exception as exc:  # no C++ toolchain, unsupported platform
            pytest.skip(f"torch.compile unavailable here: {type(exc).__name__}: {str(exc)[:200]}")
    assert rel(out, ref) < 1e-4


def test_auto_batch_size_on_cpu_is_the_cpu_default(gqa_model_state):
    from sapiens2_studio.core.arch.batching import auto_batch_size

    model = load_model(gqa_model_state)
    assert auto_batch_size(model, 128, 96) == 1
    assert auto_batch_size(model, 128, 96, cpu_batch=4) == 4


def test_fp16_overflow_is_reported_not_returned():
    state = synthetic_state_dict("pretrain")
    ok = load_model(state, dtype="fp16")
    x = torch.randn(1, 3, 64, 48, dtype=torch.float16)
    with torch.no_grad():
        assert torch.isfinite(ok(x)).all()
    state["blocks.0.ffn.w3.weight"] = state["blocks.0.ffn.w3.weight"] * 1e6
    hot = load_model(state, dtype="fp16")
    with pytest.raises(FloatingPointError, match="bfloat16"), torch.no_grad():
        hot(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_half_split_rope_equals_the_reference_formula_bit_for_bit(dtype):
    """The fused RoPE (halves, no rotate_half tensor, no concatenations) equals x*cos + rotate_half(x)*sin."""
    from sapiens2_studio.core.arch.rope import RopeEmbedding, apply_rope, rotate_half

    rope = RopeEmbedding(16)
    sin, cos = rope(height=8, width=6)
    q, k = (torch.randn(2, 4, 9 + 48, 16, dtype=dtype) for _ in range(2))
    fused_q, fused_k = apply_rope(q, k, sin, cos)
    for x, fused in ((q, fused_q), (k, fused_k)):
        xr = x.to(sin.dtype)
        patches = xr[..., 9:, :]
        expected = torch.cat((xr[..., :9, :], patches * cos + rotate_half(patches) * sin), dim=-2).to(dtype)
        assert torch.equal(fused, expected)


def test_fused_qkv_follows_model_moves_and_releases_stale_copies(gqa_model_state):
    model = load_model(gqa_model_state)
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        ref = model(x)
    model.to(torch.float64)  # a whole-model move re-fuses on the new storage
    attn = model.backbone.blocks[1].attn
    assert attn._fused is not None and attn._fused[0].dtype == torch.float64 and attn._fused_is_current()
    with torch.no_grad():
        assert rel(model(x.double()), ref) < 1e-5
    for child in attn.children():  # modules moved one by one (ComfyUI-style): the stale fused copy is dropped
        child.to(torch.float32)
    with torch.no_grad():
        attn(torch.randn(1, 5, 48))
    assert attn._fused is None
