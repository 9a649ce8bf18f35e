"""What every ComfyUI node does, through the engine (core.studio) without ComfyUI: plain Host, tiny real checkpoints.

The nodes only translate widgets and sockets into these calls, so these tests cover their behaviour; the real
ComfyUI tests (tests/comfy) check the translation itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sapiens2_studio.core.checkpoints import hub
from sapiens2_studio.core.data import seg29
from sapiens2_studio.core.errors import Sapiens2Error
from sapiens2_studio.core.formats.keypoints import to_pose_keypoint
from sapiens2_studio.core.pipeline.results import (
    NormalResult,
    PersonPose,
    PointmapResult,
    PoseResult,
    SegResult,
)
from sapiens2_studio.core.studio.compute.capture import capture_frames
from sapiens2_studio.core.studio.compute.run_tasks import TaskOptions, run_tasks
from sapiens2_studio.core.studio.errors import StudioError
from sapiens2_studio.core.studio.runtime import models
from sapiens2_studio.core.studio.runtime.chunking import run_chunked
from sapiens2_studio.core.studio.runtime.execution import resolve_dtype
from sapiens2_studio.core.studio.runtime.host import Host
from sapiens2_studio.core.studio.sources import batches as imaging
from sapiens2_studio.core.studio.sources import given_boxes as boxes
from sapiens2_studio.core.studio.sources.batches import TaskBatch
from sapiens2_studio.core.studio.store import exports
from sapiens2_studio.core.studio.views import drawing, masks, openpose_render, previews, relighting


@pytest.fixture(scope="module")
def loaded(tiny_checkpoints):
    return {t: models.load(p, device="cpu") for t, p in tiny_checkpoints.items() if t != "pretrain"}


@pytest.fixture(scope="module")
def image():
    return torch.rand(2, 48, 32, 3, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def person_mask():
    mask = torch.zeros(2, 48, 32)
    mask[:, 10:40, 8:24] = 1
    return mask


def run(model, task, images, *, host=None, **options):
    """One task over a batch, as a task node runs it."""
    extra = {k: options.pop(k) for k in ("seg", "masks") if k in options}
    if "seg_model" in options:
        seg_model = options.pop("seg_model")
        batches = run_tasks({task: model, "seg": seg_model}, images, host, TaskOptions(**options), **extra)
    else:
        batches = run_tasks({task: model}, images, host, TaskOptions(**options), **extra)
    return batches[task]


@pytest.fixture(scope="module")
def dense_results(loaded, image, person_mask):
    """Normals (masked) and pointmap of the 2-image batch, computed once for several tests."""
    normals = run(loaded["normal"], "normal", image, masks=person_mask)
    pointmap = run(loaded["pointmap"], "pointmap", image, masks=person_mask)
    return normals, pointmap


class RecordingHost(Host):
    def __init__(self):
        super().__init__(on_note=None)
        self.calls = []

    def progress(self, done, total):
        self.calls.append((done, total))


# ------------------------------------------------------------------------------------------------- chunks


def test_run_chunked_halves_the_chunk_on_out_of_memory_and_says_so():
    seen = []

    def work(start, stop):
        seen.append(stop - start)
        if stop - start > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
        return list(range(start, stop))

    host = RecordingHost()
    assert run_chunked(7, 8, work, host) == list(range(7))
    assert seen[:3] == [7, 4, 2]
    assert any("retrying with 4" in n for n in host.notes) and any("retrying with 2" in n for n in host.notes)
    assert host.calls[-1] == (7, 7)


def test_run_chunked_errors_are_clear():
    with pytest.raises(StudioError, match="the batch is empty"):
        run_chunked(0, 4, lambda a, b: [], Host())

    def always_oom(start, stop):
        raise RuntimeError("CUDA error: out of memory")

    with pytest.raises(StudioError, match="out of memory even with one of the images per forward pass"):
        run_chunked(3, 1, always_oom, Host())

    def broken(start, stop):
        raise KeyError("not an OOM")

    with pytest.raises(KeyError):
        run_chunked(3, 2, broken, Host())


# ------------------------------------------------------------------------------------------------ loader


def test_loader_reads_task_and_size_from_the_weights(loaded, tiny_checkpoints):
    pose = loaded["pose"]
    assert pose.task == "pose" and pose.spec.size == "custom"
    assert pose.dtype == torch.float32 and pose.plan.reasons["dtype"] == "auto: fp32 on the CPU"
    record = pose.record()
    assert record["checkpoint"] == tiny_checkpoints["pose"].name and len(record["sha256"]) == 64
    assert (record["dtype"], record["device"]) == ("fp32", "cpu")
    assert resolve_dtype("auto", torch.device("cuda"), bf16_supported=True)[0] == torch.bfloat16
    assert resolve_dtype("auto", torch.device("cuda"), bf16_supported=False)[0] == torch.float16
    assert resolve_dtype("fp16", torch.device("cpu"))[0] == torch.float16
    with pytest.raises(StudioError, match="unknown dtype 'int8'"):
        resolve_dtype("int8", torch.device("cpu"))
    math_model = models.load(tiny_checkpoints["seg"], device="cpu", attention="math", dtype="bf16")
    assert math_model.plan.attention == "math" and math_model.model.dtype == torch.bfloat16


def test_loader_missing_and_wrong_checkpoints(tmp_path, loaded, image):
    with pytest.raises(StudioError, match="checkpoint not found"):
        models.load(tmp_path / "nope.safetensors")
    with pytest.raises(
        StudioError,
        match=r"needs a Sapiens2 pose \(308 keypoints\) model, but the model given is segmentation",
    ) as caught:
        run(loaded["seg"], "pose", image)
    assert "'Load Sapiens2 Model'" in caught.value.text("comfyui")
    with pytest.raises(StudioError, match="not a loaded Sapiens2 model") as caught:
        run("not a model", "pose", image)
    assert "connect the output of 'Load Sapiens2 Model'" in caught.value.text("comfyui")
    with pytest.raises(hub.HubError, match="unknown task"):
        hub.ensure_checkpoint("depth", "1b", tmp_path)
    with pytest.raises(hub.HubError, match="no albedo checkpoints are public"):
        hub.ensure_checkpoint("albedo", "1b", tmp_path)
    # An official file already in models/sapiens2/<task>/ is used as is (no network).
    existing = tmp_path / "pose" / "sapiens2_1b_pose.safetensors"
    existing.parent.mkdir()
    existing.write_bytes(b"placeholder")
    assert hub.ensure_checkpoint("pose", "1b", tmp_path) == existing


def test_model_cache_loads_once_and_reloads_a_replaced_file(tiny_checkpoints, tmp_path):
    import shutil

    cache = models.ModelCache()
    first = cache.get(tiny_checkpoints["seg"], device="cpu")
    assert cache.get(tiny_checkpoints["seg"], device="cpu") is first and len(cache) == 1
    assert cache.get(tiny_checkpoints["seg"], device="cpu", attention="math") is not first  # another plan
    copy = shutil.copy(tiny_checkpoints["seg"], tmp_path / "seg.safetensors")
    before = cache.get(copy, device="cpu")
    shutil.copy(tiny_checkpoints["normal"], copy)  # replaced under the same name
    assert cache.get(copy, device="cpu") is not before


# ---------------------------------------------------------------------------------------------- imaging


def test_image_and_mask_checks():
    with pytest.raises(StudioError, match="the 'image' batch is empty"):
        imaging.check_image(torch.zeros(0, 8, 8, 3), "N")
    with pytest.raises(StudioError, match=r"N: 'image' must be an image batch \(B, H, W, 3\)"):
        imaging.check_image(torch.zeros(8, 8, 3), "N")
    img = torch.zeros(2, 8, 6, 3)
    with pytest.raises(StudioError, match="'mask' is 64x64 but the image is 6x8"):
        imaging.check_mask(torch.zeros(1, 64, 64), img, "N")
    with pytest.raises(StudioError, match="mask has 3 entries but the image batch has 2"):
        imaging.check_mask(torch.zeros(3, 8, 6), img, "N")
    assert imaging.check_mask(torch.ones(8, 6), img, "N").shape == (2, 8, 6)


def test_grow_shrink_feather_and_colours():
    m = torch.zeros(11, 11)
    m[5, 5] = 1
    grown = masks.grow_mask(m, 2)
    assert int(grown.sum()) == 25 and grown[3, 3] == 1 and grown[2, 5] == 0
    assert torch.equal(masks.grow_mask(grown, -2), m)
    soft = masks.feather_mask(grown, 1.0)
    assert 0 < float(soft[2, 5]) < 1 and float(soft.max()) <= 1
    assert relighting.parse_color("#ff8000") == pytest.approx((1.0, 128 / 255, 0.0))
    assert relighting.parse_color("255, 0, 0") == (1.0, 0.0, 0.0)
    with pytest.raises(StudioError, match="cannot read the colour 'orange'"):
        relighting.parse_color("orange")
    labels = torch.tensor([[0, 23], [4, 28]])
    colours = previews.seg_colors(labels)
    palette = seg29()["palette_rgb"]
    assert colours[0, 1].tolist() == pytest.approx([c / 255 for c in palette[23]])


def test_depth_preview_uses_one_range_for_the_batch():
    d1 = torch.full((4, 4), 1.0)
    d2 = torch.full((4, 4), 3.0)
    valid = [torch.ones(4, 4, dtype=torch.bool)] * 2
    joint = previews.depth_preview([d1, d2], valid)
    assert float(joint[0].mean()) > 0.9 and float(joint[1].mean()) < 0.1  # near bright
    separate = previews.depth_preview([d1, d2], valid, per_image=True)
    assert float(separate[0].mean()) == pytest.approx(float(separate[1].mean()))
    ramp = previews.depth_preview([d1, d2], valid, colormap="ramp")
    assert ramp.shape == (2, 4, 4, 3) and not torch.allclose(ramp[0, 0, 0, 0], ramp[0, 0, 0, 2])  # in colour


# ------------------------------------------------------------------------------------------------- boxes


def test_bounding_box_values_of_comfyui_core_and_lists():
    core = [[{"x": 10, "y": 5, "width": 20, "height": 30}], []]
    assert boxes.boxes_per_image(core, 2, 100, 100) == [[(10.0, 5.0, 30.0, 35.0)], []]
    single = {"x": 0, "y": 0, "width": 500, "height": 50}
    assert boxes.boxes_per_image(single, 3, 100, 80) == [[(0.0, 0.0, 100.0, 50.0)]] * 3
    assert boxes.boxes_per_image([[1, 2, 11, 12], [20, 20, 40, 40]], 1, 64, 64) == [
        [(1.0, 2.0, 11.0, 12.0), (20.0, 20.0, 40.0, 40.0)]
    ]
    assert boxes.boxes_per_image(None, 2, 10, 10) is None
    # A connected detector that found nothing: nobody in any frame (not "no boxes given": that is None).
    assert boxes.boxes_per_image([], 2, 10, 10) == [[], []]
    with pytest.raises(StudioError, match=r"bboxes\[0\]\[0\]: box dict needs keys x, y, width, height"):
        boxes.boxes_per_image([{"x": 1}], 1, 10, 10)
    # Boxes partly outside the image are clipped; boxes entirely outside are dropped.
    assert boxes.boxes_per_image([[-5, -5, 5, 5], [50, 50, 60, 60]], 1, 20, 20) == [[(0.0, 0.0, 5.0, 5.0)]]


# ------------------------------------------------------------------------------------------- task nodes


def test_segment_outputs_and_body_part_masks(loaded, image):
    seg = run(loaded["seg"], "seg", image, chunk_size=1)
    preview = previews.seg_preview_batch(seg, image)
    person = masks.foreground_masks(seg)
    assert len(seg) == 2 and seg.results[0].labels.shape == (48, 32)
    assert preview.shape == (2, 48, 32, 3) and person.shape == (2, 48, 32)
    assert torch.equal(person[0] > 0.5, seg.results[0].labels > 0)
    assert seg.model["task"] == "seg"
    with pytest.raises(StudioError, match="needs a Sapiens2 segmentation"):
        run(loaded["normal"], "seg", image)
    with pytest.raises(Sapiens2Error, match="no images given"):
        run(loaded["seg"], "seg", image[:0])


def test_body_part_mask_presets_grow_and_invert():
    labels = torch.zeros(20, 20, dtype=torch.int64)
    labels[2:8, 2:8] = 23  # Upper_Clothing
    labels[10:14, 10:14] = 15  # Right_Hand
    labels[15:18, 2:5] = 3  # Face_Neck
    seg = TaskBatch("seg", [SegResult(labels)])
    upper = masks.body_part_mask(seg, preset="upper_clothes")
    assert int(upper.sum()) == 36
    tryon = masks.body_part_mask(seg, preset="tryon_upper")
    assert float(tryon[0, 12, 12]) == 0.0 and float(tryon[0, 16, 3]) == 0.0  # never hands or face
    custom = masks.body_part_mask(seg, preset=masks.CUSTOM, classes="hands, 3")
    assert int(custom.sum()) == 16 + 9
    minus = masks.body_part_mask(seg, preset="person", exclude="hands")
    assert int(minus.sum()) == 36 + 9
    grown = masks.body_part_mask(seg, preset="upper_clothes", grow=1, invert=True)
    assert int((1 - grown).sum()) == 64
    assert masks.PRESETS[0].startswith("tryon_")
    with pytest.raises(StudioError, match="unknown segmentation class 'sleeves'"):
        masks.body_part_mask(seg, preset="upper_clothes", classes="sleeves")
    with pytest.raises(StudioError, match="the selection is empty"):
        masks.body_part_mask(seg, preset=masks.CUSTOM)
    with pytest.raises(StudioError, match="'seg' needs Sapiens2 segmentation"):
        masks.body_part_mask(TaskBatch("normal", [object()]), preset="hair")


def test_dense_tasks_with_masks(loaded, image, person_mask, dense_results):
    mask = person_mask
    normals, pointmap = dense_results
    n = normals.results[0].normals
    assert n.shape == (48, 32, 3)
    assert torch.allclose(n.norm(dim=-1), torch.ones(48, 32), atol=1e-4)
    assert torch.equal(normals.results[1].mask, mask[1] > 0.5)
    maps = previews.normal_map_batch(normals, "opengl")
    assert maps.shape == (2, 48, 32, 3) and float(maps[0, 0, 0].abs().sum()) == 0.0  # masked out = black
    preview, valid = previews.depth_preview_batch(pointmap)
    assert preview.shape == (2, 48, 32, 3) and float(valid[0, 0, 0]) == 0.0
    with pytest.raises(StudioError, match="'mask' is 16x16 but the image is 32x48"):
        imaging.check_mask(torch.ones(1, 16, 16), image, "")
    with pytest.raises(StudioError, match="needs a Sapiens2 surface normals model"):
        run(loaded["pointmap"], "normal", image)


def test_normal_conventions_colour_a_camera_facing_surface():
    n = torch.tensor([0.0, 0.0, -1.0]).expand(4, 4, 3)
    batch = TaskBatch("normal", [NormalResult(n.clone())])
    opengl = previews.normal_map_batch(batch, "opengl")[0, 0, 0]
    assert opengl.tolist() == pytest.approx([0.5, 0.5, 1.0])
    raw = previews.normal_map_batch(batch, "opencv")[0, 0, 0]
    assert raw.tolist() == pytest.approx([0.5, 0.5, 0.0])
    with pytest.raises(Sapiens2Error, match="unknown normal convention"):
        previews.normal_map_batch(batch, "weird")


def test_pose_with_given_boxes_and_keypoint_flavours(loaded):
    img = torch.rand(1, 64, 48, 3, generator=torch.Generator().manual_seed(2))
    bboxes = [[{"x": 4, "y": 4, "width": 20, "height": 40}, {"x": 24, "y": 10, "width": 20, "height": 50}]]
    batch = run(loaded["pose"], "pose", img, boxes=boxes.boxes_per_image(bboxes, 1, 48, 64), flip_test=False)
    people = batch.results[0].people
    assert len(people) == 2 and people[0].bbox_source == "given" and people[0].keypoints.shape == (308, 3)
    core = to_pose_keypoint(batch.results)
    assert core[0]["canvas_width"] == 48 and len(core[0]["people"]) == 2
    assert (
        len(core[0]["people"][0]["pose_keypoints_2d"]) == 54 and "foot_keypoints_2d" in core[0]["people"][0]
    )
    aux = to_pose_keypoint(batch.results, flavor="controlnet_aux", score_threshold=0.0)
    confidences = aux[0]["people"][0]["pose_keypoints_2d"][2::3]
    assert set(confidences) <= {0.0, 1.0}
    json.dumps(core)  # plain JSON-able Python, as POSE_KEYPOINT consumers expect
    with pytest.raises(StudioError, match="needs a Sapiens2 segmentation"):
        run(loaded["pose"], "pose", img, seg_model=loaded["normal"], flip_test=False)


def test_pose_boxes_from_a_segmentation_model(loaded):
    img = torch.rand(1, 40, 40, 3, generator=torch.Generator().manual_seed(3))
    seg = TaskBatch("seg", [SegResult(torch.zeros(40, 40, dtype=torch.int64))])
    seg.results[0].labels[5:35, 10:30] = 22
    batch = run(loaded["pose"], "pose", img, seg=seg, flip_test=False)
    person = batch.results[0].people[0]
    assert person.bbox_source == "seg"
    assert person.bbox[0] == pytest.approx(10, abs=1.5) and person.bbox[3] == pytest.approx(35, abs=1.5)


def test_draw_pose_renders_both_styles():
    kp = np.zeros((308, 3), dtype=np.float32)
    kp[5] = (10, 10, 0.9)  # left shoulder
    kp[7] = (10, 30, 0.9)  # left elbow
    pose = TaskBatch("pose", [PoseResult([PersonPose((0, 0, 40, 40), kp)], (40, 40))])
    img = drawing.render_poses(pose=pose, stick_width=3)
    assert (
        img.shape == (1, 40, 40, 3) and float(img[0, 20, 10].sum()) > 0 and float(img[0, 35, 35].sum()) == 0
    )
    frame = {
        "people": [{"pose_keypoints_2d": [20, 5, 1, 20, 20, 1] + [0, 0, 0] * 16}],
        "canvas_width": 32,
        "canvas_height": 32,
    }
    out = drawing.render_poses(keypoints=[frame], stick_width=4)
    expected = np.array(openpose_render.COLORS[12]) * 0.6 / 255  # limb neck->nose colour, dimmed
    assert out[0, 12, 20].numpy() == pytest.approx(expected, abs=0.01)
    normalised = json.loads(json.dumps(frame))
    normalised["people"][0]["pose_keypoints_2d"][:6] = [0.625, 0.15625, 1, 0.625, 0.625, 1]
    assert torch.allclose(drawing.render_poses(keypoints=[normalised], stick_width=4), out, atol=0.02)
    with pytest.raises(StudioError, match="connect 'keypoints'"):
        drawing.render_poses()
    with pytest.raises(StudioError, match="the image is 8x8 but the pose canvas is 32x32"):
        drawing.render_poses(keypoints=[frame], image=torch.zeros(1, 8, 8, 3))


# ---------------------------------------------------------------------------------------------- relight


def sphere_batch(size=33):
    c = (torch.arange(size) + 0.5) / size * 2 - 1
    y, x = torch.meshgrid(c, c, indexing="ij")
    inside = x * x + y * y < 1
    n = torch.stack([x, y, -torch.sqrt((1 - x * x - y * y).clamp_min(0))], -1) * inside[..., None]
    return TaskBatch("normal", [NormalResult(n.float(), inside)]), inside


def test_relight_matches_lambert_and_keeps_the_background():
    normals, inside = sphere_batch()
    image = torch.full((1, 33, 33, 3), 0.25)
    albedo = torch.ones(1, 33, 33, 3)
    lights = relighting.add_light(None, 0.0, 0.0, "#ffffff", 1.0)
    settings = relighting.RelightSettings(ambient=0.0)
    relit, light_map = relighting.relight_batch(
        normals, image, lights=lights, settings=settings, albedo=albedo
    )
    expected = (-normals.results[0].normals[..., 2]).clamp_min(0)  # light from the camera: cos = -n_z
    from sapiens2_studio.core.shading.relight import srgb_to_linear

    assert torch.allclose(srgb_to_linear(relit[0, ..., 0])[inside], expected[inside], atol=2e-3)
    assert torch.allclose(relit[0][~inside], image[0][~inside])  # background untouched
    assert light_map.shape == relit.shape and float(light_map[0, 0, 0, 0]) > 0  # backdrop gradient, not black
    two = relighting.add_light(lights, 90.0, 0.0, "255,0,0", 0.5)
    assert len(two) == 2 and "azimuth 90°" in relighting.describe_lights(two)


def test_relight_environment_shadows_and_errors():
    normals, inside = sphere_batch(24)
    image = torch.full((1, 24, 24, 3), 0.5)
    env = torch.full((1, 16, 32, 3), 0.5)
    settings = relighting.RelightSettings(ambient=0.0, environment_is_linear=True)
    relit, _ = relighting.relight_batch(normals, image, environment=env, settings=settings, albedo=image)
    from sapiens2_studio.core.shading.relight import linear_to_srgb, srgb_to_linear

    uniform = linear_to_srgb(srgb_to_linear(torch.tensor(0.5)) * 0.5)
    assert torch.allclose(relit[0][inside], uniform.expand(int(inside.sum()), 3), atol=3e-3)
    with pytest.raises(StudioError, match="no light"):
        relighting.relight_batch(normals, image, settings=relighting.RelightSettings(ambient=0.0))
    with pytest.raises(StudioError, match="twice as wide as it is high"):
        relighting.relight_batch(normals, image, environment=torch.ones(1, 16, 16, 3))
    with pytest.raises(StudioError, match="the normals are 24x24 but the image is 12x12"):
        relighting.relight_batch(normals, torch.ones(1, 12, 12, 3), settings=settings, environment=env)
    # Shadows: a wall with a ball in front; light from the left darkens the wall right of the ball.
    size, f = 40, 40.0
    c = (torch.arange(size) + 0.5 - size / 2) / f
    yy, xx = torch.meshgrid(c, c, indexing="ij")
    rays = torch.stack([xx, yy, torch.ones_like(xx)], -1)
    depth = torch.full((size, size), 2.0)
    ball = (xx**2 + yy**2) < 0.1**2
    depth[ball] = 1.5
    points = rays * depth[..., None]
    wall_normals = torch.tensor([0.0, 0.0, -1.0]).expand(size, size, 3).clone()
    nb = TaskBatch("normal", [NormalResult(wall_normals)])
    pm = TaskBatch("pointmap", [PointmapResult(points, 1.0, (f, f, size / 2, size / 2))])
    lit = relighting.add_light(None, -45.0, 0.0, "#ffffff", 1.0)
    shadow_settings = relighting.RelightSettings(ambient=0.0, shadow_softness=0.0)
    out, _ = relighting.relight_batch(
        nb, torch.ones(1, size, size, 3), lights=lit, settings=shadow_settings, pointmap=pm
    )
    # The ball's shadow on the wall: x in [0.35, 0.65] m at z = 2 m, i.e. columns 27..33; 27..30 must be dark.
    behind = out[0, 20, 27:31, 0]
    free = out[0, 20, 2:6, 0]
    assert float(behind.max()) < 0.05 and float(free.min()) > 0.5
    no_shadows = relighting.RelightSettings(ambient=0.0, shadows=False)
    off, _ = relighting.relight_batch(
        nb, torch.ones(1, size, size, 3), lights=lit, settings=no_shadows, pointmap=pm
    )
    assert float(off[0, 20, 27:31, 0].min()) > 0.5


# ----------------------------------------------------------------------------------------------- export


def test_capture_bundle_frames_roundtrip_and_sequences(loaded, image, dense_results, tmp_path):
    from sapiens2_studio.core.formats import bundle

    labels = torch.zeros(2, 48, 32, dtype=torch.int64)
    labels[:, 10:40, 8:24] = 22
    seg = TaskBatch("seg", [SegResult(labels[0]), SegResult(labels[1])], {"task": "seg", "size": "custom"})
    normals, pointmap = dense_results
    pose = run(
        loaded["pose"],
        "pose",
        image,
        boxes=boxes.boxes_per_image({"x": 2, "y": 2, "width": 20, "height": 40}, 2, 32, 48),
        flip_test=False,
    )

    def first(b):
        return TaskBatch(b.task, b.results[:1], b.model)

    one = {"pose": first(pose), "seg": first(seg), "normal": first(normals), "pointmap": first(pointmap)}
    frames = capture_frames(image[:1], one)
    path = exports.save_capture_bundle(tmp_path, "one", frames)
    back = bundle.read_bundle(path)
    assert (back.width, back.height) == (32, 48)
    assert back.camera["source"] == "pointmap"
    assert back.camera["fx"] == pytest.approx(pointmap.results[0].intrinsics[0], rel=1e-5)
    assert np.array_equal(back.seg.astype(np.int64), seg.results[0].labels.numpy())
    assert len(back.people) == 1 and back.people[0].keypoints.shape == (308, 3)
    assert [m["task"] for m in back.models] == ["seg", "pose", "normal", "pointmap"]  # run order
    assert all(len(m["sha256"]) == 64 for m in back.models if m["task"] != "seg")  # seg: no file behind it
    assert back.mask is not None and float(back.mask[20, 10]) == 1.0 and float(back.mask[0, 0]) == 0.0
    frames2 = capture_frames(image, {"pose": pose, "seg": seg, "normal": normals, "pointmap": pointmap})
    seq = exports.save_capture_bundle(tmp_path, "clip", frames2, fps=12.0)
    doc = json.loads(seq.read_text())
    assert doc["fps"] == 12.0 and [f["frame"] for f in doc["frames"]] == [1, 2]
    with pytest.raises(StudioError, match="'seg' is 32x48 but the image is 8x8"):
        capture_frames(torch.zeros(1, 8, 8, 3), {"seg": first(seg)})
    with pytest.raises(StudioError, match="'pointmap' needs Sapiens2 pointmap"):
        capture_frames(image, {"pointmap": normals})


def test_missing_openexr_gives_an_install_command_for_each_front_end(monkeypatch):
    import builtins
    import sys

    from sapiens2_studio.core.formats.exr import ExrError, require_openexr

    real_import = builtins.__import__

    def no_openexr(name, *args, **kwargs):
        if name == "OpenEXR":
            raise ImportError("No module named 'OpenEXR'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openexr)
    with pytest.raises(ExrError) as caught:
        require_openexr()
    assert f"{sys.executable} -m pip install openexr" in caught.value.text("comfyui")
    assert 'pip install "sapiens2-studio[exr]"' in caught.value.text("cli")


def test_export_meshes_glb_and_ply(tmp_path):
    size = 12
    c = (torch.arange(size) + 0.5 - size / 2) / 10.0
    yy, xx = torch.meshgrid(c, c, indexing="ij")
    points = torch.stack([xx, yy, torch.ones_like(xx)], -1) * 2.0
    pm = TaskBatch("pointmap", [PointmapResult(points, 1.0, (10.0, 10.0, 6.0, 6.0))] * 2)
    paths = exports.export_meshes(pm, tmp_path, "m", fmt="ply", image=torch.rand(2, size, size, 3))
    assert [p.name for p in paths] == ["m_0001.ply", "m_0002.ply"]
    header = paths[0].read_bytes()[:400].decode("ascii", "replace")
    assert f"element vertex {size * size}" in header and "element face" in header
    glb = exports.export_meshes(TaskBatch("pointmap", pm.results[:1]), tmp_path, "g", fmt="glb")[0]
    assert glb.read_bytes()[:4] == b"glTF"
    with pytest.raises(StudioError, match="empty mesh"):
        exports.export_meshes(pm, tmp_path, "e", mask=torch.zeros(1, size, size))
    with pytest.raises(StudioError, match="the image is 5x5 but the pointmap is 12x12"):
        exports.export_meshes(pm, tmp_path, "x", image=torch.zeros(1, 5, 5, 3))
    with pytest.raises(StudioError, match="unknown mesh format 'obj'"):
        exports.export_meshes(pm, tmp_path, "x", fmt="obj")


def test_albedo_image_is_clamped_and_masked(loaded, image):
    mask = torch.zeros(2, 48, 32)
    mask[:, :, 16:] = 1
    batch = run(loaded["albedo"], "albedo", image, masks=mask)
    assert batch.size == (32, 48)
    out = previews.albedo_batch(batch)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    assert float(out[:, :, :16].abs().max()) == 0.0


def test_shadows_marched_on_a_coarser_grid_match_full_resolution():
    size, f = 96, 90.0
    c = (torch.arange(size) + 0.5 - size / 2) / f
    yy, xx = torch.meshgrid(c, c, indexing="ij")
    depth = torch.full((size, size), 2.0)
    depth[(xx**2 + yy**2) < 0.12**2] = 1.5
    points = torch.stack([xx, yy, torch.ones_like(xx)], -1) * depth[..., None]
    light = relighting.add_light(None, -45.0, 20.0, "#ffffff", 1.0)[0]
    valid = torch.ones(size, size, dtype=torch.bool)
    full = relighting.cast_shadows(points, light, (f, f, size / 2, size / 2), valid, max_side=size)
    coarse = relighting.cast_shadows(points, light, (f, f, size / 2, size / 2), valid, max_side=size // 2)
    assert float((full < 0.5).sum()) > 100  # a real shadow
    assert float(((full > 0.5) != (coarse > 0.5)).float().mean()) < 0.03


def test_batches_of_one_broadcast_and_other_mismatches_are_errors(tmp_path):
    """ComfyUI convention: a batch of 1 serves every image; any other count must equal the image batch."""
    kp = np.zeros((308, 3), dtype=np.float32)
    pose3 = TaskBatch("pose", [PoseResult([PersonPose((0, 0, 8, 8), kp)], (8, 8))] * 3)
    assert drawing.render_poses(pose=pose3, image=torch.zeros(1, 8, 8, 3)).shape == (3, 8, 8, 3)
    single = TaskBatch("pose", pose3.results[:1])
    assert drawing.render_poses(pose=single, image=torch.zeros(3, 8, 8, 3)).shape[0] == 3
    with pytest.raises(StudioError, match="image has 2 entries but the pose batch has 3"):
        drawing.render_poses(pose=pose3, image=torch.zeros(2, 8, 8, 3))
    frame = {"people": [], "canvas_width": 8, "canvas_height": 8}
    with pytest.raises(StudioError, match="image has 3 entries but the keypoints batch has 2"):
        drawing.render_poses(keypoints=[frame, frame], image=torch.zeros(3, 8, 8, 3))
    normals, _ = sphere_batch(8)
    lights = relighting.add_light(None, 0.0, 0.0, "#ffffff", 1.0)
    with pytest.raises(StudioError, match="environment has 2 entries but the image batch has 3"):
        relighting.relight_batch(
            normals, torch.zeros(3, 8, 8, 3), lights=lights, environment=torch.ones(2, 8, 16, 3)
        )
    yy, xx = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    points = torch.stack([xx, yy, torch.ones(8, 8)], -1)
    pm = TaskBatch("pointmap", [PointmapResult(points + 10, 1.0, (10.0, 10.0, 4.0, 4.0))] * 3)
    with pytest.raises(StudioError, match="image has 2 entries but the pointmap batch has 3"):
        exports.export_meshes(pm, tmp_path, "m", image=torch.rand(2, 8, 8, 3), max_edge_ratio=10.0)
    with pytest.raises(StudioError, match="mask has 2 entries but the pointmap batch has 3"):
        exports.export_meshes(pm, tmp_path, "m", mask=torch.ones(2, 8, 8), max_edge_ratio=10.0)
    paths = exports.export_meshes(pm, tmp_path, "m", image=torch.rand(1, 8, 8, 3), max_edge_ratio=10.0)
    assert len(paths) == 3


def test_node_modules_are_independent():
    """Each nodes_* module is imported on its own so one failure costs only its nodes: none may import another."""
    import ast
    from pathlib import Path

    import sapiens2_studio.comfy_nodes as pack

    folder = Path(pack.__file__).parent
    for path in sorted(folder.glob("nodes_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not {name for name in imported if name.startswith("nodes_")}, (path.name, imported)


def test_pose_frame_where_the_detector_found_nobody_has_no_people(loaded):
    """Connected boxes that are empty for a frame (an empty video frame) mean nobody, not 'the whole image'."""
    img = torch.rand(2, 64, 48, 3, generator=torch.Generator().manual_seed(4))
    given = boxes.boxes_per_image([[{"x": 4, "y": 4, "width": 20, "height": 40}], []], 2, 48, 64)
    batch = run(loaded["pose"], "pose", img, boxes=given, flip_test=False)
    assert len(batch.results[0].people) == 1 and batch.results[1].people == []
    frames = to_pose_keypoint(batch.results)
    assert frames[1]["people"] == [] and (frames[1]["canvas_width"], frames[1]["canvas_height"]) == (48, 64)
    # With segmentation connected, an empty frame falls back to the people the segmentation finds.
    seg = TaskBatch("seg", [SegResult(torch.zeros(64, 48, dtype=torch.int64)) for _ in range(2)])
    seg.results[1].labels[5:60, 10:40] = 22
    batch = run(loaded["pose"], "pose", img, boxes=given, seg=seg, flip_test=False)
    assert [p.bbox_source for p in batch.results[1].people] == ["seg"]
    # Segmentation that finds nobody (frame 0 here): the whole image by default, or nobody when asked.
    host = Host(on_note=None)
    whole = run(loaded["pose"], "pose", img, seg=seg, flip_test=False, host=host)
    assert [p.bbox_source for p in whole.results[0].people] == ["image"]
    assert len(host.notes) == 1 and "frame 1" in host.notes[0] and "whole image" in host.notes[0]
    nobody = run(loaded["pose"], "pose", img, seg=seg, flip_test=False, if_no_person="empty")
    assert nobody.results[0].people == [] and len(nobody.results[1].people) == 1


def test_body_part_mask_of_one_person():
    """'person' N picks the N-th largest person (found as Pose finds them); 0 keeps everyone."""
    labels = torch.zeros(40, 60, dtype=torch.int64)
    labels[5:35, 5:25] = 23  # a big person's shirt (left)
    labels[10:30, 40:52] = 23  # a smaller person's shirt (right)
    seg = TaskBatch("seg", [SegResult(labels)])
    everyone = masks.body_part_mask(seg, preset="upper_clothes")
    largest = masks.body_part_mask(seg, preset="upper_clothes", person=1)
    second = masks.body_part_mask(seg, preset="upper_clothes", person=2)
    assert int(everyone.sum()) == 600 + 240
    assert int(largest.sum()) == 600 and float(largest[0, 20, 10]) == 1.0 and float(largest[0, 20, 45]) == 0.0
    assert int(second.sum()) == 240 and float(second[0, 20, 45]) == 1.0
    assert int(masks.body_part_mask(seg, preset="upper_clothes", person=3).sum()) == 0  # nobody: empty
    inverted = masks.body_part_mask(seg, preset="upper_clothes", person=2, invert=True)
    assert int(inverted.sum()) == 40 * 60 - 240


def test_relight_and_masks_keep_inputs_on_their_device():
    """With --gpu-only, ComfyUI keeps node outputs (normals, images) on the GPU; no step may create CPU tensors
    next to them.  The 'meta' device stands in for the GPU here: any CPU tensor mixed in raises."""
    meta = torch.device("meta")
    normals = TaskBatch("normal", [NormalResult(torch.zeros(8, 8, 3, device=meta), None)])
    lights = relighting.add_light(None, 30.0, 10.0, "#ffffff", 1.0)
    relit, light_map = relighting.relight_batch(
        normals, torch.zeros(1, 8, 8, 3, device=meta), lights=lights, host=Host(meta, meta)
    )
    assert relit.device == meta and light_map.device == meta and relit.shape == (1, 8, 8, 3)
    seg = TaskBatch("seg", [SegResult(torch.zeros(8, 8, dtype=torch.int64, device=meta))])
    mask = masks.body_part_mask(seg, preset="upper_clothes", grow=2, feather=1.0, output_device=meta)
    assert mask.device == meta and mask.shape == (1, 8, 8)
    assert previews.normal_map_batch(normals).device == meta


def test_a_missing_official_checkpoint_points_to_the_download_entry():
    from sapiens2_studio.comfy_nodes import comfy_host

    hint = comfy_host.missing_checkpoint_hint("sapiens2_1b_pose.safetensors")
    assert (
        comfy_host.DOWNLOAD_CHOICE in hint and "download_task 'pose'" in hint and "download_size '1b'" in hint
    )
    assert "download_task 'seg'" in comfy_host.missing_checkpoint_hint("seg/sapiens2_0.4b_seg.safetensors")
    assert comfy_host.missing_checkpoint_hint("my_finetune.safetensors") == ""
    assert comfy_host.missing_checkpoint_hint("sapiens2_1b_albedo.safetensors") == ""  # nothing to download


def test_depth_preview_of_a_long_video_samples_each_frame(monkeypatch):
    """The batch-wide depth range must not concatenate every pixel of every frame (300 frames of 1080p would be
    2.4 GB): each frame contributes a bounded sample, and the range stays right."""
    seen = []
    original = previews._depth_range
    monkeypatch.setattr(
        previews, "_depth_range", lambda values: seen.append(values.numel()) or original(values)
    )
    frames = [torch.linspace(1.0, 5.0, 600 * 600).reshape(600, 600) + k * 0.01 for k in range(4)]
    valid = [torch.ones(600, 600, dtype=torch.bool)] * 4
    preview = previews.depth_preview(frames, valid)
    assert max(seen) <= 1_000_000
    assert preview.shape == (4, 600, 600, 3)
    assert float(preview[0, 0, 0, 0]) == pytest.approx(1.0) and float(preview[0, -1, -1, 0]) == pytest.approx(
        0.0
    )


def test_the_jobs_depth_preview_shortcuts_give_the_same_bytes():
    """The job draws depth previews as 8-bit directly and finds the percentiles with one partition; both must
    equal the float path ComfyUI's nodes use, converted to 8 bits, and `torch.quantile`'s definition."""
    from sapiens2_studio.core.studio.views import previews

    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 101, 1000, 99_999):
        values = torch.from_numpy(rng.gamma(2.0, 1.5, n).astype(np.float32))
        values[: n // 7] = values[0]  # repeated values: order statistics with ties
        expected = (previews._quantile(values, 0.01), previews._quantile(values, 0.99))
        assert previews._quantiles_cpu(values.numpy(), (0.01, 0.99)) == expected
        assert expected[1] == pytest.approx(float(torch.quantile(values.double(), 0.99)), rel=1e-6)
    depth = torch.from_numpy(rng.uniform(0.5, 6.0, (37, 53)).astype(np.float32))
    depth[0, :5] = torch.tensor([0.0, -1.0, float("nan"), float("inf"), 7.5])
    valid = torch.isfinite(depth) & (depth > 0) & torch.from_numpy(rng.random((37, 53)) > 0.2)
    (depth_range,) = previews.depth_ranges([depth], [valid], per_image=True)
    for near_bright in (True, False):
        floats = previews.depth_colours(depth, valid, depth_range, near_bright=near_bright, colormap="ramp")
        got = previews.depth_colours_u8(depth, valid, depth_range, near_bright=near_bright)
        assert got.dtype == np.uint8 and np.array_equal(got, previews.to_uint8(floats))


def test_the_jobs_seg_preview_shortcut_gives_the_same_bytes():
    from sapiens2_studio.core.studio.views import previews

    labels = torch.from_numpy(np.random.default_rng(12).integers(-3, 40, (23, 31)))  # out-of-range ids clamp
    expected = previews.to_uint8(previews.seg_colors(labels))
    for given in (labels, labels.numpy().astype(np.int32)):
        got = previews.seg_colours_u8(given)
        assert got.dtype == np.uint8 and np.array_equal(got, expected)
