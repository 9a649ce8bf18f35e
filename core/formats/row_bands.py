"""The one protocol of a map that is read a band of rows at a time: what the writers (bundle pixels, EXR) and the
preview drawing rely on when a result is too large to hold whole.

Why a protocol and not a class: banding is a writer-side memory strategy (a 9000×6000 float32 map is 648 MB). The
results say "a tensor, or something read in row bands"; the maker (`core/pipeline/banded.py`) is free to build
the rows however it likes, and the consumers only index, read whole (`np.asarray`), add a per-band step or count
non-finite values. Nothing outside the maker names the concrete class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

# step(band, rows): one band (len(rows), W, C) and its sorted row indices → the band after the step
BandStep = Callable[[np.ndarray, np.ndarray], np.ndarray]


@runtime_checkable
class RowBands(Protocol):
    """A read-only (H, W, C) map whose rows are made when read, the same values however the rows are grouped.

    Indexing (`m[rows]`, `m[o::s, o::s]`, `m[ys, xs]`, `m[:, :, 2]`) makes only the rows it needs, as numpy
    indexing of the whole map would give; `np.asarray(m)` makes the whole map (previews, meshes, sequences)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...

    @property
    def ndim(self) -> int: ...

    def __getitem__(self, key: Any) -> np.ndarray: ...

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray: ...

    def then(self, step: BandStep) -> RowBands:
        """This map with `step(band, rows)` applied to every band it makes (a mask indexed by `rows`, the bundle's
        stored form of points)."""
        ...

    def nonfinite(self) -> int:
        """Number of NaN/inf values, counted band by band."""
        ...
