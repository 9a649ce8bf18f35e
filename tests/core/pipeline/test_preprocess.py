"""Pre-processing parity with the official test pipelines (fixtures/parity/preprocess.*) and input handling."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from sapiens2_studio.core.pipeline import (
    MEAN,
    STD,
    ImageInputError,
    ImageSource,
    dense_layout,
    normalize,
    pose_crop,
    prepare_image,
    preprocess_dense,
    preprocess_pose_crop,
    preprocess_seg,
    resample,
)
from sapiens2_studio.core.pipeline.resample import _invert_affine, _source_grid, _warp_u8, resize, warp_affine

# Mean absolute error bound in grey levels (0–255); the brief's limit is 1 grey level (1/255 in 0..1 units).
MEAN_ABS_LIMIT = 1.0


@pytest.fixture(scope="module")
def fixture(parity_dir):
    from safetensors.numpy import load_file

    tensors = load_file(str(parity_dir / "preprocess.safetensors"))
    meta = json.loads((parity_dir / "preprocess.json").read_text())
    return tensors, meta


def _compare(ours: torch.Tensor, ref: np.ndarray) -> tuple[float, float]:
    diff = np.abs(ours.numpy().astype(np.float32) - ref.astype(np.float32))
    return float(diff.mean()), float(diff.max())


@pytest.mark.parametrize("name", ["img0", "img1", "img2"])
def test_dense_padding_matches_reference_exactly(fixture, name):
    tensors, meta = fixture
    image = tensors[f"{name}_image_rgb"]
    case = meta["cases"][f"{name}/normal"]
    layout = dense_layout(image.shape[1], image.shape[0])
    assert list(layout.padding) == case["padding_size_left_right_top_bottom"]
    assert list(layout.resized_size) == case["resized_wh"]
    for task in ("albedo", "pointmap"):
        assert meta["cases"][f"{name}/{task}"]["padding_size_left_right_top_bottom"] == list(layout.padding)


@pytest.mark.parametrize("name", ["img0", "img1"])
def test_dense_pixels_match_reference(fixture, name):
    tensors, _ = fixture
    prepared = prepare_image(tensors[f"{name}_image_rgb"])
    out, layout = preprocess_dense(prepared.pixels, quantize=prepared.quantized)
    ref = tensors[f"{name}_dense_rgb_uint8"]
    mean_abs, max_abs = _compare(out, ref)
    assert max_abs == 0.0, (mean_abs, max_abs)  # cv2's fixed-point INTER_LINEAR is emulated bit for bit
    left, right, top, bottom = layout.padding
    assert float(out[:, :, :left].abs().sum()) == 0.0 and float(out[:, :top].abs().sum()) == 0.0
    assert float(out[:, :, out.shape[2] - right :].abs().sum()) == 0.0
    assert float(out[:, out.shape[1] - bottom :].abs().sum()) == 0.0


@pytest.mark.parametrize("name", ["img0", "img2"])
def test_seg_pixels_match_reference(fixture, name):
    tensors, _ = fixture
    prepared = prepare_image(tensors[f"{name}_image_rgb"])
    out = preprocess_seg(prepared.pixels, quantize=True)
    mean_abs, max_abs = _compare(out, tensors[f"{name}_seg_rgb_uint8"])
    if name == "img2":  # INTER_AREA while enlarging = cv2's fixed-point linear path: bit-exact
        assert max_abs == 0.0, (mean_abs, max_abs)
    else:  # INTER_CUBIC (float64 weights): ~10 of 2.4 M values differ by one grey level at exact .5 ties
        assert mean_abs < 1e-4 and max_abs <= 1.0, (mean_abs, max_abs)


@pytest.mark.parametrize("name", ["img0", "img1", "img2"])
def test_pose_warp_matrix_is_bit_exact(fixture, name):
    tensors, meta = fixture
    case = meta["cases"][f"{name}/pose"]
    crop = pose_crop(case["bbox_xyxy"], padding=case["padding"])
    expected = np.array(case["udp_warp_matrix_float32"], dtype=np.float32)
    assert crop.warp.dtype == np.float32
    assert np.array_equal(crop.warp, expected)
    if f"{name}_pose_warp_matrix" in tensors:
        assert np.array_equal(crop.warp, tensors[f"{name}_pose_warp_matrix"])
    assert crop.center.tolist() == case["bbox_center"]
    assert np.array_equal(crop.scale, np.array(case["bbox_scale_after_aspect_fix"], dtype=np.float32))
    assert crop.interpolation == ("cubic" if "INTER_CUBIC" in case["interpolation"] else "linear")


@pytest.mark.parametrize("name", ["img0", "img1"])
def test_pose_crop_pixels_match_reference(fixture, name):
    tensors, meta = fixture
    crop = pose_crop(meta["cases"][f"{name}/pose"]["bbox_xyxy"])
    prepared = prepare_image(tensors[f"{name}_image_rgb"])
    out = preprocess_pose_crop(prepared.pixels, crop, quantize=True)
    mean_abs, max_abs = _compare(out, tensors[f"{name}_pose_rgb_uint8"])
    assert max_abs == 0.0, (mean_abs, max_abs)  # OpenCV's 1/32-px grid and 15-bit remap tables, bit for bit


def test_network_tensor_is_reference_normalisation(fixture):
    tensors, meta = fixture
    import hashlib

    ref = torch.from_numpy(tensors["img0_seg_rgb_uint8"].astype(np.float32))
    x = normalize(ref)[None].contiguous()
    digest = hashlib.sha256(x.numpy().tobytes()).hexdigest()
    assert digest == meta["cases"]["img0/seg"]["network_tensor_sha256_fp32"]
    assert MEAN == (123.675, 116.28, 103.53) and STD == (58.395, 57.12, 57.375)


def test_general_rotated_warp_matches_axis_aligned_fast_path():
    img = torch.rand(3, 40, 30) * 255
    matrix = np.array([[2.0, 0.0, -3.0], [0.0, 1.5, 4.0]], dtype=np.float32)
    fast = warp_affine(img, matrix, (48, 64), "cubic")
    tiny = np.array([[2.0, 1e-9, -3.0], [-1e-9, 1.5, 4.0]], dtype=np.float64)  # forces the 2-D path
    slow = warp_affine(img, tiny, (48, 64), "cubic")
    assert torch.allclose(fast, slow, atol=1e-3)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_8bit_axis_aligned_warp_gives_the_2d_remaps_integers(mode):
    """The axis-aligned 8-bit path (whole-row gathers) against the general 2-D remap on the same grid: crops
    that enlarge and shrink, reach past every border (taps outside the image weigh 0) and read strided input."""
    rng = np.random.default_rng(7)
    for case in range(24):
        h, w = (int(v) for v in rng.integers(1, 90, 2))
        hwc = torch.from_numpy(rng.integers(0, 256, (h, w, 3)).astype(np.uint8))
        img = hwc.permute(2, 0, 1) if case % 2 else hwc.permute(2, 0, 1).contiguous()
        sx, sy = rng.uniform(0.1, 6.0, 2)
        matrix = np.array([[sx, 0, rng.uniform(-80, 80)], [0, sy, rng.uniform(-80, 80)]], dtype=np.float32)
        out_w, out_h = (int(v) for v in rng.integers(1, 70, 2))
        gx, gy = (torch.from_numpy(g) for g in _source_grid(_invert_affine(matrix), out_w, out_h))
        grid = (gx >> 5, gy >> 5, gx & 31, gy & 31)
        aligned = _warp_u8(img, *grid, mode, aligned=True)
        assert aligned.is_contiguous() and aligned.shape == (3, out_h, out_w)
        assert torch.equal(aligned, _warp_u8(img, *grid, mode, aligned=False)), case
        assert torch.equal(aligned, warp_affine(img, matrix, (out_w, out_h), mode, quantize=True)), case


def test_float_axis_aligned_warp_is_the_same_in_any_band_of_rows(monkeypatch):
    """The float separable warp transposes `_WARP_BAND_ROWS` source rows at a time and filters only the rows the
    vertical pass reads: any band height gives the same bits, crops past the top and bottom borders included,
    and the general 2-D remap agrees to float rounding."""
    rng = np.random.default_rng(11)
    img = torch.from_numpy(rng.uniform(0, 255, (70, 50, 3)).astype(np.float32)).permute(2, 0, 1)
    crops = [
        np.array([[1.7, 0.0, -20.0], [0.0, 2.3, -40.0]], dtype=np.float32),  # source rows in the middle
        np.array([[0.6, 0.0, 5.0], [0.0, 0.9, 12.0]], dtype=np.float32),  # past the top border
        np.array([[3.1, 0.0, 2.0], [0.0, 0.4, -9.0]], dtype=np.float32),  # past the bottom border
    ]
    for matrix in crops:
        for mode in ("linear", "cubic"):
            monkeypatch.setattr(resample, "_WARP_BAND_ROWS", 1 << 20)
            whole = warp_affine(img, matrix, (45, 61), mode)
            for rows in (1, 7, 64):
                monkeypatch.setattr(resample, "_WARP_BAND_ROWS", rows)
                assert torch.equal(warp_affine(img, matrix, (45, 61), mode), whole), (rows, mode)
            general = matrix.astype(np.float64) + np.array(
                [[0, 1e-9, 0], [-1e-9, 0, 0]]
            )  # forces the 2-D path
            assert torch.allclose(warp_affine(img, general, (45, 61), mode), whole, atol=1e-3)


def test_area_resize_shrink_is_box_average():
    img = torch.arange(16, dtype=torch.float32).reshape(1, 1, 4, 4)
    out = resize(img, (2, 2), "area")
    assert out.flatten().tolist() == [2.5, 4.5, 10.5, 12.5]


def test_exact_half_linear_resize_uses_rounded_box_average():
    img = torch.tensor([[1.0, 1.0, 4.0, 4.0], [1.0, 3.0, 4.0, 5.0]])[None, None]
    out = resize(img, (1, 2), "linear", quantize=True)
    assert out.flatten().tolist() == [2.0, 4.0]  # 1.5 → 2 (cv2 rounds halves up here), 4.25 → 4


def test_area_resize_mixed_axes_uses_opencv_area_linear_rule():
    img = torch.rand(1, 3, 10, 20) * 255
    out = resize(img, (30, 16), "area")  # width shrinks, height grows → cv2 "area-mode linear"
    assert out.shape == (1, 3, 30, 16)
    assert float(out.min()) >= 0 and float(out.max()) <= 255


# ------------------------------------------------------------------ input handling


def _rgb(h=20, w=30):
    return np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_uint8_numpy_is_kept_exact_and_quantized():
    arr = _rgb()
    p = prepare_image(arr)
    assert p.quantized and p.size == (30, 20)
    assert p.pixels.dtype == torch.uint8  # 8-bit photos stay 8-bit (a quarter of float32's memory)
    assert torch.equal(p.pixels.permute(1, 2, 0), torch.from_numpy(arr))


def test_uint16_and_float_inputs_scale_to_0_255():
    arr = _rgb()
    p16 = prepare_image(arr.astype(np.uint16) * 257)
    pf = prepare_image(arr.astype(np.float32) / 255.0)
    base = torch.from_numpy(arr).float().permute(2, 0, 1)
    assert not p16.quantized and torch.allclose(p16.pixels, base, atol=1e-3)
    assert pf.quantized and torch.equal(
        pf.pixels.float(), base
    )  # 8-bit values stored as float are snapped back
    assert p16.pixels.dtype == torch.float32 and pf.pixels.dtype == torch.uint8
    smooth = prepare_image(arr.astype(np.float32) / 255.0 + 0.001)
    assert not smooth.quantized  # genuinely continuous float data keeps full precision


def test_float_image_out_of_range_is_a_clear_error():
    with pytest.raises(ImageInputError, match=r"0\.\.1"):
        prepare_image(np.full((4, 4, 3), 200.0, dtype=np.float32))


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "I;16", "P", "LA", "CMYK", "1", "F"])
def test_pil_modes(mode):
    base = Image.fromarray(_rgb())
    if mode == "I;16":
        img = Image.fromarray(np.asarray(base.convert("L")).astype(np.uint16) * 257)
        assert img.mode.startswith("I;16")
    elif mode == "F":
        img = base.convert("L").convert("F")
    else:
        img = base.convert(mode)
    p = prepare_image(img)
    assert p.pixels.shape == (3, 20, 30)
    assert float(p.pixels.min()) >= 0 and float(p.pixels.max()) <= 255
    if mode in ("L", "I;16", "F"):
        grey = np.asarray(base.convert("L")).astype(np.float32)
        assert torch.allclose(p.pixels[0].float(), torch.from_numpy(grey), atol=0.01)


def test_rgba_composite_or_drop_alpha():
    arr = np.zeros((2, 2, 4), dtype=np.uint8)
    arr[..., :3] = 200
    arr[..., 3] = [[0, 255], [128, 255]]
    composite = prepare_image(Image.fromarray(arr, "RGBA"), alpha="composite").pixels[0]
    dropped = prepare_image(arr, alpha="drop").pixels[0]
    assert composite[0, 0] == 0 and composite[0, 1] == 200
    assert abs(float(composite[1, 0]) - 200 * 128 / 255) < 1e-3
    assert torch.all(dropped == 200)


def test_comfyui_tensor_batch_is_converted_lazily_per_item():
    batch = torch.rand(3, 16, 12, 3)
    src = ImageSource(batch)
    assert len(src) == 3 and src.size(1) == (12, 16)
    item = src.get(2)
    assert not item.quantized
    assert torch.allclose(item.pixels, batch[2].permute(2, 0, 1) * 255)
    from_png = ImageSource(torch.from_numpy(_rgb()).float()[None] / 255.0).get(0)
    assert from_png.quantized and torch.equal(from_png.pixels, torch.from_numpy(_rgb()).permute(2, 0, 1))


def test_comfyui_float_from_8bit_gives_reference_pixels(fixture):
    tensors, _ = fixture
    image = (
        torch.from_numpy(tensors["img1_image_rgb"]).float()[None] / 255.0
    )  # what ComfyUI's LoadImage holds
    prepared = ImageSource(image).get(0)
    out, _ = preprocess_dense(prepared.pixels, quantize=prepared.quantized)
    assert torch.equal(out, torch.from_numpy(tensors["img1_dense_rgb_uint8"]).float())


def test_bad_inputs_give_actionable_errors():
    with pytest.raises(ImageInputError, match="H×W×3"):
        prepare_image(np.zeros((4, 4, 5), dtype=np.uint8))
    with pytest.raises(ImageInputError, match="dtype"):
        prepare_image(np.zeros((4, 4, 3), dtype=np.int8))
    with pytest.raises(ImageInputError, match="no images"):
        ImageSource([])
    with pytest.raises(ImageInputError, match="B, H, W, C"):
        ImageSource(torch.rand(2, 3, 8, 8, 1))


def test_dense_layout_rules():
    layout = dense_layout(1000, 1000)
    assert layout.resized_size == (768, 768) and layout.padding == (0, 0, 128, 128)
    layout = dense_layout(768, 1024)
    assert layout.padding == (0, 0, 0, 0) and layout.scale == 1.0
    with pytest.raises(ValueError):
        dense_layout(0, 10)


def test_pose_crop_rejects_degenerate_boxes():
    with pytest.raises(ValueError, match="x2 > x1"):
        pose_crop((10, 10, 10, 20))


# ------------------------------------------------------------------ optional cross-check against OpenCV itself


def _noisy_gradient(h: int, w: int, seed: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(seed)
    img = np.stack(
        [255 * x / (w - 1), 255 * y / (h - 1), 127.5 + 127.5 * np.sin(2 * np.pi * (x + y) / 37)], -1
    )
    return np.clip(np.round(img + rng.normal(0, 20, (h, w, 3))), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(("h", "w"), [(1080, 1920), (500, 333), (97, 1601), (2048, 1536)])
def test_bit_exact_against_installed_opencv(h, w):
    """Runs only where OpenCV is installed (it is not a dependency): 8-bit dense / seg / pose inputs vs cv2."""
    cv2 = pytest.importorskip("cv2")
    image = _noisy_gradient(h, w, seed=h + w)
    p = prepare_image(image)
    out, layout = preprocess_dense(p.pixels, quantize=True)
    left, right, top, bottom = layout.padding
    ref = np.pad(
        cv2.resize(image, layout.resized_size, interpolation=cv2.INTER_LINEAR),
        ((top, bottom), (left, right), (0, 0)),
    )
    assert np.array_equal(out.permute(1, 2, 0).numpy().astype(np.uint8), ref)
    seg = preprocess_seg(p.pixels, quantize=True).permute(1, 2, 0).numpy()
    ref = cv2.resize(image, (768, 1024), interpolation=cv2.INTER_AREA if w > 768 else cv2.INTER_CUBIC)
    assert np.abs(seg - ref.astype(np.float32)).max() <= 1 and (seg != ref).mean() < 1e-4
    for box in [(w * 0.2, h * 0.1, w * 0.6, h * 0.9), (w * 0.45, h * 0.4, w * 0.55, h * 0.6)]:
        crop = pose_crop(box)
        ours = preprocess_pose_crop(p.pixels, crop, quantize=True).permute(1, 2, 0).numpy().astype(np.uint8)
        flag = cv2.INTER_CUBIC if crop.interpolation == "cubic" else cv2.INTER_AREA
        assert np.array_equal(ours, cv2.warpAffine(image, crop.warp, (768, 1024), flags=flag))


@pytest.mark.parametrize(
    ("h", "w", "oh", "ow"), [(1500, 2100, 1024, 768), (300, 200, 1024, 768), (17, 33, 40, 9)]
)
def test_quantized_linear_resize_equals_cv2_on_random_images(h, w, oh, ow):
    """The 8-bit linear resize reads only the rows and columns its passes use; it stays cv2's, bit for bit."""
    import cv2

    img = np.random.default_rng(h).integers(0, 256, (h, w, 3), dtype=np.uint8)
    x = torch.from_numpy(img).permute(2, 0, 1)[None].float()
    for mode, flag in (("linear", cv2.INTER_LINEAR), ("area", cv2.INTER_AREA)):
        if mode == "area" and oh <= h and ow <= w:
            continue  # the area path resizes downwards with its own taps, not through this resize
        out = resize(x, (oh, ow), mode, quantize=True)[0].permute(1, 2, 0).numpy().astype(np.uint8)
        assert np.array_equal(out, cv2.resize(img, (ow, oh), interpolation=flag)), mode


@pytest.mark.parametrize(("h", "w"), [(1500, 2100), (300, 200), (64, 1536)])
def test_resamplers_read_8bit_pixels_as_they_read_float(h, w):
    """8-bit photos stay uint8 in `PreparedImage`: every resize and warp path gives, from the uint8 pixels, the
    float32 tensor it gives from the same values as float32 (resize modes, quantised or not; axis-aligned and
    rotated warps; the shared dense, seg, matting and pose-crop pre-processing)."""
    img = np.random.default_rng(w).integers(0, 256, (h, w, 3), dtype=np.uint8)
    as_u8 = torch.from_numpy(img).permute(2, 0, 1).contiguous()
    as_f32 = as_u8.float()
    for mode in ("linear", "cubic", "area"):
        for quantize in (True, False):
            for size in ((1024, 768), (h, w), (h // 2, w // 2), (h + 7, w * 2)):
                ours = resize(as_u8[None], size, mode, quantize=quantize)
                assert ours.dtype == torch.float32, (mode, quantize, size)
                assert torch.equal(ours, resize(as_f32[None], size, mode, quantize=quantize)), (
                    mode,
                    quantize,
                )
    rotated = np.array([[0.6, -0.3, 40.0], [0.3, 0.6, -20.0]], dtype=np.float32)
    aligned = np.array([[0.7, 0.0, 10.0], [0.0, 0.7, -5.0]], dtype=np.float32)
    for matrix in (rotated, aligned):
        for mode in ("linear", "cubic"):
            for quantize in (True, False):
                ours = warp_affine(as_u8, matrix, (96, 128), mode, quantize=quantize)
                assert ours.dtype == torch.float32
                assert torch.equal(ours, warp_affine(as_f32, matrix, (96, 128), mode, quantize=quantize))
    assert torch.equal(preprocess_dense(as_u8, quantize=True)[0], preprocess_dense(as_f32, quantize=True)[0])
    assert torch.equal(preprocess_seg(as_u8, quantize=True), preprocess_seg(as_f32, quantize=True))
    crop = pose_crop((w * 0.2, h * 0.1, w * 0.7, h * 0.9))
    assert torch.equal(
        preprocess_pose_crop(as_u8, crop, quantize=True), preprocess_pose_crop(as_f32, crop, quantize=True)
    )
