"""Banded maps (a 9000×6000 photo never holds its normal/point maps whole) are the whole maps, bit for bit: the
banded resize equals `F.interpolate`, every way of reading a BandedArray equals indexing the whole array, and a
job that bands its maps writes the very bytes of one that does not. Memory itself is measured in benchmarks/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from sapiens2_studio.core.formats.row_bands import RowBands
from sapiens2_studio.core.pipeline import banded, postprocess
from sapiens2_studio.core.pipeline.banded import BandedArray, BandedResize, exact_here
from sapiens2_studio.core.pipeline.postprocess import (
    albedo_banded,
    albedo_to_image,
    can_band,
    normals_banded,
    normals_to_image,
    pointmap_banded,
    pointmap_to_image,
)
from sapiens2_studio.core.pipeline.preprocess import dense_layout
from sapiens2_studio.core.pipeline.results import PointmapResult
from sapiens2_studio.core.studio import JobSpec, run_job
from sapiens2_studio.core.studio.jobs import stages
from studio_runs import output_bytes as _files
from studio_runs import photo as _photo

pytestmark = pytest.mark.skipif(
    not exact_here(), reason="this CPU's bilinear kernel is not the banded scheme"
)


@pytest.mark.parametrize(
    ("source_hw", "size_hw"), [((683, 1024), (1500, 2250)), ((97, 61), (1001, 703)), ((5, 3), (300, 250))]
)
def test_a_banded_upscale_is_f_interpolate_bit_for_bit(source_hw, size_hw) -> None:
    generator = torch.Generator().manual_seed(7)
    source = torch.randn((3, *source_hw), generator=generator) * 40.0
    source[0, 1, 1] = float("nan")  # non-finite values spread exactly as the kernel spreads them
    source[1, 2, 0] = float("inf")
    whole = F.interpolate(source[None], size=size_hw, mode="bilinear", align_corners=False)[0]
    resize = BandedResize(source, size_hw)
    rows = np.random.default_rng(3).permutation(size_hw[0])[:50]
    np.testing.assert_array_equal(resize.rows(torch.arange(size_hw[0])).numpy(), whole.numpy())  # NaN = NaN
    picked = np.sort(rows)
    np.testing.assert_array_equal(resize.rows(torch.from_numpy(picked)).numpy(), whole[:, picked].numpy())


def test_only_upscales_are_banded() -> None:
    with pytest.raises(ValueError, match="only upscales"):
        BandedResize(torch.zeros(3, 64, 48), (17, 100))
    with pytest.raises(ValueError, match="only upscales"):
        BandedResize(torch.zeros(3, 5, 3), (40, 70))  # too small to be proven
    assert not can_band(dense_layout(640, 480))  # smaller than the network input: the crop shrinks
    assert can_band(dense_layout(900, 1100))


def _whole_and_banded(rows_per_band: int) -> tuple[np.ndarray, BandedArray]:
    whole = np.random.default_rng(0).normal(size=(23, 9, 3)).astype(np.float32)
    calls: list[np.ndarray] = []

    def make(rows: np.ndarray) -> np.ndarray:
        assert rows.dtype == np.int64 and np.all(np.diff(rows) > 0)  # sorted and unique, as documented
        calls.append(rows)
        return whole[rows]

    return whole, BandedArray(whole.shape, make, band_rows=rows_per_band)


@pytest.mark.parametrize(
    "key",
    [
        slice(None),
        slice(3, 11),
        slice(2, None, 5),
        (slice(1, 22, 4), slice(2, None, 4)),
        7,
        -1,
        (5, 3),
        (np.array([4, 4, 0, 22, -2]), np.array([1, 8, 0, 3, 2])),
        np.array([[1, 2], [9, 1]]),
        (Ellipsis, 2),
        (slice(None), slice(None), 2),
    ],
)
def test_every_way_of_reading_a_banded_array_is_numpy_indexing(key) -> None:
    whole, lazy = _whole_and_banded(rows_per_band=4)
    np.testing.assert_array_equal(lazy[key], whole[key])
    np.testing.assert_array_equal(np.asarray(lazy), whole)
    assert lazy.shape == whole.shape and len(lazy) == 23 and lazy.dtype == np.float32
    with pytest.raises(IndexError):
        lazy[23]


def test_a_banded_array_reads_only_the_rows_it_needs_and_counts_nonfinite_values() -> None:
    whole, lazy = _whole_and_banded(rows_per_band=4)
    lazy[2:9:3]
    whole[5, 1, 2] = np.nan
    whole[20, 0, 0] = -np.inf
    assert lazy.nonfinite() == 2
    masked = lazy.then(lambda band, rows: band * (rows[:, None, None] % 2))
    np.testing.assert_array_equal(masked[3:6], whole[3:6] * np.array([1, 0, 1])[:, None, None])


def test_banded_dense_maps_are_the_whole_maps() -> None:
    layout = dense_layout(900, 1100)  # W, H: larger than 768×1024, so the crop grows on both axes
    generator = torch.Generator().manual_seed(11)
    raw = torch.randn((1, 3, 1024, 768), generator=generator)
    scale = torch.tensor([[0.37]])
    pairs = [
        (normals_banded(raw, layout), normals_to_image(raw, layout)),
        (albedo_banded(raw, layout), albedo_to_image(raw, layout)),
        (pointmap_banded(raw, scale, layout), pointmap_to_image(raw, scale, layout)),
    ]
    for lazy, whole in pairs:
        assert isinstance(lazy, RowBands) and not isinstance(whole, RowBands)  # the results' one protocol
        np.testing.assert_array_equal(np.asarray(lazy), whole[0].permute(1, 2, 0).numpy())
    points, whole_points = pairs[2]
    depth = PointmapResult(points, 0.37, (1.0, 1.0, 0.0, 0.0)).depth  # Z alone, read band by band
    assert torch.equal(
        depth, PointmapResult(whole_points[0].permute(1, 2, 0), 0.37, (1.0, 1.0, 0.0, 0.0)).depth
    )


def _job(inputs: list[Path], out: Path, checkpoints: dict[str, Path], **options) -> None:
    tasks = ("pose", "seg", "normal", "albedo", "pointmap")
    spec = JobSpec(
        inputs=[str(p) for p in inputs],
        out=str(out),
        tasks=tasks,
        checkpoints={t: checkpoints[t] for t in tasks},
        device="cpu",
        **options,
    )
    report = run_job(spec)
    assert report.ok, report.failures


def test_a_job_with_banded_maps_writes_the_bytes_of_whole_maps(
    tmp_path: Path, tiny_checkpoints, monkeypatch
) -> None:
    """A still and a two-frame sequence larger than the network input, with previews and a mesh: every file
    (EXR, JSON with its checks and 3D keypoints, PNG previews, PLY) is the same whether the maps were banded."""
    plate = tmp_path / "plate"
    plate.mkdir()
    for number in (1, 2):
        Image.fromarray(_photo(1100, 900, number)).save(plate / f"shot_{number}.png")
    still = tmp_path / "still.png"
    Image.fromarray(_photo(1030, 790, 5)).save(still)
    made: list[int] = []
    real = banded.BandedResize.rows

    def counted(self, rows):
        made.append(len(rows))
        return real(self, rows)

    monkeypatch.setattr(banded.BandedResize, "rows", counted)
    monkeypatch.setattr(stages, "BANDED_MAPS_ABOVE", None)
    _job([still, plate], tmp_path / "whole", tiny_checkpoints, mesh="ply")
    assert not made
    monkeypatch.setattr(stages, "BANDED_MAPS_ABOVE", 0)
    _job([still, plate], tmp_path / "banded", tiny_checkpoints, mesh="ply")
    assert made and max(made) <= 256  # made in bands
    whole, lazy = _files(tmp_path / "whole"), _files(tmp_path / "banded")
    assert sorted(whole) == sorted(lazy) and any(name.endswith(".exr") for name in whole)
    for name in whole:
        assert whole[name] == lazy[name], name


@pytest.mark.parametrize("broken", [False, True])
def test_banded_seg_labels_are_the_whole_map_argmax(broken: bool) -> None:
    """A photo larger than the network input: its labels, made in bands, equal F.interpolate + argmax exactly
    (ties included: the first class wins, as in argmax; non-finite logits take argmax's own NaN rule)."""
    generator = torch.Generator().manual_seed(5)
    logits = torch.randn((29, 64, 48), generator=generator).round()  # many exact ties
    if broken:
        logits[3, 10, 10] = float("nan")
        logits[7, 20:22, 5] = float("inf")
    height, width = 700, 530
    whole = F.interpolate(logits[None], size=(height, width), mode="bilinear", align_corners=False)[0]
    assert torch.equal(postprocess._banded_labels(logits, height, width), whole.argmax(dim=0))


def test_whole_map_seg_labels_are_argmax_of_the_resized_logits() -> None:
    """The whole-map path's plane-wise argmax (faster on the CPU) = `argmax(dim=1)`, ties and NaN included."""
    generator = torch.Generator().manual_seed(9)
    logits = torch.randn((1, 29, 64, 48), generator=generator).round()
    for broken in (False, True):
        if broken:
            logits[0, 4, 3, 3] = float("nan")
        resized = F.interpolate(logits, size=(90, 70), mode="bilinear", align_corners=False)
        labels, _ = postprocess.seg_to_labels(logits, (70, 90))
        assert torch.equal(labels, resized.argmax(dim=1)[0])
