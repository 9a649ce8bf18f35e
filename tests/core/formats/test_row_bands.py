"""The writers know a huge map only by the `RowBands` protocol: any map read in row bands (here one that is not
the engine's BandedArray) is written to the bytes of the whole array, without ever being read whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("OpenEXR")

from sapiens2_studio.core.formats.arrays import float32_map, host_array
from sapiens2_studio.core.formats.bundle import CaptureFrame, write_bundle
from sapiens2_studio.core.formats.bundle_pixels import EXR_BAND_ROWS, canonical_points
from sapiens2_studio.core.formats.row_bands import RowBands

H, W = 3 * EXR_BAND_ROWS + 7, 21  # several EXR bands and a short last one


class NumpyRows:
    """A map read in row bands over a numpy array, recording how many rows each read makes."""

    def __init__(self, whole: np.ndarray, step: Any = None, reads: list[int] | None = None) -> None:
        self._whole, self._step = whole, step
        self.reads: list[int] = [] if reads is None else reads

    @property
    def shape(self) -> tuple[int, ...]:
        return self._whole.shape

    @property
    def dtype(self) -> np.dtype:
        return self._whole.dtype

    @property
    def ndim(self) -> int:
        return self._whole.ndim

    def _rows(self, rows: np.ndarray) -> np.ndarray:
        self.reads.append(len(rows))
        band = self._whole[rows]
        return band if self._step is None else self._step(band, rows)

    def __getitem__(self, key: Any) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        if key[0] is Ellipsis:
            return np.asarray(self)[key]
        wanted = np.arange(self.shape[0])[key[0]]
        unique, inverse = np.unique(wanted, return_inverse=True)
        return self._rows(unique)[(inverse.reshape(np.shape(wanted)), *key[1:])]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = self._rows(np.arange(self.shape[0]))
        return whole if dtype is None else whole.astype(dtype)

    def then(self, step: Any) -> NumpyRows:
        first = self._step
        both = step if first is None else (lambda band, rows: step(first(band, rows), rows))
        return NumpyRows(self._whole, both, self.reads)

    def nonfinite(self) -> int:
        return int((~np.isfinite(np.asarray(self))).sum())


def _maps(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(H, W, 3)).astype(np.float32)
    points[..., 2] = np.abs(points[..., 2]) + 0.5
    points[5, 3] = np.nan  # invalid points: stored as 0, 0, 0 with P.A = 0
    points[70, 4, 2] = -1.0  # behind the camera
    normals = rng.normal(size=(H, W, 3)).astype(np.float32)
    normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
    albedo = rng.uniform(0, 1, (H, W, 3)).astype(np.float32)
    return {"points": points, "normals": normals, "albedo": albedo}


def _frame(maps: dict[str, Any]) -> CaptureFrame:
    rng = np.random.default_rng(1)
    keypoints = np.zeros((308, 3), np.float32)
    keypoints[:, 0] = rng.uniform(0, W, 308)
    keypoints[:, 1] = rng.uniform(0, H, 308)
    keypoints[:, 2] = rng.uniform(0, 1, 308)
    return CaptureFrame(
        width=W,
        height=H,
        image=rng.integers(0, 256, (H, W, 3), dtype=np.uint8),
        seg=rng.integers(0, 29, (H, W)),
        camera={"fx": 30.0, "fy": 30.0, "cx": W / 2, "cy": H / 2, "source": "pointmap"},
        people=[{"bbox": [1.0, 2.0, 20.0, 200.0], "bbox_source": "given", "keypoints": keypoints}],
        pointmap_scale=0.5,
        **maps,
    )


def test_numpy_arrays_and_tensors_are_not_row_bands() -> None:
    whole = _maps(0)["points"]
    assert isinstance(NumpyRows(whole), RowBands)
    assert not isinstance(whole, RowBands)
    torch = pytest.importorskip("torch")
    assert not isinstance(torch.from_numpy(whole), RowBands)
    lazy = NumpyRows(whole)
    assert host_array(lazy) is lazy and float32_map(lazy) is lazy  # kept as they are, never made whole
    assert not lazy.reads


def test_a_bundle_of_row_bands_is_the_bundle_of_whole_maps(tmp_path: Path) -> None:
    whole = _maps(3)
    write_bundle(tmp_path / "whole", "f", _frame(whole))
    reads: list[int] = []
    lazy = {name: NumpyRows(array, reads=reads) for name, array in whole.items()}
    write_bundle(tmp_path / "bands", "f", _frame(lazy))
    for name in ("f.exr", "f.json"):
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "bands" / name).read_bytes(), name
    # read in bands (the EXR's, or the rows under the 3D keypoints), never whole
    assert EXR_BAND_ROWS in reads and max(reads) < H


def test_canonical_points_stay_in_row_bands() -> None:
    points = _maps(4)["points"]
    lazy = canonical_points(NumpyRows(points))
    assert isinstance(lazy, RowBands)
    np.testing.assert_array_equal(np.asarray(lazy), canonical_points(points.copy()))
