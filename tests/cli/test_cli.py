"""End-to-end `sapiens2 predict` on tiny synthetic checkpoints (official key layout, real safetensors files).

One module-scoped run covers every task and several image sizes and modes; the other tests check bad input,
sequences, boxes and the coordinate frames of what is written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("OpenEXR")
import torch
from safetensors.torch import save_file
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.checkpoints.hub import sha256_file
from sapiens2_studio.core.formats.bundle import read_bundle
from sapiens2_studio.core.formats.sequence import read_sequence
from sapiens2_studio.core.testing.synthetic import synthetic_state_dict, write_synthetic_checkpoint

TASKS = ("pose", "seg", "normal", "albedo", "pointmap")
KNOWN_SCALE = 0.625
# name -> (width, height, mode)
IMAGES = {
    "rgb": (160, 120, "RGB"),
    "rgba": (96, 128, "RGBA"),
    "gray": (64, 80, "L"),
    "deep": (100, 60, "I;16"),
}


def _write_image(path: Path, width: int, height: int, mode: str, seed: int = 0) -> np.ndarray:
    """Write a test image and return the RGB data the CLI should see, in 0..1."""
    rng = np.random.default_rng(seed)
    if mode == "I;16":
        data = rng.integers(0, 65536, (height, width), dtype=np.uint16)
        Image.fromarray(data).save(path)
        return np.repeat(data[..., None] / 65535.0, 3, axis=2)
    rgb = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    img = Image.fromarray(rgb)
    if mode == "RGBA":
        img = img.convert("RGBA")
        img.putalpha(128)
    elif mode == "L":
        img = img.convert("L")
    img.save(path)
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float64) / 255.0


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Official layout `<home>/<task>/sapiens2_0.4b_<task>.safetensors` plus one custom-named file."""
    home = tmp_path_factory.mktemp("home")
    paths = {"home": home}
    for seed, task in enumerate(TASKS):
        paths[task] = write_synthetic_checkpoint(
            home / task / f"sapiens2_0.4b_{task}.safetensors", task=task, seed=seed
        )
    # A pointmap model with a known scale: the last scale layer outputs its bias only (weights zeroed).
    state = synthetic_state_dict("pointmap", seed=3)
    last = max(k for k in state if k.startswith("decode_head.scale_final_layer.") and k.endswith(".weight"))
    state[last] = torch.zeros_like(state[last])
    state[last.replace(".weight", ".bias")] = torch.full_like(
        state[last.replace(".weight", ".bias")], KNOWN_SCALE
    )
    save_file(state, str(paths["pointmap"]))
    paths["custom_pose"] = write_synthetic_checkpoint(
        home.parent / "my_tiny_pose.safetensors", task="pose", seed=7
    )
    return paths


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory, checkpoints: dict[str, Path]):
    src = tmp_path_factory.mktemp("src")
    expected = {}
    for seed, (name, (w, h, mode)) in enumerate(IMAGES.items()):
        expected[name] = _write_image(src / f"{name}.png", w, h, mode, seed)
    out = tmp_path_factory.mktemp("out")
    argv = ["predict", str(src), "--tasks", ",".join(TASKS), "--out", str(out)]  # each task 0.4b
    argv += [
        "--checkpoint-dir",
        str(checkpoints["home"]),
        "--no-download",
        "--device",
        "cpu",
        "--batch-size",
        "2",
    ]
    argv += ["--checkpoint", f"pose={checkpoints['custom_pose']}"]
    rc = main(argv)
    return rc, out, expected


def test_full_run_writes_every_file(full_run) -> None:
    rc, out, _ = full_run
    assert rc == 0
    names = sorted(p.name for p in out.iterdir())
    assert not [n for n in names if n.startswith(".")], "temporary files left behind"
    for image in IMAGES:
        for suffix in (
            "exr",
            "json",
            "keypoints.json",
            "openpose.json",
            "pose.png",
            "seg.png",
            "normal.png",
            "depth.png",
            "albedo.png",
        ):
            assert f"{image}.{suffix}" in names, f"{image}.{suffix} missing"
    preview = np.asarray(Image.open(out / "rgb.seg.png"))
    assert preview.shape == (120, 160, 3)


def test_full_run_layers_shapes_and_models(full_run, checkpoints) -> None:
    _, out, expected = full_run
    for name, (w, h, _) in IMAGES.items():
        frame = read_bundle(out / f"{name}.json")
        assert (frame.width, frame.height) == (w, h)
        assert (
            frame.image.shape == frame.points.shape == frame.normals.shape == frame.albedo.shape == (h, w, 3)
        )
        np.testing.assert_allclose(frame.image, expected[name], atol=4e-3)  # RGBA: alpha dropped; 16-bit kept
        assert frame.seg.dtype == np.int64 and frame.seg.min() >= 0 and frame.seg.max() <= 28
        np.testing.assert_array_equal(frame.mask, (frame.seg > 0).astype(np.float32))
        norms = np.linalg.norm(frame.normals, axis=-1)
        assert np.abs(norms - 1).max() < 5e-3
        assert frame.albedo.min() >= 0 and frame.albedo.max() <= 1
        assert (frame.points[frame.seg == 0] == 0).all()  # background zeroed with the seg mask
        tasks = {m["task"]: m for m in frame.models}
        assert set(tasks) == set(TASKS)
        assert tasks["pose"]["checkpoint"] == "my_tiny_pose.safetensors" and tasks["pose"]["size"] == "custom"
        assert tasks["seg"]["sha256"] == sha256_file(checkpoints["seg"])
        assert frame.people, "pose found nobody (whole-image fallback expected at least)"
        for person in frame.people:
            assert person.keypoints.shape == (308, 3)
            assert person.bbox_source in ("seg", "image")


def test_full_run_camera_and_keypoints_3d(full_run) -> None:
    """Intrinsics are the ones the predicted scale implies; keypoints_3d samples the pixel under each keypoint."""
    _, out, _ = full_run
    for name, (w, h, _) in IMAGES.items():
        frame = read_bundle(out / f"{name}.json")
        cam = frame.camera
        assert frame.pointmap_scale == pytest.approx(KNOWN_SCALE)
        assert cam["source"] == "pointmap"
        # the network input is the image resized to int(w·r) × int(h·r), r = min(768/w, 1024/h), then padded
        r = min(768 / w, 1024 / h)
        new_w, new_h = int(w * r), int(h * r)
        assert cam["fx"] == pytest.approx(768.0 / KNOWN_SCALE * w / new_w, rel=1e-6)
        assert cam["fy"] == pytest.approx(768.0 / KNOWN_SCALE * h / new_h, rel=1e-6)
        assert cam["fy"] == pytest.approx(cam["fx"], rel=0.02)
        assert (cam["cx"], cam["cy"]) == (w / 2, h / 2)
        person = frame.people[0]
        kp = person.keypoints
        inside = (kp[:, 0] >= 0) & (kp[:, 0] < w) & (kp[:, 1] >= 0) & (kp[:, 1] < h)
        cols = np.floor(kp[inside, 0]).astype(int)
        rows = np.floor(kp[inside, 1]).astype(int)
        sampled = frame.points[rows, cols]
        valid = sampled[:, 2] > 0
        np.testing.assert_allclose(person.keypoints_3d[inside][valid], sampled[valid], rtol=1e-6)
        assert np.isnan(person.keypoints_3d[inside][~valid]).all()
        assert np.isnan(person.keypoints_3d[~inside]).all()


def test_keypoints_json(full_run) -> None:
    _, out, _ = full_run
    doc = json.loads((out / "rgb.keypoints.json").read_text(encoding="utf-8"))
    assert doc["format"] == "sapiens2-keypoints" and len(doc["keypoint_names"]) == 308
    assert len(doc["people"][0]["keypoints"]) == 308 and doc["image"] == {
        "width": 160,
        "height": 120,
        "source": "rgb.png",
    }
    openpose = json.loads((out / "rgb.openpose.json").read_text(encoding="utf-8"))
    assert (openpose["canvas_width"], openpose["canvas_height"]) == (160, 120)
    person = openpose["people"][0]
    assert len(person["pose_keypoints_2d"]) == 18 * 3 and len(person["face_keypoints_2d"]) == 70 * 3
    assert len(person["hand_left_keypoints_2d"]) == 21 * 3
    nose = doc["people"][0]["keypoints"][0]  # OpenPose-18 index 0 is the nose (308-index 0)
    assert person["pose_keypoints_2d"][:2] == pytest.approx(nose[:2], abs=1e-3)


# ----------------------------------------------------------------------------------------------- bad input


def _predict(
    capsys, out: Path, inputs: list[str], checkpoints, tasks: str = "seg", *extra: str
) -> tuple[int, str]:
    argv = [
        "predict",
        *inputs,
        "--tasks",
        tasks,
        "--out",
        str(out),
        "--checkpoint-dir",
        str(checkpoints["home"]),
    ]
    rc = main([*argv, "--no-download", "--device", "cpu", *extra])
    return rc, capsys.readouterr().err


def test_empty_folder(tmp_path: Path, capsys, checkpoints) -> None:
    (tmp_path / "empty").mkdir()
    rc, err = _predict(capsys, tmp_path / "out", [str(tmp_path / "empty")], checkpoints)
    assert rc == 1 and "no images found in this folder" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_unreadable_image_is_skipped_with_a_clear_error(tmp_path: Path, capsys, checkpoints) -> None:
    _write_image(tmp_path / "good.png", 48, 40, "RGB")
    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 definitely not a jpeg")
    rc, err = _predict(
        capsys, tmp_path / "out", [str(tmp_path / "good.png"), str(tmp_path / "bad.jpg")], checkpoints
    )
    assert rc == 1
    assert "bad.jpg: cannot read image" in err
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == ["good.exr", "good.json", "good.seg.png"]


def test_unknown_task(tmp_path: Path, capsys, checkpoints) -> None:
    _write_image(tmp_path / "a.png", 32, 32, "RGB")
    rc, err = _predict(capsys, tmp_path / "out", [str(tmp_path / "a.png")], checkpoints, "seg,depth")
    assert (
        rc == 2 and "unknown task 'depth'" in err and "choose from pose, seg, normal, albedo, pointmap" in err
    )


def test_wrong_task_checkpoint(tmp_path: Path, capsys, checkpoints) -> None:
    _write_image(tmp_path / "a.png", 32, 32, "RGB")
    rc, err = _predict(
        capsys,
        tmp_path / "out",
        [str(tmp_path / "a.png")],
        checkpoints,
        "pose",
        "--checkpoint",
        f"pose={checkpoints['seg']}",
    )
    assert rc == 4 and "is a seg checkpoint, but a pose model is needed" in err  # EXIT_CHECKPOINT
    assert not (tmp_path / "out").exists()


def test_missing_checkpoint_no_download(tmp_path: Path, capsys) -> None:
    _write_image(tmp_path / "a.png", 32, 32, "RGB")
    rc, err = _predict(
        capsys, tmp_path / "out", [str(tmp_path / "a.png")], {"home": tmp_path / "nohome"}, "normal"
    )
    assert rc == 4  # EXIT_CHECKPOINT
    assert (
        "https://huggingface.co/facebook/sapiens2-normal-0.4b/resolve/main/sapiens2_0.4b_normal.safetensors"
        in err
    )
    assert str(tmp_path / "nohome" / "normal" / "sapiens2_0.4b_normal.safetensors") in err


def test_debug_shows_traceback(tmp_path: Path, checkpoints) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no images found"):
        main(["--debug", "predict", str(tmp_path / "empty"), "--tasks", "seg", "--out", str(tmp_path / "o")])


# ----------------------------------------------------------------------------------------- sequences, boxes


def test_sequence_with_index(tmp_path: Path, capsys, checkpoints) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    for n in (3, 1, 2):
        _write_image(frames / f"walk_{n:04d}.png", 48, 64, "RGB", seed=n)
    extra = ("--fps", "12", "--smooth", "--batch-size", "3", "--no-previews")
    rc, err = _predict(capsys, tmp_path / "out", [str(frames)], checkpoints, "pose,pointmap", *extra)
    assert rc == 0, err
    seq = read_sequence(tmp_path / "out" / "walk" / "walk.sequence.json")
    assert seq.fps == 12.0 and seq.frame_numbers == [1, 2, 3]
    loaded = list(seq)
    assert [f.frame for f in loaded] == [1, 2, 3]
    assert [f.source_name for f in loaded] == ["walk_0001.png", "walk_0002.png", "walk_0003.png"]
    assert [f.people[0].track_id for f in loaded] == [0, 0, 0]  # tracked across frames
    assert all(f.pointmap_scale == pytest.approx(KNOWN_SCALE) for f in loaded)


def test_sequence_smoother_filters_jitter_and_scale() -> None:
    from sapiens2_studio.core.pipeline.results import PersonPose, PointmapResult, PoseResult
    from sapiens2_studio.core.studio.compute.sequence_pass import SequenceSmoother

    rng = np.random.default_rng(0)
    smoother = SequenceSmoother(fps=30.0, scale_alpha=0.5)
    raw_scales = [1.0, 2.0, 2.0, 0.5]
    raw_kp, smooth_kp, scales, fxs = [], [], [], []
    for scale in raw_scales:
        kp = np.zeros((308, 3), np.float32)
        kp[:, :2] = 50.0 + rng.normal(0, 2.0, (308, 2))  # a still person with jitter
        kp[:, 2] = 0.9
        points = torch.full((4, 4, 3), 2.0 / scale)
        res = {
            "pose": PoseResult([PersonPose((10.0, 10.0, 90.0, 90.0), kp, "given")], (100, 100)),
            "pointmap": PointmapResult(points, scale, (100.0 / scale, 100.0 / scale, 2.0, 2.0)),
        }
        out = smoother.update(res)
        raw_kp.append(kp[:, :2])
        smooth_kp.append(out["pose"].people[0].keypoints[:, :2])
        scales.append(out["pointmap"].scale)
        fxs.append(out["pointmap"].intrinsics[0])
        assert out["pose"].people[0].track_id == 0
        # depth and focal length follow the smoothed scale (Z = Z_canonical / scale, fx ∝ 1 / scale)
        np.testing.assert_allclose(
            out["pointmap"].points.numpy()[..., 2], 2.0 / out["pointmap"].scale, rtol=1e-5
        )
    assert scales == pytest.approx([1.0, 1.5, 1.75, 1.125])  # EMA with alpha 0.5
    assert fxs == pytest.approx([100.0 / s for s in scales])
    assert np.std(np.diff(smooth_kp, axis=0)) < 0.5 * np.std(np.diff(raw_kp, axis=0))


def test_given_boxes(tmp_path: Path, capsys, checkpoints) -> None:
    _write_image(tmp_path / "a.png", 64, 48, "RGB")
    boxes = tmp_path / "boxes.json"
    boxes.write_text(json.dumps({"a.png": [[4, 6, 40, 44], [30, 2, 60, 46]]}), encoding="utf-8")
    rc, err = _predict(
        capsys, tmp_path / "out", [str(tmp_path / "a.png")], checkpoints, "pose", "--boxes", str(boxes)
    )
    assert rc == 0, err
    frame = read_bundle(tmp_path / "out" / "a.json")
    assert [p.bbox for p in frame.people] == [(4, 6, 40, 44), (30, 2, 60, 46)]
    assert {p.bbox_source for p in frame.people} == {"given"}
    assert frame.camera["source"] == "default" and frame.points is None
    bad = tmp_path / "bad_boxes.json"
    bad.write_text(json.dumps([[10, 10, 5, 5]]), encoding="utf-8")
    rc, err = _predict(
        capsys, tmp_path / "out2", [str(tmp_path / "a.png")], checkpoints, "pose", "--boxes", str(bad)
    )
    assert rc == 1 and "x2 > x1" in err


def test_info_and_module_entry_point(checkpoints, capsys) -> None:
    assert main(["info", str(checkpoints["pointmap"])]) == 0
    out = capsys.readouterr().out
    assert "Sapiens2 custom pointmap" in out and "embed_dim 32" in out
    proc = subprocess.run(
        [sys.executable, "-m", "sapiens2_studio.cli", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "predict" in proc.stdout


def test_pinhole_pointmap_reprojects_through_the_writer(tmp_path: Path) -> None:
    """A pointmap built from known intrinsics keeps its frame: each pixel's point projects back to its centre."""
    from sapiens2_studio.core.pipeline.results import PersonPose, PointmapResult, PoseResult, SegResult
    from sapiens2_studio.core.studio import TaskBatch, capture_frames
    from sapiens2_studio.core.studio.store.outputs import write_frame_outputs

    w, h = 72, 54
    fx, fy, cx, cy = 95.0, 97.0, w / 2, h / 2
    u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)  # pixel centres, corner origin
    z = 2.0 + 0.5 * np.sin(u / 9.0) * np.cos(v / 7.0)
    points = np.stack([(u - cx) * z / fx, (v - cy) * z / fy, z], axis=-1).astype(np.float32)
    labels = np.ones((h, w), np.int64)
    labels[:, :5] = 0  # background strip
    kp = np.zeros((308, 3), np.float32)
    kp[:, 0] = np.linspace(0.1, w - 0.1, 308)
    kp[:, 1] = np.linspace(h - 0.1, 0.1, 308)
    kp[:, 2] = 0.9
    results = {
        "pointmap": PointmapResult(torch.from_numpy(points), 0.8, (fx, fy, cx, cy)),
        "seg": SegResult(torch.from_numpy(labels)),
        "pose": PoseResult([PersonPose((0.0, 0.0, float(w), float(h)), kp, "image")], (w, h)),
    }
    image = np.zeros((h, w, 3), np.uint8)
    batches = {task: TaskBatch(task, [result]) for task, result in results.items()}
    frame = capture_frames([image], batches, source_names=["synthetic.png"])[0]
    back = read_bundle(write_frame_outputs(tmp_path, "pinhole", frame, image, mesh_format="ply"))
    header = (tmp_path / "pinhole.ply").read_bytes().split(b"end_header")[0].decode("ascii")
    assert f"element vertex {int((labels > 0).sum())}" in header  # one vertex per foreground pixel
    assert f"element face {2 * (h - 1) * (w - 6)}" in header  # smooth surface: every foreground quad kept
    cam = back.camera
    assert (cam["fx"], cam["fy"], cam["cx"], cam["cy"], cam["source"]) == (fx, fy, cx, cy, "pointmap")
    valid = back.points[..., 2] > 0
    np.testing.assert_array_equal(valid, labels > 0)
    P = back.points[valid]
    np.testing.assert_allclose(cam["fx"] * P[:, 0] / P[:, 2] + cam["cx"], u[valid], atol=1e-3)
    np.testing.assert_allclose(cam["fy"] * P[:, 1] / P[:, 2] + cam["cy"], v[valid], atol=1e-3)
    # keypoints_3d project into the pixel that contains the keypoint
    k3 = back.people[0].keypoints_3d
    ok = np.isfinite(k3).all(axis=1)
    assert ok.sum() > 250
    pu = cam["fx"] * k3[ok, 0] / k3[ok, 2] + cam["cx"]
    pv = cam["fy"] * k3[ok, 1] / k3[ok, 2] + cam["cy"]
    np.testing.assert_array_equal(np.floor(pu), np.floor(kp[ok, 0]))
    np.testing.assert_array_equal(np.floor(pv), np.floor(kp[ok, 1]))
    assert not ok[kp[:, 0] < 5].any()  # keypoints over the background have no 3D point


def test_video_input(tmp_path: Path, capsys, checkpoints) -> None:
    av = pytest.importorskip("av")
    video = tmp_path / "clip.mp4"
    with av.open(str(video), "w") as container:
        stream = container.add_stream("mpeg4", rate=12)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 40 * i, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    rc, err = _predict(capsys, tmp_path / "out", [str(video)], checkpoints, "seg", "--no-previews")
    assert rc == 0, err
    seq = read_sequence(tmp_path / "out" / "clip" / "clip.sequence.json")
    assert seq.fps == 12.0 and seq.frame_numbers == [1, 2, 3]
    first = seq.load(0)
    assert (first.width, first.height, first.source_name) == (64, 48, "clip.mp4")
    (tmp_path / "fake.mp4").write_bytes(b"not a video at all")
    rc, err = _predict(capsys, tmp_path / "out2", [str(tmp_path / "fake.mp4")], checkpoints, "seg")
    assert rc == 1 and "fake.mp4: cannot open video" in err
    assert not (tmp_path / "out2" / "fake").exists()


def test_usage_errors_before_any_work(tmp_path: Path, capsys, checkpoints, monkeypatch) -> None:
    _write_image(tmp_path / "a.png", 32, 32, "RGB")
    rc, err = _predict(
        capsys, tmp_path / "out", [str(tmp_path / "a.png")], checkpoints, "seg", "--mesh", "ply"
    )
    assert rc == 2 and "a mesh needs the pointmap task" in err
    rc, err = _predict(
        capsys, tmp_path / "out", [str(tmp_path / "a.png")], checkpoints, "seg", "--checkpoint", "seg"
    )
    assert rc == 2 and "--checkpoint expects TASK=PATH" in err
    monkeypatch.setitem(sys.modules, "OpenEXR", None)  # as if the optional package were not installed
    rc, err = _predict(capsys, tmp_path / "out", [str(tmp_path / "a.png")], checkpoints, "seg")
    assert rc == 1 and 'pip install "sapiens2-studio[exr]"' in err
    assert not (tmp_path / "out").exists()


def test_batch_size_auto_and_bad_value(tmp_path: Path, capsys, checkpoints) -> None:
    _write_image(tmp_path / "a.png", 64, 48, "RGB")
    out = tmp_path / "out"
    argv = ["predict", str(tmp_path / "a.png"), "--tasks", "seg", "--out", str(out), "--no-download"]
    argv += ["--checkpoint-dir", str(checkpoints["home"]), "--device", "cpu", "--batch-size", "auto"]
    assert main(argv) == 0
    assert read_bundle(out / "a.json").seg.shape == (48, 64)
    with pytest.raises(SystemExit):
        main([*argv[:-1], "lots"])
    assert "expected a number or 'auto'" in capsys.readouterr().err


def test_broken_frame_stops_only_its_sequence(tmp_path: Path, capsys, checkpoints) -> None:
    """A batch tool keeps going: the broken sequence gets no index, the next sequence is complete, exit 1."""
    for name in ("aaa", "bbb"):
        (tmp_path / name).mkdir()
        for n in (1, 2, 3):
            _write_image(tmp_path / name / f"{name}_{n:04d}.png", 24, 32, "RGB", seed=n)
    (tmp_path / "aaa" / "aaa_0002.png").write_bytes(b"not a png")
    inputs = [str(tmp_path / "aaa"), str(tmp_path / "bbb")]
    rc, err = _predict(capsys, tmp_path / "out", inputs, checkpoints, "seg", "--no-previews")
    assert rc == 1
    assert "aaa_0002.png: cannot read image" in err and "sequence 'aaa' stopped after 1 frame(s)" in err
    assert "wrote 4 result(s)" in err
    assert not (tmp_path / "out" / "aaa" / "aaa.sequence.json").exists()
    assert read_sequence(tmp_path / "out" / "bbb" / "bbb.sequence.json").frame_numbers == [1, 2, 3]


def test_rerun_of_other_tasks_keeps_them_and_clean_replaces_the_whole_set(
    tmp_path: Path, capsys, checkpoints
) -> None:
    """A re-run of some tasks keeps the others' results in each frame (one commit holds them all); --clean
    replaces each name's whole output set: no previews of tasks not run now, no extra frames."""
    _write_image(tmp_path / "photo.png", 24, 32, "RGB")
    (tmp_path / "walk").mkdir()
    for n in (1, 2, 3):
        _write_image(tmp_path / "walk" / f"walk_{n:04d}.png", 24, 32, "RGB", seed=n)
    out = tmp_path / "out"
    boxes = tmp_path / "boxes.json"
    boxes.write_text("[[0, 0, 24, 32]]", encoding="utf-8")  # one person per image keeps the test fast
    inputs = [str(tmp_path / "photo.png"), str(tmp_path / "walk")]
    rc, err = _predict(capsys, out, inputs, checkpoints, "seg,pose", "--boxes", str(boxes))
    assert rc == 0, err
    assert (out / "photo.pose.png").exists() and (out / "walk" / "walk_0003.json").exists()
    people = read_bundle(out / "photo.json").people
    (tmp_path / "walk" / "walk_0003.png").unlink()
    rc, err = _predict(capsys, out, inputs, checkpoints, "seg", "--no-previews")
    assert rc == 0, err
    kept = read_bundle(out / "photo.json")
    assert [m["task"] for m in kept.models] == ["seg", "pose"]
    np.testing.assert_array_equal(kept.people[0].keypoints, people[0].keypoints)
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [
        "photo.exr",
        "photo.json",
        "photo.keypoints.json",
        "photo.openpose.json",
    ]
    rc, err = _predict(capsys, out, inputs, checkpoints, "seg", "--no-previews", "--clean")
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == ["photo.exr", "photo.json"]
    names = sorted(p.name for p in (out / "walk").iterdir())
    assert names == [
        "walk.sequence.json",
        "walk_0001.exr",
        "walk_0001.json",
        "walk_0002.exr",
        "walk_0002.json",
    ]


def test_sequence_people_have_track_ids_without_smoothing(tmp_path: Path, capsys, checkpoints) -> None:
    (tmp_path / "run").mkdir()
    for n in (1, 2):
        _write_image(tmp_path / "run" / f"run_{n:04d}.png", 24, 32, "RGB", seed=n)
    rc, err = _predict(
        capsys, tmp_path / "out", [str(tmp_path / "run")], checkpoints, "pose", "--no-previews"
    )
    assert rc == 0, err
    frames = list(read_sequence(tmp_path / "out" / "run" / "run.sequence.json"))
    assert [f.people[0].track_id for f in frames] == [0, 0]


def test_boxes_file_formats_and_a_box_outside_one_image(tmp_path: Path, capsys, checkpoints) -> None:
    """{x, y, width, height} boxes and a bare single box are accepted; a box outside one image fails only
    that image, with its name, and the others are still processed."""
    _write_image(tmp_path / "small.png", 32, 24, "RGB")
    _write_image(tmp_path / "large.png", 96, 80, "RGB")
    boxes = tmp_path / "boxes.json"
    doc = {"large.png": {"x": 50, "y": 40, "width": 30, "height": 30}, "*": [60, 50, 90, 78]}
    boxes.write_text(json.dumps(doc), encoding="utf-8")
    inputs = [str(tmp_path / "small.png"), str(tmp_path / "large.png")]
    rc, err = _predict(capsys, tmp_path / "out", inputs, checkpoints, "pose", "--boxes", str(boxes))
    assert rc == 1
    assert "small.png: boxes file: box (60.0, 50.0, 90.0, 78.0) lies entirely outside the 32×24 image" in err
    assert not (tmp_path / "out" / "small.json").exists()
    assert [p.bbox for p in read_bundle(tmp_path / "out" / "large.json").people] == [(50, 40, 80, 70)]


def test_sequence_keeps_the_plate_frame_numbers(tmp_path: Path, capsys, checkpoints) -> None:
    """plate.1001.png … keep their numbers (and gaps), so the results line up with the plate in comp."""
    (tmp_path / "plate").mkdir()
    for n in (1001, 1002, 1004):
        _write_image(tmp_path / "plate" / f"plate.{n}.png", 24, 32, "RGB", seed=n)
    rc, err = _predict(
        capsys, tmp_path / "out", [str(tmp_path / "plate")], checkpoints, "seg", "--no-previews"
    )
    assert rc == 0, err
    seq = read_sequence(tmp_path / "out" / "plate" / "plate.sequence.json")
    assert seq.frame_numbers == [1001, 1002, 1004]
    assert [p.name for p in seq.json_paths] == ["plate_1001.json", "plate_1002.json", "plate_1004.json"]
    assert [f.source_name for f in seq] == ["plate.1001.png", "plate.1002.png", "plate.1004.png"]
