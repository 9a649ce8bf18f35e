"""Non-finite model output, the pointmap camera fallback, the folder lock and the size estimate (issue #11)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import save_file

pytest.importorskip("OpenEXR")
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.formats.bundle import BundleError, read_bundle
from sapiens2_studio.core.formats.sequence import read_sequence, write_sequence
from sapiens2_studio.core.studio import OutputError, Studio
from sapiens2_studio.core.studio.jobs.preflight import check_output_folder, estimate_frame_bytes
from sapiens2_studio.core.studio.sources.inputs import collect_inputs
from sapiens2_studio.core.studio.store.lock import LOCK_NAME, OutputLock
from sapiens2_studio.core.testing.synthetic import synthetic_state_dict, write_constant_output_checkpoint


def _strict(text: str):
    """json.loads that refuses NaN/Infinity, as strict JSON parsers (browsers, jq, serde) do."""

    def refuse(constant: str):
        raise ValueError(f"invalid JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def nan_home(tmp_path_factory) -> Path:
    """Official-layout seg and pose files with one NaN weight in the backbone (it reaches every output)."""
    home = tmp_path_factory.mktemp("nan_home")
    for task in ("seg", "pose"):
        state = synthetic_state_dict(task)
        state["backbone.blocks.1.ffn.w3.weight"][0, 0] = float("nan")
        (home / task).mkdir()
        save_file(state, str(home / task / f"sapiens2_0.4b_{task}.safetensors"))
    return home


def _image(path: Path, width: int = 24, height: int = 32) -> Path:
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    return path


def _run(capsys, image: Path, out: Path, home: Path, tasks: str, *extra: str) -> tuple[int, str]:
    argv = ["predict", str(image), "--tasks", tasks, "--out", str(out), "--checkpoint-dir", str(home)]
    rc = main([*argv, "--no-download", "--device", "cpu", "--no-flip-test", *extra])
    return rc, capsys.readouterr().err


def test_nan_weights_give_valid_json_everywhere_and_a_note(tmp_path, capsys, nan_home):
    image = _image(tmp_path / "photo.png")
    rc, err = _run(capsys, image, tmp_path / "out", nan_home, "seg,pose")
    assert rc == 0, err
    assert "photo.png: the seg model's output holds NaN/inf values" in err
    assert "photo.png: the pose model's output holds NaN/inf values" in err
    docs = {p.name: _strict(p.read_text(encoding="utf-8")) for p in (tmp_path / "out").glob("*.json")}
    assert set(docs) == {"photo.json", "photo.keypoints.json", "photo.openpose.json"}
    assert all(row[2] is None for row in docs["photo.keypoints.json"]["people"][0]["keypoints"])
    assert all(row[2] is None for row in docs["photo.json"]["people"][0]["keypoints"])
    body = docs["photo.openpose.json"]["people"][0]["pose_keypoints_2d"]
    assert all(np.isfinite(body)) and body[2::3] == [0.0] * (len(body) // 3)  # confidence 0: "not detected"
    assert read_bundle(tmp_path / "out" / "photo.json").people[0].keypoints.shape == (308, 3)


def test_nonfinite_error_refuses_the_frame(tmp_path, capsys, nan_home):
    image = _image(tmp_path / "photo.png")
    rc, err = _run(capsys, image, tmp_path / "out", nan_home, "seg,pose", "--nonfinite", "error")
    assert rc == 1
    assert "error: photo.png: the seg, pose output holds NaN/inf values, so it was not written" in err
    assert not (tmp_path / "out").exists()  # nothing committed: the folder the run made is gone again


def test_non_positive_pointmap_scale_falls_back_the_same_in_the_api_and_the_cli(tmp_path, capsys):
    """A scale ≤ 0 gives no focal length: both front-ends use the default camera rule with the image centre and
    say why (the API's `intrinsics_source`, the bundle's `camera.reason`, a note)."""
    home = tmp_path / "home"
    write_constant_output_checkpoint(
        home / "pointmap" / "sapiens2_0.4b_pointmap.safetensors", "pointmap", (0.1, 0.2, 0.9), scale=-0.5
    )
    image = _image(tmp_path / "photo.png", 40, 30)
    width, height = 40, 30
    default = (1.2 * max(width, height), 1.2 * max(width, height), width / 2, height / 2)
    studio = Studio(device="cpu", checkpoint_dir=home, allow_download=False)
    pixels = np.asarray(Image.open(image))
    result = studio.predict([pixels], tasks=("pointmap",))["pointmap"][0]
    assert result.scale == pytest.approx(-0.5)
    assert result.intrinsics == pytest.approx(default)
    assert result.intrinsics_source == "default (pointmap scale ≤ 0)"
    api_camera = studio.capture([pixels], studio.predict([pixels], tasks=("pointmap",)))[0].camera
    rc, err = _run(capsys, image, tmp_path / "out", home, "pointmap")
    assert rc == 0, err
    assert "the pointmap model predicted scale -0.5, which gives no focal length" in err
    cli_camera = read_bundle(tmp_path / "out" / "photo.json").camera
    assert cli_camera == {**api_camera, "model": "pinhole"}
    assert (cli_camera["fx"], cli_camera["fy"], cli_camera["cx"], cli_camera["cy"]) == pytest.approx(default)
    assert (cli_camera["source"], cli_camera["reason"]) == ("default", "pointmap scale ≤ 0")


# ---------------------------------------------------------------------------------------------------- the lock


def test_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    first = OutputLock(tmp_path, "run-a")
    assert first.acquire() is None
    try:
        with pytest.raises(OutputError) as info:
            OutputLock(tmp_path, "run-b").acquire()
        assert (
            f"is in use by run run-a (pid {os.getpid()} on host {socket.gethostname()}" in info.value.message
        )
        assert f"delete {tmp_path / LOCK_NAME}" in info.value.message
    finally:
        first.release()
    assert not (tmp_path / LOCK_NAME).exists()
    second = OutputLock(tmp_path, "run-b")
    assert second.acquire() is None  # free again after a release
    second.release()


def test_a_crashed_holders_lock_is_recovered_but_not_another_machines(tmp_path):
    """The file a killed run leaves (nobody holds its flock) is taken over with a note; one naming another host
    is refused, since a network file system may not share flocks."""
    stale = {
        "pid": 2**22 + 17,
        "host": socket.gethostname(),
        "run": "dead-run",
        "started": "2025-01-01T00:00:00Z",
    }
    (tmp_path / LOCK_NAME).write_text(json.dumps(stale), encoding="utf-8")
    lock = OutputLock(tmp_path, "run-new")
    note = lock.acquire()
    assert note is not None and "recovered the lock of run dead-run" in note and "no longer running" in note
    assert json.loads((tmp_path / LOCK_NAME).read_text())["run"] == "run-new"
    lock.release()
    (tmp_path / LOCK_NAME).write_text(json.dumps({**stale, "host": "render-node-7"}), encoding="utf-8")
    with pytest.raises(OutputError, match=r"on host render-node-7.*on another machine"):
        OutputLock(tmp_path, "run-new").acquire()


# -------------------------------------------------------------------------------------------- estimate, readers


def test_size_estimate_formula_and_replaced_files(tmp_path):
    rows = 16 * 50  # the EXR's chunks: header and offset, at most one per row
    pixels = 100 * 50
    exact = pixels * (8 + 4 + 2) + rows + 4096 + (14 << 10) + 2 * 2048  # uncompressed: rgba, seg id, mask
    assert estimate_frame_bytes(100, 50, ("seg",), previews=False, compression="none") == exact
    full = estimate_frame_bytes(100, 50, ("pose", "seg", "normal", "pointmap"), previews=True, mesh="glb")
    exr = pixels * (4.0 + 0.9 + 0.1 + 5.9 + 10.5)  # zip: rgba, seg, mask, normal, pointmap
    json = (14 << 10) + (18 << 10) + (19 << 10) + (7 << 10)  # bundle + a person, keypoints, openpose
    pngs = pixels * (1.9 + 0.7 + 3.05 + 1.8)  # pose, seg, normal, depth previews
    files = 2 + 2 + 1 + 4
    assert full == int(exr + rows + 4096 + json + pngs + pixels * 60 + 2048 * files)
    _image(tmp_path / "a.png", 100, 50)
    jobs = collect_inputs([str(tmp_path / "a.png")])
    out = tmp_path / "out"
    fresh = check_output_folder(out, jobs, ("seg",), previews=False)
    out.mkdir()
    (out / "a.exr").write_bytes(b"\0" * 5000)  # an earlier result the run will replace frees its space,
    again = check_output_folder(out, jobs, ("seg",), previews=False)
    frame = estimate_frame_bytes(100, 50, ("seg",), previews=False)  # but its new files sit beside it first
    assert again.needed_bytes - fresh.needed_bytes == frame - 5000


def test_read_sequence_refuses_frames_of_different_runs(tmp_path):
    from sapiens2_studio.core.formats.bundle import CaptureFrame

    frames = [CaptureFrame(width=4, height=3, image=np.zeros((3, 4, 3), np.uint8)) for _ in range(3)]
    write_sequence(tmp_path / "first", "clip", frames)
    index = write_sequence(tmp_path, "clip", frames)  # the same frames again: stamped with the new run
    assert read_sequence(index).run is not None
    second = tmp_path / "clip_0002.json"
    doc = json.loads(second.read_text(encoding="utf-8"))
    doc["run"]["id"] = "another-run"
    second.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(
        BundleError, match=r"frames come from different runs .*clip_0002\.json from run another-run"
    ):
        read_sequence(index)
    for path in tmp_path.glob("clip*.json"):  # files that name no run (version 1.0) are not refused for it
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc.pop("run", None)
        path.write_text(json.dumps(doc), encoding="utf-8")
    assert len(read_sequence(index)) == 3


def test_seg_counts_nonfinite_logits():
    """Labels cannot show NaN (argmax picks a class anyway), so the seg result carries the count."""
    from sapiens2_studio.core import load_model
    from sapiens2_studio.core.pipeline import predict_seg

    state = synthetic_state_dict("seg")
    state["backbone.blocks.0.ffn.w3.weight"][0, 0] = float("nan")
    model = load_model({k: v for k, v in state.items()})
    result = predict_seg(model, [np.zeros((8, 6, 3), np.uint8)])[0]
    assert result.nonfinite > 0
    clean = load_model(synthetic_state_dict("seg"))
    assert predict_seg(clean, [np.zeros((8, 6, 3), np.uint8)])[0].nonfinite == 0
    assert torch.is_tensor(result.labels)


def test_a_file_where_a_sequence_folder_goes_is_named_before_any_work(tmp_path, capsys, nan_home):
    """Was `[Errno 17] File exists` after the models ran; now one line naming the file, nothing written."""
    for n in (1, 2):
        _image(tmp_path / f"walk_{n:04d}.png")
    out = tmp_path / "out"
    out.mkdir()
    (out / "walk").write_text("a file, not a folder")
    rc, err = _run(capsys, tmp_path / "walk_0001.png", out, nan_home, "seg")
    assert rc == 0  # a single numbered image is no sequence
    rc, err = _run(capsys, tmp_path, out, nan_home, "seg")
    assert rc == 1 and f"{out / 'walk'} is a file, but the sequence 'walk' needs a folder of that name" in err
    assert "Errno" not in err
    assert sorted(p.name for p in out.iterdir()) == [
        "walk",
        "walk_0001.exr",
        "walk_0001.json",
        "walk_0001.seg.png",
    ]
