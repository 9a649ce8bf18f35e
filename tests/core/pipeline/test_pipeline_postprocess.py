"""Post-processing to the original image: seg labels, unit normals, albedo, metric pointmap + intrinsics, boxes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sapiens2_studio.core.pipeline import (
    NoPersonFoundError,
    SegResult,
    albedo_to_image,
    boxes_from_labels,
    connected_components,
    dense_layout,
    normalize_box,
    normals_to_image,
    pointmap_intrinsics,
    pointmap_to_image,
    seg_to_labels,
    uncrop,
    whole_image_box,
)
from sapiens2_studio.core.pipeline.boxes import boxes_for_image


def test_seg_labels_are_argmax_of_bilinear_resized_logits():
    logits = torch.zeros(1, 29, 8, 6)
    logits[0, 5, :4] = 3.0  # top half class 5
    logits[0, 22, 4:] = 3.0  # bottom half class 22
    labels, full = seg_to_labels(logits, (12, 16), keep_logits=True)
    assert labels.shape == (16, 12) and labels.dtype == torch.int64
    assert torch.all(labels[:7] == 5) and torch.all(labels[9:] == 22)
    assert full is not None and full.shape == (29, 16, 12)
    expected = torch.nn.functional.interpolate(logits, size=(16, 12), mode="bilinear", align_corners=False)
    assert torch.equal(full, expected[0])


def test_uncrop_removes_padding_exactly():
    layout = dense_layout(200, 300)  # resized 682×1024, padding 43/43
    x = torch.zeros(1, 1, 1024, 768)
    x[..., :, 43 : 43 + 682] = 1.0
    out = uncrop(x, layout)
    assert out.shape == (1, 1, 300, 200) and torch.all(out == 1.0)


def test_normals_are_unit_after_resize():
    raw = torch.randn(1, 3, 1024, 768) * 3
    out = normals_to_image(raw, dense_layout(333, 517))
    norms = out.norm(dim=1)
    assert out.shape == (1, 3, 517, 333)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)


def test_albedo_is_clamped_to_unit_range():
    raw = torch.randn(1, 3, 1024, 768) * 2
    out = albedo_to_image(raw, dense_layout(100, 90))
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0


@pytest.mark.parametrize("size", [(200, 300), (640, 480), (768, 1024), (1280, 720), (100, 1333), (1001, 700)])
def test_synthetic_pointmap_gives_intrinsics_and_reprojects(size):
    """A network-resolution pointmap of a known pinhole camera → metric points that reproject to their pixel."""
    width, height = size
    layout = dense_layout(width, height)
    scale = 0.8
    fx_net = 768.0 / scale
    # The camera of the network input: principal point at the centre of the image content.
    x0, y0, x1, y1 = layout.content_box
    cx_net, cy_net = (x0 + x1) / 2.0, (y0 + y1) / 2.0
    v, u = torch.meshgrid(torch.arange(1024.0), torch.arange(768.0), indexing="ij")
    depth = 2.0 + 0.3 * torch.sin(u / 97.0) + 0.2 * (v / 1024.0)
    xyz = torch.stack([(u + 0.5 - cx_net) * depth / fx_net, (v + 0.5 - cy_net) * depth / fx_net, depth])
    canonical = (xyz * scale)[None]
    points = pointmap_to_image(canonical, torch.tensor([[scale]]), layout)[0].permute(1, 2, 0)
    fx, fy, cx, cy = pointmap_intrinsics(scale, layout).as_tuple()
    assert fx == pytest.approx(fx_net / layout.scale, rel=0.02) and fy == pytest.approx(fx, rel=0.02)
    assert (cx, cy) == (width / 2.0, height / 2.0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        i, j = int(rng.integers(2, width - 2)), int(rng.integers(2, height - 2))
        X, Y, Z = points[j, i].tolist()
        assert pytest.approx(float(torch.tensor(2.0)), abs=0.6) == Z
        assert abs(fx * X / Z + cx - (i + 0.5)) < 0.05
        assert abs(fy * Y / Z + cy - (j + 0.5)) < 0.05


def test_pointmap_division_is_per_image():
    raw = torch.ones(2, 3, 1024, 768)
    scale = torch.tensor([[0.5], [2.0]])
    out = pointmap_to_image(raw, scale, dense_layout(768, 1024))
    assert torch.allclose(out[0], torch.full_like(out[0], 2.0)) and torch.allclose(
        out[1], torch.full_like(out[1], 0.5)
    )


def test_intrinsics_reject_non_positive_scale():
    with pytest.raises(ValueError, match="positive"):
        pointmap_intrinsics(0.0, dense_layout(10, 10))


# ------------------------------------------------------------------ boxes


def _labels_with_people(h=200, w=300):
    labels = torch.zeros(h, w, dtype=torch.int64)
    labels[20:180, 30:90] = 22  # person A (larger)
    labels[60:150, 200:250] = 3  # person B
    labels[5:7, 295:297] = 4  # speck: below the area threshold
    return labels


def test_connected_components_8_connectivity():
    mask = torch.zeros(6, 6, dtype=torch.bool)
    mask[0, 0] = mask[1, 1] = mask[2, 2] = True  # diagonal chain: one component
    mask[4:, 4:] = True
    comp = connected_components(mask)
    ids = set(comp[mask].tolist())
    assert len(ids) == 2 and comp[0, 0] == comp[2, 2] and torch.all(comp[~mask] == -1)


def test_boxes_from_seg_sorted_by_area_and_filtered():
    boxes = boxes_from_labels(_labels_with_people())
    assert len(boxes) == 2
    expected = [(30, 20, 90, 180), (200, 60, 250, 150)]
    for box, want in zip(boxes, expected):
        assert max(abs(a - b) for a, b in zip(box, want)) <= 2, (box, want)


def test_nearby_parts_merge_into_one_person():
    labels = torch.zeros(400, 300, dtype=torch.int64)
    labels[50:200, 100:200] = 23
    labels[205:380, 100:200] = 13  # split by a 5-px gap (e.g. a belt)
    assert len(boxes_from_labels(labels)) == 1


def test_box_selection_order_and_no_person_handling():
    labels = torch.zeros(50, 40, dtype=torch.int64)
    boxes, source, notes = boxes_for_image((40, 50), [(1, 2, 30, 40)], labels)
    assert source == "given" and boxes == [(1.0, 2.0, 30.0, 40.0)] and notes == []
    boxes, source, notes = boxes_for_image((40, 50), None, labels)
    assert source == "image" and boxes == [whole_image_box(40, 50)] and "no person" in notes[0]
    with pytest.raises(NoPersonFoundError, match="no person"):
        boxes_for_image((40, 50), None, labels, if_no_person="error")
    assert boxes_for_image((40, 50), None, labels, if_no_person="empty")[0] == []
    assert boxes_for_image((40, 50), None, None) == ([(0.5, 0.5, 39.5, 49.5)], "image", [])
    boxes, source, _ = boxes_for_image((300, 200), None, _labels_with_people())
    assert source == "seg" and len(boxes) == 2


def test_normalize_box_formats_and_errors():
    assert normalize_box({"x": 1, "y": 2, "width": 10, "height": 20}) == (1.0, 2.0, 11.0, 22.0)
    with pytest.raises(ValueError, match="x2 > x1"):
        normalize_box((5, 5, 1, 9))
    with pytest.raises(ValueError, match="outside"):
        normalize_box((100, 100, 120, 130), (50, 50))
    with pytest.raises(ValueError, match="4 numbers"):
        normalize_box((1, 2, 3))


def test_seg_result_masks_by_class_and_group():
    labels = torch.tensor([[0, 23, 13], [6, 15, 7], [3, 4, 24]])
    seg = SegResult(labels)
    assert seg.mask("upper_clothes").sum() == 1
    assert seg.mask("Upper_Clothing").equal(seg.mask(23))
    assert seg.mask("hands").sum() == 2
    assert seg.mask("arms_without_hands").sum() == 1
    assert seg.mask(["hair", "face"]).sum() == 3  # Hair + Face_Neck + Lower_Lip
    assert seg.foreground().sum() == 8
    with pytest.raises(KeyError, match=r"known groups|known classes"):
        seg.mask("sleeves")


def _bfs_component_count(mask: np.ndarray) -> int:
    seen = np.zeros_like(mask, dtype=bool)
    count = 0
    h, w = mask.shape
    for y0, x0 in zip(*np.nonzero(mask)):
        if seen[y0, x0]:
            continue
        count += 1
        stack = [(y0, x0)]
        seen[y0, x0] = True
        while stack:
            y, x = stack.pop()
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = y + dy, x + dx
                    if 0 <= ny < h and 0 <= nx < w and mask[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        stack.append((ny, nx))
    return count


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_connected_components_match_a_flood_fill(seed):
    rng = np.random.default_rng(seed)
    mask = rng.random((40, 50)) < 0.35
    mask[5:35, 10] = mask[34, 10:40] = mask[5:35, 39] = True  # a long U-shape
    comp = connected_components(torch.from_numpy(mask)).numpy()
    assert len(np.unique(comp[mask])) == _bfs_component_count(mask)
    assert np.all(comp[~mask] == -1)


def test_albedo_clamps_before_resizing_like_the_reference():
    raw = torch.zeros(1, 3, 1024, 768)
    raw[..., :, ::2] = 3.0  # alternating columns: 3, 0, 3, 0 …
    out = albedo_to_image(raw, dense_layout(384, 512))  # 2× downscale averages column pairs
    assert torch.allclose(out, torch.full_like(out, 0.5))  # mean of clamp(3)=1 and 0, not clamp(mean)=1


@pytest.mark.parametrize("size_wh", [(1000, 1500), (517, 1283), (300, 200)])
def test_large_seg_resize_in_bands_matches_full_resize(monkeypatch, size_wh):
    """Above the memory budget the labels come from row bands; they match the full-size resize + argmax."""
    from sapiens2_studio.core.pipeline import postprocess

    width, height = size_wh
    logits = torch.randn(1, 29, 1024, 768, generator=torch.Generator().manual_seed(width)) * 3
    full, _ = seg_to_labels(logits, size_wh)
    monkeypatch.setattr(postprocess, "SEG_FULL_LOGITS_BUDGET", 1024)
    banded, none = seg_to_labels(logits, size_wh)
    assert none is None and banded.shape == (height, width) and banded.dtype == torch.int64
    assert int((banded != full).sum()) <= max(1, full.numel() // 100_000)
    kept, logits_full = seg_to_labels(logits, size_wh, keep_logits=True)  # keep_logits: the full path
    assert torch.equal(kept, full) and logits_full.shape == (29, height, width)


def test_is_all_finite_agrees_with_isfinite_all() -> None:
    """The one-pass `aminmax` test the seg post-processing uses equals `isfinite(x).all()` on every kind of value."""
    from sapiens2_studio.core.pipeline.postprocess import count_nonfinite, is_all_finite

    base = torch.randn(2, 29, 12, 9)
    assert is_all_finite(base) and is_all_finite(base.permute(0, 2, 3, 1)) and is_all_finite(torch.empty(0))
    for bad in (float("nan"), float("inf"), -float("inf")):
        for where in ((0, 0, 0, 0), (1, 28, 11, 8), (1, 3, 5, 2)):
            x = base.clone()
            x[where] = bad
            for view in (x, x.permute(0, 2, 3, 1), x.transpose(2, 3), x.to(torch.bfloat16)):
                assert is_all_finite(view) == bool(torch.isfinite(view).all()) is False
            assert count_nonfinite(x) == 1
    assert is_all_finite(torch.tensor([3.0e38, -3.0e38])) and count_nonfinite(base) == 0
