"""Matting pipeline: pre-processing against the official `MattingResize` (emulated with OpenCV), post-processing as
the official demo / Transformers, and `predict_matting` end to end on a tiny matting checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sapiens2_studio.core import load_model
from sapiens2_studio.core.pipeline import (
    MATTE_EPS,
    PREDICTORS,
    MattingResult,
    PredictionInterrupted,
    TaskMismatchError,
    matting_interpolation,
    matting_to_image,
    normalize,
    predict,
    predict_matting,
    predict_seg,
    prepare_image,
    preprocess_matting,
    preprocess_seg,
    unpremultiply,
)
from sapiens2_studio.core.pipeline.errors import PipelineError

# (H, W): enlarge both axes, shrink both, shrink width / grow height, width kept under 768 while height halves,
# identity, width one pixel too wide (INTER_AREA with a growing height), tiny, 4K-ish.
ODD_SIZES = [
    (301, 203),
    (1999, 1333),
    (97, 1601),
    (2049, 767),
    (1024, 768),
    (513, 769),
    (17, 9),
    (3001, 2253),
]


def official_matting_input(rgb: np.ndarray) -> np.ndarray:
    """The official test pipeline's image, written from its description: `cv2.imread` gives BGR; `MattingResize
    (1024, 768, keep_ratio=False)` resizes to dsize (768, 1024) with INTER_AREA if 768 < w else INTER_LINEAR; the
    data preprocessor reorders BGR → RGB. Returns (3, 1024, 768) uint8 RGB."""
    cv2 = pytest.importorskip("cv2")
    bgr = np.ascontiguousarray(rgb[..., ::-1])
    width = bgr.shape[1]
    interpolation = cv2.INTER_AREA if width > 768 else cv2.INTER_LINEAR
    out = cv2.resize(bgr, (768, 1024), interpolation=interpolation)
    return np.ascontiguousarray(out[..., ::-1].transpose(2, 0, 1))


def synthetic_image(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Gradients, a noisy block and noise: edges and texture that expose any sampling difference."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 / max(width - 1, 1), y * 255 / max(height - 1, 1), (x + y) % 97 * 2.6], axis=-1)
    image = np.clip(base + rng.normal(0, 12, (height, width, 3)), 0, 255).astype(np.uint8)
    image[height // 3 : height // 2, width // 4 : width // 2] = rng.integers(
        0, 256, (height // 2 - height // 3, width // 2 - width // 4, 3)
    )
    return image


@pytest.mark.parametrize(("height", "width"), ODD_SIZES, ids=lambda v: str(v))
def test_preprocessing_is_bit_exact_with_the_official_pipeline(height, width):
    image = synthetic_image(height, width)
    ref = official_matting_input(image)
    prepared = prepare_image(image)
    ours = preprocess_matting(prepared.pixels, quantize=prepared.quantized)
    assert ours.shape == (3, 1024, 768)
    assert np.array_equal(ours.numpy().astype(np.uint8), ref)
    # ComfyUI's IMAGE of an 8-bit file (float k/255) takes the same path.
    from_float = prepare_image(image.astype(np.float32) / 255.0)
    assert torch.equal(preprocess_matting(from_float.pixels, quantize=from_float.quantized), ours)


def test_matting_resize_is_not_the_seg_resize():
    """Seg enlarges with INTER_CUBIC, matting with INTER_LINEAR (what the code does; its comment says cubic)."""
    assert matting_interpolation(768) == "linear" and matting_interpolation(769) == "area"
    image = synthetic_image(301, 203)
    prepared = prepare_image(image)
    seg = preprocess_seg(prepared.pixels, quantize=True)
    matting = preprocess_matting(prepared.pixels, quantize=True)
    assert float((seg - matting).abs().max()) > 10.0


def test_continuous_float_input_is_close_to_the_official_pipeline():
    """16-bit / continuous float sources are resampled in float32 without rounding: within a grey level."""
    image = synthetic_image(513, 769)
    prepared = prepare_image(image.astype(np.float32) / 255.0 + 0.0005)
    assert not prepared.quantized
    ours = preprocess_matting(prepared.pixels, quantize=False).numpy()
    diff = np.abs(ours - 0.0005 * 255 - official_matting_input(image))
    assert diff.mean() < 0.3 and diff.max() < 1.0


def test_postprocessing_is_resize_then_clip_like_the_reference():
    """vis_matting.py / post_process_image_matting: F.interpolate (bilinear, align_corners False) of all four
    sigmoid outputs to (H, W), then clip to [0, 1]; channels 0–2 the pre-multiplied foreground, 3 alpha."""
    out = torch.rand(1, 4, 64, 48)
    matte, premultiplied = matting_to_image(out, (37, 101))
    ref = F.interpolate(out, size=(101, 37), mode="bilinear", align_corners=False).clamp(0, 1)
    assert matte.shape == (1, 1, 101, 37) and premultiplied.shape == (1, 3, 101, 37)
    assert torch.equal(matte, ref[:, 3:]) and torch.equal(premultiplied, ref[:, :3])
    same, _ = matting_to_image(out, (48, 64))
    assert torch.equal(same, out[:, 3:])


def test_unpremultiply_threshold_and_range():
    alpha = torch.tensor([0.0, MATTE_EPS / 2, MATTE_EPS, 0.01, 0.5, 1.0]).reshape(1, 6)
    premultiplied = torch.tensor([0.0, 0.001, 0.003, 0.004, 0.25, 0.8]).reshape(1, 6)
    straight = unpremultiply(premultiplied, alpha)
    assert straight[0, :3].tolist() == [0.0, 0.0, 0.0]  # at or below eps: transparent, colour 0
    assert straight[0, 3:].tolist() == pytest.approx([0.4, 0.5, 0.8])
    over = unpremultiply(torch.tensor([0.3]), torch.tensor([0.1]))
    assert over.item() == 1.0  # premultiplied > alpha (independent predictions): clipped to a colour
    with pytest.raises(PipelineError, match="eps"):
        unpremultiply(premultiplied, alpha, eps=1.0)


def test_straight_times_alpha_gives_back_the_premultiplied_foreground():
    alpha = torch.rand(50, 40)
    premultiplied = torch.rand(50, 40, 3) * alpha[..., None]  # a consistent prediction: colour ≤ alpha
    straight = unpremultiply(premultiplied, alpha[..., None])
    error = (straight * alpha[..., None] - premultiplied).abs()
    assert (
        float(error.max()) <= MATTE_EPS + 1e-6
    )  # only the transparent pixels (alpha ≤ eps) lose their colour
    assert float(error[alpha > MATTE_EPS].max()) < 1e-6


def test_composite_is_the_reference_formula():
    alpha = torch.rand(8, 6)
    premultiplied = torch.rand(8, 6, 3) * alpha[..., None]
    result = MattingResult(alpha, premultiplied, unpremultiply(premultiplied, alpha[..., None]))
    green = torch.tensor([64, 177, 0]) / 255.0  # the official demo's chroma green
    assert torch.allclose(result.composite(green.tolist()), premultiplied + (1 - alpha[..., None]) * green)
    background = torch.rand(8, 6, 3)
    assert torch.allclose(result.composite(background), premultiplied + (1 - alpha[..., None]) * background)
    assert result.rgba().shape == (8, 6, 4) and torch.equal(result.rgba(premultiplied=True)[..., 3], alpha)
    with pytest.raises(PipelineError, match="background"):
        result.composite(torch.rand(5, 5, 3))


@pytest.fixture(scope="module")
def matting_model(tiny_checkpoints):
    return load_model(tiny_checkpoints["matting"], task="matting")


def test_predict_matting_equals_the_pipeline_by_hand(matting_model):
    images = [
        synthetic_image(301, 203, seed=1),
        synthetic_image(97, 1601, seed=2),
        synthetic_image(1024, 768),
    ]
    results = predict_matting(matting_model, images, batch_size=2)
    assert [r.image_size for r in results] == [(203, 301), (1601, 97), (768, 1024)]
    for image, result in zip(images, results):
        prepared = prepare_image(image)
        x = normalize(preprocess_matting(prepared.pixels, quantize=True))[None]
        with torch.no_grad():
            out = matting_model(x)
        ref = F.interpolate(out, size=image.shape[:2], mode="bilinear", align_corners=False).clamp(0, 1)[0]
        assert result.alpha.dtype == torch.float32 and result.alpha.shape == image.shape[:2]
        assert torch.allclose(result.alpha, ref[3], atol=1e-6)
        assert torch.allclose(result.foreground_premultiplied, ref[:3].permute(1, 2, 0), atol=1e-6)
        straight = unpremultiply(ref[:3], ref[3:])
        assert torch.allclose(result.foreground, straight.permute(1, 2, 0), atol=1e-5)
        assert float(result.alpha.min()) >= 0.0 and float(result.alpha.max()) <= 1.0
        assert result.mask is None and result.eps == MATTE_EPS


def test_batching_does_not_change_results(matting_model):
    images = [synthetic_image(120, 90, seed=s) for s in range(2)]
    one = predict_matting(matting_model, images, batch_size=1)
    two = predict_matting(matting_model, images, batch_size=2)
    for a, b in zip(one, two):
        assert torch.allclose(a.alpha, b.alpha, atol=1e-6)
        assert torch.allclose(a.foreground, b.foreground, atol=1e-5)


def test_dispatch_options_and_errors(matting_model, tiny_checkpoints):
    images = [synthetic_image(64, 48)]
    assert PREDICTORS["matting"] is predict_matting
    assert predict(matting_model, images)[0].alpha.shape == (64, 48)
    calls = []
    predict_matting(matting_model, images * 3, batch_size=2, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(2, 3), (3, 3)]
    with pytest.raises(PredictionInterrupted):
        predict_matting(matting_model, images, should_stop=lambda: True)
    loose = predict_matting(matting_model, images, eps=0.0)[0]
    assert bool((loose.foreground.sum(-1) > 0).all())  # every pixel has some alpha > 0 (sigmoid)
    with pytest.raises(PipelineError, match="eps"):
        predict_matting(matting_model, images, eps=-0.1)
    with pytest.raises(PipelineError, match="batch_size"):
        predict_matting(matting_model, images, batch_size=0)
    seg_model = load_model(tiny_checkpoints["seg"])
    with pytest.raises(TaskMismatchError, match=r"matting predictor but the model is a 'seg'"):
        predict_matting(seg_model, images)
    seg = predict_seg(seg_model, images)
    masked = predict_matting(matting_model, images, seg=seg)[0]
    assert masked.mask is not None and torch.equal(masked.mask, seg[0].foreground())
    with pytest.raises(PipelineError, match="segmentation results"):
        predict_matting(matting_model, images, seg=seg * 2)


def test_bf16_model_gives_float32_results(tiny_checkpoints):
    model = load_model(tiny_checkpoints["matting"], dtype="bf16")
    ref = predict_matting(load_model(tiny_checkpoints["matting"]), [synthetic_image(64, 48)])[0]
    result = predict_matting(model, [synthetic_image(64, 48)])[0]
    assert result.alpha.dtype == torch.float32 and result.foreground.dtype == torch.float32
    assert float((result.alpha - ref.alpha).abs().max()) < 0.05
