"""Small helpers the task modules share for their results (imports numpy/torch only when called)."""

from __future__ import annotations

from typing import Any


def nonfinite_in(value: Any) -> int:
    """Number of NaN/inf entries of a tensor, array or map read in row bands (0 for None or integer data)."""
    if value is None:
        return 0
    import numpy as np
    import torch

    from ..formats.row_bands import RowBands
    from ..pipeline.postprocess import count_nonfinite

    if isinstance(value, torch.Tensor):
        return count_nonfinite(value)
    if isinstance(value, RowBands):
        return value.nonfinite()
    array = np.asarray(value)
    return int((~np.isfinite(array)).sum()) if np.issubdtype(array.dtype, np.floating) else 0


def map_size(value: Any) -> tuple[int, int] | None:
    """(width, height) of an (H, W[, C]) map, or None."""
    if value is None:
        return None
    return int(value.shape[1]), int(value.shape[0])


def dense_masks(ctx: Any) -> Any:
    """The person masks a dense task gets: the given masks (bool), else the seg results it needs, else None."""
    if ctx.masks is not None:
        return [m > 0.5 for m in ctx.masks]
    return ctx.needs.get("seg")
