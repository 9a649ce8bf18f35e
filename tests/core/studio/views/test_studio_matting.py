"""Matting through the engine: sizes per task, results → capture frames → bundle layers, previews, compositing over
a background of any size, soft person masks for Body-Part Mask and Relight.

A constant-output matting checkpoint (zero output weights, the bias as logits) gives known numbers through the
real load and predict path: alpha = sigmoid(0.5) = 0.6225 everywhere, pre-multiplied colour sigmoid(-1, 0, 1) =
(0.2689, 0.5, 0.7311), straight colour that / alpha = (0.4321, 0.8033, 1.174 → clipped to 1).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("OpenEXR")
from sapiens2_studio.core import catalogue
from sapiens2_studio.core.checkpoints.hub import HubError
from sapiens2_studio.core.formats.bundle import BundleError, CaptureFrame, read_bundle, write_bundle
from sapiens2_studio.core.formats.exr import read_exr
from sapiens2_studio.core.pipeline.results import MattingResult, SegResult
from sapiens2_studio.core.pipeline.seg_groups import resolve_classes
from sapiens2_studio.core.studio import Studio, StudioError, TaskBatch
from sapiens2_studio.core.studio.compute.capture import capture_frames
from sapiens2_studio.core.studio.jobs.job import JobSpec, resolve_checkpoints
from sapiens2_studio.core.studio.views.frame_previews import preview_images
from sapiens2_studio.core.studio.views.masks import body_part_mask, matte_parts
from sapiens2_studio.core.studio.views.matte_views import fit_background, matte_images
from sapiens2_studio.core.studio.views.relighting import relight_batch
from sapiens2_studio.core.testing.synthetic import (
    write_constant_output_checkpoint,
    write_synthetic_checkpoint,
)

LOGITS = (-1.0, 0.0, 1.0, 0.5)
ALPHA = 1.0 / (1.0 + math.exp(-0.5))
PREMULTIPLIED = [1.0 / (1.0 + math.exp(-v)) for v in LOGITS[:3]]
STRAIGHT = [min(1.0, v / ALPHA) for v in PREMULTIPLIED]
HAIR, FACE = resolve_classes("Hair")[0], resolve_classes("Face_Neck")[0]


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A checkpoint folder in the official layout: seg at 0.4b, matting at its only released size, 1b."""
    root = tmp_path_factory.mktemp("home")
    write_synthetic_checkpoint(root / "seg" / "sapiens2_0.4b_seg.safetensors", task="seg")
    write_constant_output_checkpoint(root / "matting" / "sapiens2_1b_matting.safetensors", "matting", LOGITS)
    return root


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (40, 30, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def predicted(home, photo) -> dict[str, TaskBatch]:
    studio = Studio(device="cpu", checkpoint_dir=home, allow_download=False)
    return studio.predict([photo, photo[:20]], ("seg", "matting"))


# ----------------------------------------------------------------------------------------- sizes per task


def test_each_task_gets_its_own_default_size_unless_one_is_forced(home, tmp_path) -> None:
    spec = JobSpec(
        inputs=[], out=tmp_path, tasks=("seg", "matting"), checkpoint_dir=home, allow_download=False
    )
    assert (spec.size_for("seg"), spec.size_for("matting")) == ("0.4b", "1b")
    paths = resolve_checkpoints(spec)
    assert (paths["seg"].name, paths["matting"].name) == (
        "sapiens2_0.4b_seg.safetensors",
        "sapiens2_1b_matting.safetensors",
    )
    forced = JobSpec(inputs=[], out=tmp_path, tasks=("matting",), size="0.4b", checkpoint_dir=home)
    with pytest.raises(HubError) as info:
        resolve_checkpoints(forced)
    assert "no official matting checkpoint of size 0.4b" in info.value.message
    assert "leave out --size" in info.value.text("cli") and "matting 1b" in info.value.text("cli")


def test_studio_predicts_seg_and_matting_with_the_known_constant(predicted, photo) -> None:
    matting = predicted["matting"]
    assert [r.image_size for r in matting.results] == [(30, 40), (30, 20)]
    first = matting[0]
    assert torch.allclose(first.alpha, torch.full((40, 30), ALPHA), atol=1e-6)
    assert torch.allclose(
        first.foreground_premultiplied, torch.tensor(PREMULTIPLIED).expand(40, 30, 3), atol=1e-6
    )
    assert torch.allclose(first.foreground, torch.tensor(STRAIGHT).expand(40, 30, 3), atol=1e-6)
    # run_tasks hands the seg foreground to matting as its mask, never applied to the values
    assert torch.equal(first.mask, predicted["seg"][0].labels > 0)
    assert matting.model["checkpoint"] == "sapiens2_1b_matting.safetensors"


# ------------------------------------------------------------------------------------ frames and the bundle


def test_capture_frames_carry_alpha_and_foreground_into_the_bundle(predicted, photo, tmp_path) -> None:
    frame = capture_frames([photo, photo[:20]], predicted)[0]
    np.testing.assert_allclose(frame.alpha, ALPHA, atol=1e-6)
    np.testing.assert_allclose(frame.foreground, np.broadcast_to(STRAIGHT, (40, 30, 3)), atol=1e-6)
    json_path = write_bundle(tmp_path, "x", frame)
    doc = json.loads(json_path.read_text())
    assert doc["layers"] == ["rgba", "segmentation", "person_mask", "alpha", "matte"]
    channels, _ = read_exr(tmp_path / "x.exr")
    assert {"matte.R", "matte.G", "matte.B", "matte.A"} <= set(channels)
    # EXR convention: linear colour pre-multiplied by alpha (what Nuke and OpenImageIO expect of an RGBA layer)
    linear_straight = np.where(
        np.array(STRAIGHT) <= 0.04045,
        np.array(STRAIGHT) / 12.92,
        ((np.array(STRAIGHT) + 0.055) / 1.055) ** 2.4,
    )
    stored = np.stack([channels[f"matte.{c}"][0, 0] for c in "RGB"]).astype(np.float64)
    np.testing.assert_allclose(stored, linear_straight * ALPHA, rtol=1e-3)
    back = read_bundle(json_path)
    assert np.abs(back.alpha - frame.alpha).max() < 2.5e-4  # half float
    assert np.abs(back.foreground - frame.foreground).max() < 1e-3


def test_matte_layer_round_trip_over_the_whole_alpha_range(tmp_path) -> None:
    rng = np.random.default_rng(0)
    alpha = rng.uniform(0, 1, (64, 48)).astype(np.float32)
    alpha[:4] = 0.0
    alpha[4:8] = 1.0 / 255.0  # at the threshold: no straight colour (as MattingResult.foreground)
    foreground = rng.uniform(0, 1, (64, 48, 3)).astype(np.float32)
    write_bundle(tmp_path, "m", CaptureFrame(48, 64, alpha=alpha, foreground=foreground))
    back = read_bundle(tmp_path / "m.json")
    assert np.abs(back.alpha - alpha).max() < 2.5e-4
    assert not back.foreground[:8].any()
    visible = alpha > 0.02
    error = np.abs(back.foreground - foreground)[visible]
    assert error.max() < 5e-3 and error.mean() < 5e-4, (error.max(), error.mean())
    faint = (alpha > 1.5 / 255) & (alpha <= 0.02)  # ~1 % of the pixels: half-float pre-multiplied colour
    assert np.abs(back.foreground - foreground)[faint].max() < 0.03


def test_bundles_without_a_matte_and_a_foreground_without_alpha(tmp_path) -> None:
    write_bundle(tmp_path, "plain", CaptureFrame(8, 6, image=np.zeros((6, 8, 3), np.uint8)))
    plain = read_bundle(tmp_path / "plain.json")
    assert plain.alpha is None and plain.foreground is None
    write_bundle(tmp_path, "a", CaptureFrame(8, 6, alpha=np.full((6, 8), 0.25, np.float32)))
    only_alpha = read_bundle(tmp_path / "a.json")
    assert only_alpha.foreground is None and float(only_alpha.alpha.mean()) == 0.25
    with pytest.raises(BundleError, match="foreground needs its alpha"):
        write_bundle(tmp_path, "bad", CaptureFrame(8, 6, foreground=np.zeros((6, 8, 3), np.float32)))
    with pytest.raises(BundleError, match=r"alpha has shape \(5, 8\)"):
        write_bundle(tmp_path, "bad", CaptureFrame(8, 6, alpha=np.zeros((5, 8), np.float32)))


def test_person_mask_from_the_matte_when_there_is_no_segmentation(photo) -> None:
    def matte(value: float) -> TaskBatch:
        alpha = torch.full((40, 30), value)
        return TaskBatch("matting", [MattingResult(alpha, torch.zeros(40, 30, 3), torch.zeros(40, 30, 3))])

    assert capture_frames([photo], {"matting": matte(0.5)})[0].mask.min() == 1.0
    assert capture_frames([photo], {"matting": matte(0.49)})[0].mask.max() == 0.0


def test_previews_are_the_alpha_and_a_straight_rgba_cutout(predicted, photo) -> None:
    frame = capture_frames([photo, photo[:20]], {"matting": predicted["matting"]})[0]
    previews = preview_images(frame, photo)
    assert set(previews) == {"alpha", "foreground"}
    assert previews["alpha"].shape == (40, 30)
    cutout = previews["foreground"]
    assert cutout.shape == (40, 30, 4) and cutout.dtype == np.uint8  # as the PNG stores it
    np.testing.assert_array_equal(cutout[0, 0], np.rint(np.array([*STRAIGHT, ALPHA]) * 255))


# ------------------------------------------------------------------------------------- compositing


def test_a_background_of_the_same_size_is_used_pixel_for_pixel() -> None:
    background = torch.rand(2, 20, 10, 3)
    assert torch.equal(fit_background(background, 10, 20), background)


def test_a_background_of_another_size_covers_the_image_and_is_centre_cropped() -> None:
    # 40 wide, 10 high, each column holding its own index / 40: covering 10x20 scales by 2 (80x20) and keeps the
    # middle 10 columns of 80 (35-44); bilinear output column j samples source x = (j + 0.5) / 2 - 0.5.
    columns = (torch.arange(40, dtype=torch.float32) / 40).reshape(1, 1, 40, 1).expand(1, 10, 40, 3)
    fitted = fit_background(columns, 10, 20)
    assert fitted.shape == (1, 20, 10, 3)
    assert torch.allclose(
        fitted[0, :, :, 0].mean(dim=0), ((35 + torch.arange(10) + 0.5) / 2 - 0.5) / 40, atol=1e-6
    )
    tall = fit_background(torch.rand(3, 300, 50, 4), 10, 20)  # RGBA, shrinking: alpha dropped, antialiased
    assert tall.shape == (3, 20, 10, 3) and tall.min() >= 0.0 and tall.max() <= 1.0


def test_matte_images_composite_over_an_image_or_a_colour(predicted) -> None:
    batch = TaskBatch("matting", [predicted["matting"][0]])
    background = torch.rand(1, 80, 60, 3)  # twice the size: cover = plain 2x downscale
    alpha, foreground, composite = matte_images(batch, background=background)
    assert alpha.shape == (1, 40, 30) and foreground.shape == composite.shape == (1, 40, 30, 3)
    fitted = fit_background(background, 30, 40)[0]
    expected = torch.tensor(PREMULTIPLIED) + (1 - ALPHA) * fitted
    assert torch.allclose(composite[0], expected.clamp(0, 1), atol=1e-6)
    _, _, green = matte_images(batch, color="0,255,0")
    assert torch.allclose(
        green[0, 5, 5], torch.tensor(PREMULTIPLIED) + (1 - ALPHA) * torch.tensor([0.0, 1, 0])
    )
    with pytest.raises(StudioError, match="background has 3 entries but the image batch has 1"):
        matte_images(batch, background=torch.rand(3, 40, 30, 3))
    with pytest.raises(StudioError, match="mattes have different sizes"):
        matte_images(predicted["matting"])


# ------------------------------------------------------------------------------ soft person masks


def _strip() -> tuple[torch.Tensor, torch.Tensor]:
    """1 x 12 strip: face (cols 0-2), hair (3-5), background (6-11); the matte fades out over cols 5-9."""
    labels = torch.tensor([[FACE] * 3 + [HAIR] * 3 + [0] * 6])
    alpha = torch.tensor([[1.0, 1, 1, 1, 1, 0.9, 0.7, 0.5, 0.3, 0.1, 0.0, 0.0]])
    return labels, alpha


def test_matte_parts_soft_outer_edge_hard_inner_edge() -> None:
    labels, alpha = _strip()
    hair = matte_parts(labels, resolve_classes("Hair"), alpha)
    assert hair[0].tolist() == pytest.approx([0, 0, 0, 1, 1, 0.9, 0.7, 0.5, 0.3, 0.1, 0, 0])
    face = matte_parts(labels, resolve_classes("Face_Neck"), alpha)
    assert face[0].tolist() == pytest.approx([1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0])  # the fringe is hair's
    nobody = matte_parts(torch.zeros_like(labels), resolve_classes("Hair"), alpha)
    assert not nobody.any()  # fringe that touches no body part stays out


def test_body_part_mask_with_a_person_mask_then_grow_and_invert() -> None:
    labels, alpha = _strip()
    seg = TaskBatch("seg", [SegResult(labels)])
    soft = body_part_mask(seg, preset="custom (classes below)", classes="Hair", matte=alpha)
    assert soft[0][0].tolist() == pytest.approx([0, 0, 0, 1, 1, 0.9, 0.7, 0.5, 0.3, 0.1, 0, 0])
    grown_inverted = body_part_mask(
        seg, preset="custom (classes below)", classes="Hair", matte=alpha[None], grow=1, invert=True
    )
    assert grown_inverted[0][0].tolist() == pytest.approx([1, 1, 0, 0, 0, 0, 0.1, 0.3, 0.5, 0.7, 0.9, 1])
    hard = body_part_mask(seg, preset="custom (classes below)", classes="Hair")
    assert hard[0].tolist() == [[0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0]]
    with pytest.raises(StudioError, match="'person_mask' is 6x1 but the segmentation is 12x1"):
        body_part_mask(seg, preset="hair", matte=torch.ones(1, 1, 6))


def test_relight_with_the_matte_alpha_and_straight_foreground() -> None:
    """At a soft edge the photo mixes in the old background; with the matte's straight colour the relit result
    no longer depends on it, and the composite over the new background follows the alpha."""
    from sapiens2_studio.core.pipeline.results import NormalResult
    from sapiens2_studio.core.shading.relight import DirectionalLight

    h, w = 4, 6
    normals = TaskBatch("normal", [NormalResult(torch.tensor([0.0, 0, -1]).expand(h, w, 3).clone())])
    alpha = torch.linspace(1, 0, w).expand(h, w)[None]
    person = torch.tensor([0.8, 0.4, 0.2])
    old_red, old_blue = torch.tensor([1.0, 0, 0]), torch.tensor([0.0, 0, 1])
    photos = [
        (person * alpha[0, ..., None] + bg * (1 - alpha[0, ..., None]))[None] for bg in (old_red, old_blue)
    ]
    foreground = person.expand(1, h, w, 3)
    new_bg = torch.full((1, h, w, 3), 0.25)
    light = (DirectionalLight.from_angles(0.0, 0.0, intensity=1.0),)
    relit = [
        relight_batch(normals, p, lights=light, mask=alpha, foreground=foreground, background=new_bg)[0]
        for p in photos
    ]
    assert torch.equal(relit[0], relit[1])
    lit_person = relight_batch(normals, foreground, lights=light, mask=torch.ones(1, h, w))[0][0, 0, 0]
    a = alpha[0, 0, 2]
    assert torch.allclose(relit[0][0, 0, 2], lit_person * a + 0.25 * (1 - a), atol=1e-6)
    halo = relight_batch(normals, photos[0], lights=light, mask=alpha, background=new_bg)[0]
    # without it, the old red shows at the edge: +0.048 in R at alpha 0.6 (measured)
    assert (halo[0, 0, 2, 0] - relit[0][0, 0, 2, 0]) > 0.04


def test_catalogue_matting_is_released_only_at_1b() -> None:
    assert catalogue.RELEASED["matting"] == ("1b",) and catalogue.default_size("matting") == "1b"


def test_a_nan_matte_is_caught_like_the_other_tasks() -> None:
    from sapiens2_studio.core.studio.compute.finite import nonfinite_count

    alpha = torch.full((4, 4), 0.5)
    alpha[1, 2] = float("nan")
    result = MattingResult(alpha, torch.zeros(4, 4, 3), torch.zeros(4, 4, 3))
    assert nonfinite_count("matting", result) == 1
    assert (
        nonfinite_count(
            "matting", MattingResult(torch.zeros(4, 4), torch.zeros(4, 4, 3), torch.zeros(4, 4, 3))
        )
        == 0
    )
