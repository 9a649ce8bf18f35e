"""Layers of tasks the bundle format does not name (plug-in tasks): written as `<layer>.<channel>` EXR channels in
the declared pixel type, declared in the JSON's `task_layers`, skipped by readers that do not know them, and read
back into `frame.extra` (issue 27). Real EXR files, read with our reader, the `openexr` binding and OpenImageIO."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

OpenEXR = pytest.importorskip("OpenEXR")

from sapiens2_studio.core.formats.bundle import BundleError, CaptureFrame, read_bundle, write_bundle  # noqa: E402
from sapiens2_studio.core.formats.exr import read_exr  # noqa: E402
from sapiens2_studio.core.formats.task_layers import TaskLayer  # noqa: E402

H, W = 20, 28
CLASSES = ({"id": 0, "name": "background"}, {"id": 1, "name": "shirt"}, {"id": 2, "name": "trousers"})


def _known(seed: int = 0) -> CaptureFrame:
    rng = np.random.default_rng(seed)
    z = rng.uniform(1.5, 3.0, (H, W)).astype(np.float32)
    return CaptureFrame(
        width=W,
        height=H,
        image=rng.integers(0, 256, (H, W, 3), dtype=np.uint8),
        points=np.stack([z * 0.1, z * 0.2, z], axis=-1),
        seg=rng.integers(0, 29, (H, W)),
        camera={"fx": 30.0, "fy": 30.0, "cx": W / 2, "cy": H / 2, "source": "user"},
    )


def _with_garment(frame: CaptureFrame, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 3, (H, W))
    prob = rng.uniform(0, 1, (H, W)).astype(np.float32)
    frame.task_layers["garment"] = TaskLayer(
        task="garment", channels=("id",), pixel_type="float", meaning="class_id", classes=CLASSES
    )
    frame.extra["garment"] = {"id": ids}
    frame.extra["garment_conf"] = {"prob": prob}
    frame.task_layers["garment_conf"] = TaskLayer(
        task="garment",
        channels=("prob",),
        pixel_type="half",
        meaning="probability",
        description="softmax max",
    )
    return ids, prob


def test_round_trip_and_declaration(tmp_path: Path) -> None:
    frame = _known()
    ids, prob = _with_garment(frame)
    prob[0, 0], prob[0, 1] = np.nan, np.inf  # stored finite: compositors spread NaN
    json_path = write_bundle(tmp_path, "shot", frame)
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    assert doc["layers"] == ["rgba", "depth", "P", "segmentation"]  # task layers never listed there
    assert doc["task_layers"] == {
        "garment": {
            "task": "garment",
            "channels": ["id"],
            "pixel_type": "float",
            "meaning": "class_id",
            "classes": [dict(c) for c in CLASSES],
        },
        "garment_conf": {
            "task": "garment",
            "channels": ["prob"],
            "pixel_type": "half",
            "meaning": "probability",
            "description": "softmax max",
        },
    }
    back = read_bundle(json_path)
    assert set(back.extra) == {"garment", "garment_conf"}
    assert back.extra["garment"]["id"].dtype == np.int64
    np.testing.assert_array_equal(back.extra["garment"]["id"], ids)
    expected = np.nan_to_num(prob, nan=0.0, posinf=0.0).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(back.extra["garment_conf"]["prob"], expected)
    assert back.task_layers["garment"].classes == CLASSES
    assert back.task_layers["garment_conf"].meaning == "probability"
    # the known layers are untouched
    np.testing.assert_array_equal(back.seg, frame.seg)

    # the same file again from what was read: byte-identical (a task layer survives a read-write cycle)
    again = write_bundle(tmp_path / "again", "shot", back)
    assert again.read_bytes() == json_path.read_bytes()
    assert (tmp_path / "again" / "shot.exr").read_bytes() == (tmp_path / "shot.exr").read_bytes()


def test_pixel_types_as_declared_for_other_readers(tmp_path: Path) -> None:
    """The `openexr` binding and OpenImageIO list the task layer by name with its declared pixel type."""
    frame = _known()
    _with_garment(frame)
    exr = write_bundle(tmp_path, "shot", frame).with_suffix(".exr")
    with OpenEXR.File(str(exr), separate_channels=True) as f:
        channels = {name: np.array(ch.pixels) for name, ch in f.channels().items()}
    assert channels["garment.id"].dtype == np.float32
    assert channels["garment_conf.prob"].dtype == np.float16
    oiio = pytest.importorskip("OpenImageIO")
    spec = oiio.ImageInput.open(str(exr)).spec()
    assert {"garment.id", "garment_conf.prob"} <= set(spec.channelnames)


def test_known_layers_unchanged_by_task_layers(tmp_path: Path) -> None:
    """A run with a plug-in task only adds: every channel and JSON field of the known layers is bit-identical to
    the bundle without it, and a frame without task layers writes no `task_layers` field at all."""
    plain = write_bundle(tmp_path / "a", "f", _known())
    frame = _known()
    _with_garment(frame)
    extended = write_bundle(tmp_path / "b", "f", frame)
    doc_plain = json.loads(plain.read_text(encoding="utf-8"))
    doc_ext = json.loads(extended.read_text(encoding="utf-8"))
    assert "task_layers" not in doc_plain
    assert doc_ext.pop("task_layers") and doc_ext == doc_plain
    old, _ = read_exr(plain.with_suffix(".exr"))
    new, _ = read_exr(extended.with_suffix(".exr"))
    assert set(new) - set(old) == {"garment.id", "garment_conf.prob"}
    for name, values in old.items():
        assert new[name].dtype == values.dtype
        assert new[name].tobytes() == values.tobytes(), name


def test_a_reader_that_does_not_know_the_task_skips_it(tmp_path: Path) -> None:
    """What a reader without task-layer support sees: the JSON's `layers` (all it reads channels for) and an EXR
    whose extra channels it never asks for; our reader with the field removed reads the file as before."""
    frame = _known()
    _with_garment(frame)
    json_path = write_bundle(tmp_path, "shot", frame)
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    del doc["task_layers"]  # as a reader that ignores unknown fields (docs/formats.md §2.4) sees the file
    json_path.write_text(json.dumps(doc), encoding="utf-8")
    back = read_bundle(json_path)
    assert back.extra == {} and back.seg is not None and back.points is not None


def test_refusals(tmp_path: Path) -> None:
    frame = _known()
    frame.extra["garment"] = {"id": np.zeros((H, W))}
    with pytest.raises(BundleError, match=r"no declaration in CaptureFrame\.task_layers"):
        write_bundle(tmp_path, "x", frame)
    frame.task_layers["garment"] = TaskLayer(task="garment", channels=("id", "prob"))
    with pytest.raises(BundleError, match=r"holds channels \['id'\], its declaration lists"):
        write_bundle(tmp_path, "x", frame)
    frame.task_layers["garment"] = TaskLayer(task="garment", channels=("id",), pixel_type="uint")
    with pytest.raises(BundleError, match="pixel_type 'uint'"):
        write_bundle(tmp_path, "x", frame)
    frame.extra = {"seg": {"id": np.zeros((H, W))}}
    frame.task_layers = {"seg": TaskLayer(task="x", channels=("id",))}
    with pytest.raises(BundleError, match="none of the bundle's own layers"):
        write_bundle(tmp_path, "x", frame)
    frame.extra = {"garment": {"id": np.zeros((H + 1, W))}}
    frame.task_layers = {"garment": TaskLayer(task="garment", channels=("id",))}
    with pytest.raises(BundleError, match=r"shape \(21, 28\), expected \(20, 28\)"):
        write_bundle(tmp_path, "x", frame)
    assert not list(tmp_path.iterdir())  # refused before any file was opened

    # a declared layer whose channels are missing from the EXR: the reader names them
    frame = _known()
    _with_garment(frame)
    json_path = write_bundle(tmp_path, "shot", frame)
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    doc["task_layers"]["garment"]["channels"] = ["id", "edge"]
    json_path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(
        BundleError, match=r"task layer 'garment' is declared but channels \['garment.edge'\]"
    ):
        read_bundle(json_path)
