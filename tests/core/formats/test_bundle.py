"""Capture bundle v1: round trips, a second EXR reader, and bad input that must fail clearly."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

OpenEXR = pytest.importorskip("OpenEXR")

from sapiens2_studio.core.formats.bundle import (  # noqa: E402
    BundleError,
    CaptureFrame,
    LegacyNormalsWarning,
    read_bundle,
    sanitize_name,
    write_bundle,
)
from sapiens2_studio.core.formats.exr import linear_to_srgb, srgb_to_linear  # noqa: E402
from sapiens2_studio.core.formats.sequence import read_sequence, write_sequence  # noqa: E402

H, W = 24, 32


def _frame(seed: int = 0, with_points: bool = True) -> CaptureFrame:
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    z = rng.uniform(1.5, 3.0, (H, W)).astype(np.float32)
    fx, fy, cx, cy = 40.0, 42.0, W / 2, H / 2
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    points = np.stack([(u - cx) * z / fx, (v - cy) * z / fy, z], axis=-1).astype(np.float32)
    points[0, 0] = 0.0  # background
    normals = rng.normal(size=(H, W, 3)).astype(np.float32)
    normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
    keypoints = np.zeros((308, 3), np.float32)
    keypoints[:, 0] = rng.uniform(0, W, 308)
    keypoints[:, 1] = rng.uniform(0, H, 308)
    keypoints[:, 2] = rng.uniform(0, 1, 308)
    keypoints[0] = [0.2, 0.7, 0.9]  # pixel (0, 0): background -> keypoints_3d null
    keypoints[1] = [W + 3.0, 2.0, 0.5]  # outside the image -> null
    return CaptureFrame(
        width=W,
        height=H,
        image=image,
        points=points if with_points else None,
        normals=normals,
        albedo=rng.uniform(0, 1, (H, W, 3)).astype(np.float32),
        seg=rng.integers(0, 29, (H, W)),
        mask=(rng.uniform(0, 1, (H, W)) > 0.5).astype(np.float32),
        camera={"fx": fx, "fy": fy, "cx": cx, "cy": cy, "source": "pointmap"},
        people=[
            {"bbox": [1.0, 2.0, 30.0, 22.0], "bbox_source": "given", "keypoints": keypoints, "track_id": 7}
        ],
        models=[
            {
                "task": "pose",
                "size": "custom",
                "checkpoint": "/secret/dir/tiny.safetensors",
                "sha256": "ab" * 32,
            }
        ],
        pointmap_scale=0.85 if with_points else None,
        source_name="/home/user/photo.jpg",
    )


def test_round_trip_all_layers(tmp_path: Path) -> None:
    frame = _frame()
    json_path = write_bundle(tmp_path, "shot", frame)
    assert json_path == tmp_path / "shot.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shot.exr", "shot.json"]  # no temp files left
    back = read_bundle(json_path)
    assert (back.width, back.height) == (W, H)
    np.testing.assert_allclose(back.image, frame.image / 255.0, atol=2e-3)
    np.testing.assert_array_equal(back.points, frame.points)  # float32 is exact
    np.testing.assert_allclose(back.normals, frame.normals, atol=1e-3)  # half
    np.testing.assert_allclose(back.albedo, frame.albedo, atol=2e-3)
    np.testing.assert_array_equal(back.seg, frame.seg)
    np.testing.assert_array_equal(back.mask, frame.mask)
    assert back.camera == {
        "model": "pinhole",
        "fx": 40.0,
        "fy": 42.0,
        "cx": 16.0,
        "cy": 12.0,
        "source": "pointmap",
    }
    assert back.pointmap_scale == pytest.approx(0.85)
    assert back.source_name == "photo.jpg"  # no directories leak into the bundle
    assert back.models[0]["checkpoint"] == "tiny.safetensors"
    person = back.people[0]
    np.testing.assert_allclose(person.keypoints, frame.people[0]["keypoints"], rtol=1e-6)
    assert person.bbox == (1.0, 2.0, 30.0, 22.0) and person.bbox_source == "given" and person.track_id == 7
    # keypoints_3d: the point of the pixel containing each keypoint; null where background / outside
    kp3d = person.keypoints_3d
    assert kp3d.shape == (308, 3)
    assert np.isnan(kp3d[0]).all() and np.isnan(kp3d[1]).all()
    kp = frame.people[0]["keypoints"]
    cols, rows = np.floor(kp[2:, 0]).astype(int), np.floor(kp[2:, 1]).astype(int)
    np.testing.assert_allclose(kp3d[2:], frame.points[rows, cols], rtol=1e-6)


def test_json_matches_contract(tmp_path: Path) -> None:
    doc = json.loads(write_bundle(tmp_path, "c", _frame()).read_text(encoding="utf-8"))
    assert doc["format"] == "sapiens2-capture" and doc["version"] == "1.1"
    assert doc["exr"] == "c.exr" and doc["frame"] is None
    assert doc["layers"] == ["rgba", "depth", "P", "N", "albedo", "segmentation", "person_mask"]
    assert doc["conventions"]["camera_frame"] == "opencv" and doc["conventions"]["units"] == "meters"
    assert len(doc["keypoint_names"]) == 308 and len(doc["skeleton"]) == 65 and len(doc["seg_classes"]) == 29
    assert doc["seg_classes"][0] == {"id": 0, "name": "Background", "color_rgb": [50, 50, 50]}
    person = doc["people"][0]
    assert len(person["keypoints"]) == 308 and len(person["keypoints_3d"]) == 308
    assert person["keypoints_3d"][0] is None and person["id"] == 0


def test_second_reader_openexr_api(tmp_path: Path) -> None:
    """Read the EXR with OpenEXR's own API: channel names, pixel types, row order and colour encoding."""
    from sapiens2_studio.core.formats import bundle as bundle_mod

    frame = _frame()
    write_bundle(tmp_path, "shot", frame)
    with OpenEXR.File(str(tmp_path / "shot.exr"), separate_channels=True) as exr:
        header = dict(exr.header())  # must be read while the file is open
        channels = {name: np.array(ch.pixels) for name, ch in exr.channels().items()}
    assert header["compression"] == OpenEXR.ZIP_COMPRESSION
    assert header["type"] == OpenEXR.scanlineimage
    assert header["sapiens2Capture"] == "1.1"
    expected = {
        "R", "G", "B", "A", "Z", "P.X", "P.Y", "P.Z", "P.A", "N.X", "N.Y", "N.Z", "albedo.R", "albedo.G",
        "albedo.B", "seg.id", "mask.A",
    }  # fmt: skip
    assert set(channels) == expected
    assert channels["P.X"].dtype == np.float32 and channels["seg.id"].dtype == np.float32
    assert channels["Z"].dtype == np.float32 and channels["P.A"].dtype == np.float16
    assert channels["N.Z"].dtype == np.float16 and channels["R"].dtype == np.float16
    for layer, names in bundle_mod._LAYER_CHANNELS.items():  # every layer as the one encoding table says
        names = [n for n in names if n != "P.A"]  # P's validity channel is stored like a mask
        if all(n in channels for n in names):
            assert {channels[n].dtype for n in names} == {
                np.dtype(bundle_mod.LAYER_ENCODING.pixel_types[layer])
            }
    for i, axis in enumerate("XYZ"):  # catches non-contiguous views written as raw memory
        np.testing.assert_array_equal(channels[f"P.{axis}"], frame.points[..., i])
    # depth = P.Z; pixels without a point (here the background pixel (0, 0)) are 0 in P and Z and 0 in P.A
    np.testing.assert_array_equal(channels["Z"], frame.points[..., 2])
    valid = frame.points[..., 2] > 0
    assert not valid[0, 0] and valid.sum() == H * W - 1
    np.testing.assert_array_equal(channels["P.A"], valid.astype(np.float16))
    np.testing.assert_array_equal(channels["seg.id"], frame.seg)
    np.testing.assert_array_equal(channels["mask.A"], frame.mask)
    # row 0 = top row; R is scene-linear
    expected_r = srgb_to_linear(frame.image[..., 0] / 255.0)
    np.testing.assert_allclose(channels["R"].astype(np.float32), expected_r, atol=1e-3)
    np.testing.assert_array_equal(channels["A"], 1)


def test_srgb_transfer_round_trip() -> None:
    x = np.linspace(0, 1, 1001, dtype=np.float32)
    np.testing.assert_allclose(linear_to_srgb(srgb_to_linear(x)), x, atol=1e-6)
    assert srgb_to_linear(np.float32(0.5)) == pytest.approx(0.21404, abs=1e-4)


def test_subset_of_layers_and_default_camera(tmp_path: Path) -> None:
    frame = CaptureFrame(width=W, height=H, seg=np.zeros((H, W), np.int64), people=[])
    back = read_bundle(write_bundle(tmp_path, "seg_only", frame))
    assert back.image is None and back.points is None and back.seg is not None
    assert back.camera["source"] == "default" and back.camera["fx"] == pytest.approx(1.2 * W)
    assert back.camera["cx"] == W / 2 and back.camera["cy"] == H / 2
    # no pointmap -> no keypoints_3d key at all
    frame2 = _frame(with_points=False)
    doc = json.loads(write_bundle(tmp_path, "nop", frame2).read_text(encoding="utf-8"))
    assert "keypoints_3d" not in doc["people"][0]


def test_sequence_round_trip(tmp_path: Path) -> None:
    index = write_sequence(tmp_path, "walk", [_frame(0), _frame(1), _frame(2)], fps=30.0)
    assert index.name == "walk.sequence.json"
    assert (tmp_path / "walk_0003.exr").is_file()
    seq = read_sequence(index)
    assert seq.fps == 30.0 and seq.frame_numbers == [1, 2, 3] and len(seq) == 3
    frames = list(seq)
    assert [f.frame for f in frames] == [1, 2, 3]
    np.testing.assert_array_equal(frames[2].seg, _frame(2).seg)


def test_sanitize_name_blocks_traversal(tmp_path: Path) -> None:
    assert sanitize_name("../../etc/passwd") == "passwd"
    assert (
        sanitize_name("..\\..\\evil name") == "evil name"
    )  # a space is safe in a path: kept (was evil_name)
    assert sanitize_name(".hidden") == "hidden"
    assert sanitize_name("shot #1 50%") == "shot _1 50_"  # frame-pattern characters of Nuke and printf
    assert sanitize_name("a:b*c?.") == "a_b_c_"  # what Windows forbids, and no trailing dot
    with pytest.raises(ValueError, match="no usable characters"):
        sanitize_name("../..")
    path = write_bundle(tmp_path / "out", "../escape", _frame())
    assert path.parent == tmp_path / "out" and not (tmp_path / "escape.json").exists()


# ------------------------------------------------------------------------------------------ bad input


def test_newer_major_version_refused_newer_minor_accepted(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "v", _frame())
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["version"] = "1.7"
    doc["new_optional_field"] = {"x": 1}
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert read_bundle(path).version == "1.7"
    doc["version"] = "2.0"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BundleError, match=r"version 2\.0 was written by a newer"):
        read_bundle(path)


def test_corrupt_exr(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "c", _frame())
    exr = tmp_path / "c.exr"
    exr.write_bytes(exr.read_bytes()[:200])
    with pytest.raises(BundleError, match=r"c\.exr: not a readable OpenEXR file"):
        read_bundle(path)


def test_missing_exr(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "m", _frame())
    (tmp_path / "m.exr").unlink()
    with pytest.raises(BundleError, match=r"EXR file 'm\.exr' is missing"):
        read_bundle(path)


def test_bad_json_and_wrong_format(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(BundleError, match=r"bad\.json: not valid JSON"):
        read_bundle(bad)
    bad.write_text(json.dumps({"format": "something-else", "version": "1.0"}), encoding="utf-8")
    with pytest.raises(BundleError, match="expected 'sapiens2-capture'"):
        read_bundle(bad)
    with pytest.raises(BundleError, match="not found"):
        read_bundle(tmp_path / "absent.json")


def test_listed_layer_missing_in_exr(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "l", CaptureFrame(width=W, height=H, seg=np.zeros((H, W), np.int64)))
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["layers"].append("P")
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BundleError, match=r"layer 'P' is listed .* missing"):
        read_bundle(path)


def test_exr_reference_cannot_escape_folder(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "e", _frame())
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["exr"] = "../e.exr"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BundleError, match="plain file name"):
        read_bundle(path)


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    frame = _frame()
    frame.normals = np.zeros((H + 1, W, 3), np.float32)  # wrong shape
    with pytest.raises(ValueError, match=r"normals has shape"):
        write_bundle(tmp_path, "broken", frame)
    assert list(tmp_path.iterdir()) == []


def test_failed_exr_write_leaves_no_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sapiens2_studio.core.formats import bundle as bundle_mod

    def failing_write(path, *args, **options):
        Path(path).write_bytes(b"half")  # simulate a crash after a partial write
        raise OSError("disk full")

    monkeypatch.setattr(bundle_mod, "write_exr_bands", failing_write)
    with pytest.raises(OSError, match="disk full"):
        write_bundle(tmp_path, "crash", _frame())
    assert list(tmp_path.iterdir()) == []


def test_no_nan_reaches_the_exr(tmp_path: Path) -> None:
    """NaN or inf in a float image, albedo, normals, points or mask is written as a finite value (NaN smears in
    Nuke); non-finite normals and points as 0 (invalid, as the non-finite note says), without a cast warning."""
    h, w = 6, 5
    image = np.full((h, w, 3), 0.5, np.float32)
    image[0, 0] = np.nan
    albedo = image.copy()
    mask = np.ones((h, w), np.float32)
    mask[1, 1] = np.nan
    normals = np.zeros((h, w, 3), np.float32)
    normals[..., 2] = -1.0
    normals[2, 2] = np.nan
    normals[2, 3, 0] = np.inf
    normals[4, 1, 1] = -np.inf
    image[0, 1] = np.inf
    mask[1, 2] = np.inf
    points = np.ones((h, w, 3), np.float32)
    points[3, 3] = np.nan
    points[3, 4, 0] = np.inf
    frame = CaptureFrame(w, h, image=image, albedo=albedo, mask=mask, normals=normals, points=points)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # e.g. "overflow encountered in cast" to half
        write_bundle(tmp_path, "nan", frame)
    with OpenEXR.File(str(tmp_path / "nan.exr"), separate_channels=True) as exr:
        channels = {name: np.asarray(channel.pixels) for name, channel in exr.channels().items()}
    for name, pixels in channels.items():
        assert np.isfinite(pixels).all(), name
    for axis in "XYZ":
        assert channels[f"N.{axis}"][2, 3] == 0 and channels[f"N.{axis}"][4, 1] == 0
        assert channels[f"P.{axis}"][3, 4] == 0


# ------------------------------------------------------------------------------------------ versions 1.0 / 1.1


def _as_version_1_0(path: Path) -> None:
    """Relabel a written bundle as version 1.0 (what earlier writers produced, apart from the normals)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["version"] = "1.0"
    path.write_text(json.dumps(doc), encoding="utf-8")


def _legacy_frame(seed: int = 0) -> tuple[CaptureFrame, np.ndarray]:
    """A frame holding what a 1.0 writer stored (the model's OpenGL-frame normals), and the OpenCV truth."""
    frame = _frame(seed)
    truth = frame.normals.astype(np.float16).astype(np.float32)  # the EXR keeps normals as half floats
    frame.normals = frame.normals * np.array([1.0, -1.0, -1.0], np.float32)
    return frame, truth


def _with_1_0_channels(path: Path) -> None:
    """Rewrite a bundle's EXR with the channels a 1.0 writer made: bare `seg` and `mask`, no `Z`, no `P.A`."""
    from sapiens2_studio.core.formats.exr import read_exr, write_exr

    exr = path.with_suffix(".exr")
    channels, _ = read_exr(exr)
    renamed = {
        {"seg.id": "seg", "mask.A": "mask"}.get(k, k): v for k, v in channels.items() if k not in ("Z", "P.A")
    }
    write_exr(exr, renamed, {"sapiens2Capture": "1.0"})
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["layers"] = [layer for layer in doc["layers"] if layer != "depth"]
    path.write_text(json.dumps(doc), encoding="utf-8")


def test_version_1_0_channel_names_are_read(tmp_path: Path) -> None:
    frame = _frame()
    new = read_bundle(write_bundle(tmp_path, "new", frame))
    old_path = write_bundle(tmp_path, "old", frame)
    _with_1_0_channels(old_path)
    _as_version_1_0(old_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacyNormalsWarning)
        old = read_bundle(old_path)
    for name in ("points", "seg", "mask", "image", "albedo"):
        np.testing.assert_array_equal(getattr(old, name), getattr(new, name))


def test_version_1_1_declares_opencv_normals_and_reads_them_unchanged(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "new", _frame())
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["version"] == "1.1" and doc["conventions"]["normals_frame"] == "opencv" and "checks" not in doc
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = read_bundle(path)
    assert back.notes == [] and back.checks is None
    np.testing.assert_array_equal(back.normals, _frame().normals.astype(np.float16).astype(np.float32))


def test_version_1_0_normals_are_converted_with_one_warning(tmp_path: Path) -> None:
    frame, truth = _legacy_frame()
    path = write_bundle(tmp_path, "old", frame)
    _as_version_1_0(path)
    with pytest.warns(
        LegacyNormalsWarning, match=r"old\.json: capture bundle version 1\.0 .*\(y and z negated\)"
    ):
        back = read_bundle(path)
    np.testing.assert_array_equal(back.normals, truth)
    assert (
        back.version == "1.0"
        and len(back.notes) == 1
        and "Re-export it to write version 1.1" in back.notes[0]
    )
    np.testing.assert_array_equal(back.points, frame.points)  # nothing else changes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = read_bundle(path, warn=False)
    assert quiet.notes == back.notes
    no_normals = write_bundle(tmp_path, "old_points", CaptureFrame(W, H, points=frame.points))
    _as_version_1_0(no_normals)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_bundle(no_normals).notes == []  # nothing to convert, nothing to say


def test_a_1_0_sequence_warns_once_and_converts_every_frame(tmp_path: Path) -> None:
    pairs = [_legacy_frame(seed) for seed in range(3)]
    index = write_sequence(tmp_path, "old", [f for f, _ in pairs])
    for path in sorted(tmp_path.glob("old_*.json")):
        _as_version_1_0(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # so only the reader's own bookkeeping can make it "once"
        frames = list(read_sequence(index))
    assert [type(w.message) for w in caught] == [LegacyNormalsWarning]
    for frame, (_, truth) in zip(frames, pairs):
        np.testing.assert_array_equal(frame.normals, truth)
        assert len(frame.notes) == 1


def test_a_1_1_bundle_in_another_normal_frame_is_refused(tmp_path: Path) -> None:
    path = write_bundle(tmp_path, "gl", _frame())
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["conventions"]["normals_frame"] = "opengl"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(
        BundleError, match=r"normals_frame is 'opengl'; version 1\.x bundles store normals in 'opencv'"
    ):
        read_bundle(path)


def test_checks_round_trip_and_bad_checks(tmp_path: Path) -> None:
    from sapiens2_studio.core.studio.compute.geometry_checks import GeometryReport, check_geometry

    frame = _frame()
    report = check_geometry(normals=frame.normals, pointmap=frame.points)
    frame.checks = report
    path = write_bundle(tmp_path, "checked", frame)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["checks"] == report.to_dict()
    back = read_bundle(path)
    assert GeometryReport.from_dict(back.checks) == report
    frame.checks = {"custom": [1, 2]}
    assert read_bundle(write_bundle(tmp_path, "plain", frame)).checks == {"custom": [1, 2]}
    frame.checks = {"bad": float("nan")}
    with pytest.raises(BundleError, match=r"CaptureFrame\.checks is not JSON data"):
        write_bundle(tmp_path, "nan", frame)
    frame.checks = [1, 2]
    with pytest.raises(BundleError, match="must be a mapping or have to_dict"):
        write_bundle(tmp_path, "list", frame)
    doc["checks"] = "fine"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(BundleError, match="'checks' must be a JSON object"):
        read_bundle(path)


@pytest.mark.parametrize("band_rows", [1, 7, 16, 10_000])
def test_the_exr_does_not_depend_on_the_band_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, band_rows
) -> None:
    """The EXR is computed and written in row bands (bounded memory on huge photos); any band size gives the
    bytes of the whole-frame write, for every layer (matte, float colour and non-finite values included)."""
    from sapiens2_studio.core.formats import bundle as bundle_mod

    frame = _frame(seed=4)
    frame.alpha = np.random.default_rng(1).uniform(-0.2, 1.2, (H, W)).astype(np.float32)
    frame.foreground = np.random.default_rng(2).uniform(0, 1, (H, W, 3)).astype(np.float32)
    frame.normals[3, 4] = np.nan
    frame.points[5, 6] = [np.inf, 0.0, 1.0]
    frame.mask[1, 1] = np.nan
    monkeypatch.setattr(bundle_mod, "EXR_BAND_ROWS", 1 << 20)
    write_bundle(tmp_path / "whole", "f", frame)
    monkeypatch.setattr(bundle_mod, "EXR_BAND_ROWS", band_rows)
    write_bundle(tmp_path / "bands", "f", frame)
    assert (tmp_path / "bands" / "f.exr").read_bytes() == (tmp_path / "whole" / "f.exr").read_bytes()
    back = read_bundle(tmp_path / "bands" / "f.json")
    assert np.isfinite(back.normals).all() and back.alpha is not None


def test_canonical_points_equal_stored_points_and_never_write_into_shared_memory() -> None:
    """canonical_points (the job's bounded-memory form) gives stored_points' values bit for bit; it reuses an
    array the caller owns and leaves views of other memory (a model's result tensor) alone."""
    import torch
    from sapiens2_studio.core.formats.bundle import canonical_points, stored_points

    rng = np.random.default_rng(9)
    points = rng.normal(size=(700, 5, 3)).astype(np.float32)
    points[3, 1] = [np.nan, 1.0, 1.0]
    points[600, 2] = [1.0, np.inf, 2.0]
    points[650, 4] = [-0.0, 0.5, -0.0]  # behind the camera
    expected = stored_points(points)[0]
    owned = points.copy()
    assert canonical_points(owned) is owned and owned.tobytes() == expected.tobytes()
    tensor = torch.from_numpy(points.copy())
    before = tensor.clone()
    shared = tensor.numpy()
    result = canonical_points(shared)
    assert result is not shared and result.tobytes() == expected.tobytes()
    assert torch.equal(tensor.nan_to_num(), before.nan_to_num())  # the tensor is unchanged
    assert canonical_points(points[:, :, :].astype(np.float64)).tobytes() == expected.tobytes()


def test_all_finite_is_isfinite_all_over_the_last_axis() -> None:
    from sapiens2_studio.core.formats.arrays import all_finite

    rng = np.random.default_rng(3)
    for shape in [(40, 30, 3), (7, 1), (5, 4, 2), (3, 0)]:
        values = rng.normal(size=shape).astype(np.float32)
        values.flat[::7] = np.nan
        values.flat[3::11] = np.inf
        assert np.array_equal(all_finite(values), np.isfinite(values).all(axis=-1)), shape
