"""End-to-end predictors on tiny synthetic checkpoints (real safetensors files, official key layout)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from sapiens2_studio.core import load_model
from sapiens2_studio.core.pipeline import (
    NET_H,
    NET_W,
    PersonPose,
    PredictionInterrupted,
    SegResult,
    TaskMismatchError,
    crop_to_image,
    decode_heatmaps,
    dense_layout,
    normalize,
    pointmap_intrinsics,
    pose_crop,
    predict,
    predict_albedo,
    predict_normal,
    predict_pointmap,
    predict_pose,
    predict_seg,
    prepare_image,
    preprocess_pose_crop,
    preprocess_seg,
    seg_to_labels,
)


@pytest.fixture(scope="module")
def models(tiny_checkpoints):
    return {task: load_model(path) for task, path in tiny_checkpoints.items() if task != "pretrain"}


def _images():
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    rgba = Image.fromarray(rng.integers(0, 256, (64, 48, 4), dtype=np.uint8), "RGBA")
    grey16 = (rng.integers(0, 65536, (50, 20), dtype=np.uint16)).astype(np.uint16)
    return [rgb, rgba, grey16]


def test_seg_predictor_matches_manual_chain_and_handles_modes(models):
    model = models["seg"]
    seen = []
    images = _images()
    results = predict_seg(
        model, images, batch_size=2, keep_logits=True, progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(2, 3), (3, 3)]
    assert [r.image_size for r in results] == [(53, 37), (48, 64), (20, 50)]
    for r in results:
        assert r.labels.dtype == torch.int64 and int(r.labels.min()) >= 0 and int(r.labels.max()) <= 28
        assert r.logits is not None and r.logits.shape[0] == 29
    p = prepare_image(images[0])
    with torch.inference_mode():
        logits = model(normalize(preprocess_seg(p.pixels, quantize=True))[None])
    labels, _ = seg_to_labels(logits, p.size)
    assert torch.equal(results[0].labels, labels)


def test_comfyui_batch_tensor_and_dense_tasks(models):
    batch = torch.rand(2, 40, 30, 3)
    seg = predict_seg(models["seg"], batch, batch_size=2)
    normals = predict_normal(models["normal"], batch, batch_size=2, seg=seg)
    assert len(normals) == 2
    for n, s in zip(normals, seg):
        assert n.normals.shape == (40, 30, 3) and n.normals.dtype == torch.float32
        assert torch.allclose(n.normals.norm(dim=-1), torch.ones(40, 30), atol=1e-5)
        assert n.mask is not None and torch.equal(n.mask, s.labels > 0)
    albedo = predict_albedo(models["albedo"], batch[:1])
    assert albedo[0].albedo.shape == (40, 30, 3)
    assert float(albedo[0].albedo.min()) >= 0 and float(albedo[0].albedo.max()) <= 1


def test_batched_and_single_runs_agree(models):
    images = [np.full((30, 20, 3), 90, dtype=np.uint8), np.full((25, 35, 3), 200, dtype=np.uint8)]
    both = predict_normal(models["normal"], images, batch_size=2)
    one = predict_normal(models["normal"], images[1:], batch_size=1)
    assert torch.allclose(both[1].normals, one[0].normals, atol=1e-4)


def test_pointmap_predictor_scale_intrinsics_depth(models):
    model = models["pointmap"]
    image = np.random.default_rng(0).integers(0, 256, (90, 60, 3), dtype=np.uint8)
    (result,) = predict_pointmap(model, [image])
    assert result.points.shape == (90, 60, 3)
    assert torch.equal(result.depth, result.points[..., 2])
    if result.scale > 0:
        expected = pointmap_intrinsics(result.scale, dense_layout(60, 90)).as_tuple()
        assert result.intrinsics == pytest.approx(expected)
        assert result.intrinsics[2:] == (30.0, 45.0)
        assert result.intrinsics_source == "pointmap"
    else:  # no focal length from a scale ≤ 0: the default camera rule, principal point still the centre
        assert result.intrinsics == pytest.approx((1.2 * 90, 1.2 * 90, 30.0, 45.0))
        assert result.intrinsics_source == "default (pointmap scale ≤ 0)"


def test_pose_predictor_matches_manual_chain(models):
    model = models["pose"]
    image = np.random.default_rng(1).integers(0, 256, (80, 60, 3), dtype=np.uint8)
    box = (5.0, 4.0, 50.0, 70.0)
    (result,) = predict_pose(model, [image], boxes=[[box]], flip_test=False)
    assert result.image_size == (60, 80) and len(result.people) == 1
    person = result.people[0]
    assert person.bbox == box and person.bbox_source == "given"
    assert person.keypoints.shape == (308, 3) and person.keypoints.dtype == np.float32
    crop = pose_crop((4.5, 3.5, 49.5, 69.5))  # corner-origin → pixel-centre convention
    p = prepare_image(image)
    with torch.inference_mode():
        heatmaps = model(normalize(preprocess_pose_crop(p.pixels, crop, quantize=True))[None])
    kp, scores = decode_heatmaps(heatmaps.float(), (NET_W, NET_H))
    xy = crop_to_image(kp[0], crop.center, crop.scale) + 0.5
    assert np.allclose(person.keypoints[:, :2], xy, atol=1e-4)
    assert np.array_equal(person.keypoints[:, 2], scores[0].numpy())


def test_pose_boxes_from_seg_with_flip_test(models):
    model = models["pose"]
    image = np.zeros((60, 90, 3), dtype=np.uint8)
    labels = torch.zeros(60, 90, dtype=torch.int64)
    labels[5:55, 5:30] = 22
    labels[10:50, 60:85] = 3
    (result,) = predict_pose(model, [image], seg=[SegResult(labels)], flip_test=True, batch_size=2)
    assert [p.bbox_source for p in result.people] == ["seg", "seg"]
    assert all(isinstance(p, PersonPose) and np.isfinite(p.keypoints[:, 2]).all() for p in result.people)
    empty = SegResult(torch.zeros(60, 90, dtype=torch.int64))
    (fallback,) = predict_pose(model, [image], seg=[empty], flip_test=False, if_no_person="empty")
    assert fallback.people == [] and "no person" in fallback.warnings[0]


def test_task_mismatch_and_dispatch(models):
    with pytest.raises(TaskMismatchError, match="pose predictor but the model is a 'seg'"):
        predict_pose(models["seg"], [np.zeros((8, 8, 3), dtype=np.uint8)])
    with pytest.raises(TaskMismatchError, match="normal"):
        predict_normal(models["albedo"], [np.zeros((8, 8, 3), dtype=np.uint8)])
    out = predict(models["albedo"], [np.zeros((8, 8, 3), dtype=np.uint8)])
    assert out[0].albedo.shape == (8, 8, 3)


def test_should_stop_interrupts_before_the_forward_pass(models):
    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 1

    images = [np.zeros((8, 8, 3), dtype=np.uint8)] * 3
    with pytest.raises(PredictionInterrupted):
        predict_seg(models["seg"], images, batch_size=1, should_stop=stop)
    assert len(calls) == 2


def test_bad_arguments_are_reported(models):
    with pytest.raises(ValueError, match="batch_size"):
        predict_seg(models["seg"], [np.zeros((8, 8, 3), dtype=np.uint8)], batch_size=0)
    with pytest.raises(ValueError, match="one list per image"):
        predict_pose(models["pose"], [np.zeros((8, 8, 3), dtype=np.uint8)], boxes=[[], []])


def test_pose_on_one_pixel_wide_or_high_images(models):
    """The whole-image box of a 1-px axis spans that pixel instead of being empty (which made pose_crop fail)."""
    images = [np.full(shape, 128, np.uint8) for shape in ((1, 1, 3), (1, 40, 3), (30, 1, 3))]
    results = predict_pose(models["pose"], images, flip_test=False)
    for image, result in zip(images, results):
        (person,) = result.people
        x1, y1, x2, y2 = person.bbox
        assert 0 <= x1 < x2 <= image.shape[1] and 0 <= y1 < y2 <= image.shape[0]
        assert person.bbox_source == "image" and np.isfinite(person.keypoints).all()


def test_pose_with_a_seg_model_segments_chunk_by_chunk(models):
    """A seg *model* runs per chunk of images (a long batch never holds every label map) and gives the same
    people as precomputed seg results; works with a ComfyUI (B, H, W, 3) tensor."""
    seg_model, seen = models["seg"], []

    class Counting:  # the real seg model, recording how many images each forward pass gets
        task, device, dtype = seg_model.task, seg_model.device, seg_model.dtype

        def __call__(self, x):
            seen.append(("seg", int(x.shape[0])))
            return seg_model(x)

    batch = torch.rand(3, 40, 30, 3, generator=torch.Generator().manual_seed(5))
    chunked = predict_pose(
        models["pose"],
        batch,
        seg=Counting(),
        flip_test=False,
        batch_size=2,
        progress=lambda done, total: seen.append(("pose", done)),
        max_people=1,  # one crop per image keeps the test fast
    )
    assert seen == [("seg", 2), ("pose", 2), ("seg", 1), ("pose", 3)]  # interleaved, not all seg first
    segs = predict_seg(seg_model, batch)
    full = predict_pose(models["pose"], batch, seg=segs, flip_test=False, batch_size=2, max_people=1)
    for a, b in zip(chunked, full):
        assert [p.bbox for p in a.people] == [p.bbox for p in b.people]
        assert all(np.array_equal(p.keypoints, q.keypoints) for p, q in zip(a.people, b.people))
