"""The capture bundle's EXR as other tools see it: OpenImageIO (the reader in Blender, oiiotool and many pipelines)
finds the depth channel and the named layers; Nuke-style readers group `layer.channel` names into layers.

OpenImageIO comes from the registry's `OpenImageIO` wheel (a test dependency, see pyproject.toml).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("OpenEXR")
oiio = pytest.importorskip("OpenImageIO")

from sapiens2_studio.core.formats.bundle import CaptureFrame, write_bundle  # noqa: E402
from sapiens2_studio.core.formats.exr import read_exr, write_exr  # noqa: E402

H, W = 12, 16
STANDARD = {"R", "G", "B", "A", "Z"}  # the default layer: colour, alpha and depth (Nuke: rgba + depth)


def _bundle(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    points = rng.uniform(-1, 1, (H, W, 3)).astype(np.float32)
    points[..., 2] = rng.uniform(1.5, 3.0, (H, W))
    points[:3, :4] = 0.0  # background: no point
    points[5, 5] = np.nan  # an invalid prediction
    normals = rng.normal(size=(H, W, 3)).astype(np.float32)
    frame = CaptureFrame(
        W, H, image=rng.integers(0, 256, (H, W, 3), dtype=np.uint8), points=points,
        normals=normals / np.linalg.norm(normals, axis=-1, keepdims=True),
        albedo=rng.uniform(0, 1, (H, W, 3)).astype(np.float32), seg=rng.integers(0, 29, (H, W)),
        mask=(points[..., 2] > 0).astype(np.float32),
    )  # fmt: skip
    return write_bundle(tmp_path, "shot", frame)


def _oiio(path: Path) -> tuple[object, np.ndarray]:
    image = oiio.ImageInput.open(str(path))
    assert image is not None, oiio.geterror()
    try:
        spec = image.spec()
        pixels = np.asarray(image.read_image(0, 0, 0, spec.nchannels, "float"))
    finally:
        image.close()
    return spec, pixels.reshape(spec.height, spec.width, spec.nchannels)


def _layers(names: list[str]) -> dict[str, list[str]]:
    """Nuke-style grouping: the part before the last '.' is the layer ('' for the default layer)."""
    out: dict[str, list[str]] = {}
    for name in names:
        layer, _, channel = name.rpartition(".")
        out.setdefault(layer, []).append(channel)
    return out


def test_openimageio_finds_the_depth_channel_and_the_layers(tmp_path: Path) -> None:
    path = _bundle(tmp_path)
    spec, pixels = _oiio(path.with_suffix(".exr"))
    names = list(spec.channelnames)
    assert names[spec.z_channel] == "Z" and names[spec.alpha_channel] == "A"
    layers = _layers(names)
    assert set(layers[""]) == STANDARD  # nothing but colour, alpha and depth outside a layer
    assert {k: sorted(v) for k, v in layers.items() if k} == {
        "P": ["A", "X", "Y", "Z"], "N": ["X", "Y", "Z"], "albedo": ["B", "G", "R"], "seg": ["id"], "mask": ["A"],
    }  # fmt: skip
    channel = {name: pixels[..., i] for i, name in enumerate(names)}
    valid = np.ones((H, W), bool)
    valid[:3, :4] = False
    valid[5, 5] = False
    np.testing.assert_array_equal(channel["P.A"], valid.astype(np.float32))  # the explicit validity channel
    assert np.all(channel["Z"][~valid] == 0) and np.all(
        channel["Z"][valid] > 1.4
    )  # 0: no point (infinitely far)
    np.testing.assert_array_equal(channel["Z"], channel["P.Z"])
    assert np.isfinite(pixels).all()  # no NaN to smear through a compositor's filters
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["layers"] == ["rgba", "depth", "P", "N", "albedo", "segmentation", "person_mask"]


def test_version_1_0_channels_as_openimageio_saw_them(tmp_path: Path) -> None:
    """What the issue reported for 1.0 files: OpenImageIO took the normals' N.Z for depth; seg and mask had no
    layer."""
    exr = _bundle(tmp_path).with_suffix(".exr")
    channels, _ = read_exr(exr)
    old = {
        {"seg.id": "seg", "mask.A": "mask"}.get(k, k): v for k, v in channels.items() if k not in ("Z", "P.A")
    }
    write_exr(exr, old)
    spec, _ = _oiio(exr)
    names = list(spec.channelnames)
    assert names[spec.z_channel] == "N.Z"
    assert set(_layers(names)[""]) == {"R", "G", "B", "A", "seg", "mask"}


def test_a_1_0_reader_can_still_read_what_it_knows_of_a_1_1_file(tmp_path: Path) -> None:
    """A minor version only adds: every JSON layer a 1.0 reader knows keeps its 1.0 channel names, and the layers
    whose channels were renamed are listed under new names, which a 1.0 reader skips instead of refusing the file."""
    channels_1_0 = {  # what the 1.0 reader expected for each layer name it knew
        "rgba": ("R", "G", "B", "A"),
        "P": ("P.X", "P.Y", "P.Z"),
        "N": ("N.X", "N.Y", "N.Z"),
        "albedo": ("albedo.R", "albedo.G", "albedo.B"),
        "seg": ("seg",),
        "mask": ("mask",),
    }
    json_path = _bundle(tmp_path)
    doc = json.loads(json_path.read_text())
    channels, _ = read_exr(json_path.with_suffix(".exr"))
    known = [layer for layer in doc["layers"] if layer in channels_1_0]
    assert {"rgba", "P", "N"} <= set(known)
    for layer in known:
        assert all(c in channels for c in channels_1_0[layer]), layer
    assert {"segmentation", "person_mask"} <= set(doc["layers"])
