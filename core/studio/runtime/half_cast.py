"""torch's vectorised float32/bool → float16 cast, handed to the bundle writers as their `half` converter.

Why here: the formats layer may not import torch (core/formats/casting.py says why it takes a converter); the
engine always has torch, so every bundle it writes gets the fast cast, whatever else the process imported.
"""

from __future__ import annotations

import numpy as np
import torch

from ...formats.casting import half_castable

__all__ = ["torch_half"]

# Elements per torch call: below torch's parallel grain (32,768), so the conversion runs on the calling thread.
# A parallel region would leave OpenMP's worker threads spinning after it, and that spin costs more core time
# than the conversion saves: measured on a 1080p capture frame, the deflate that follows went from 177 to 320
# core-ms when the bands were converted in one call each.
_PIECE = 32_000


def torch_half(values: np.ndarray) -> np.ndarray:
    """A new float16 array of `values` (a `casting.HalfCast`). Called once per band and channel, so torch's
    per-call overhead (a few µs per piece) stays small next to the conversion."""
    if not half_castable(values):
        raise ValueError(f"torch_half takes a 2-D float32 or bool array, got {values.dtype} {values.shape}")
    # torch views only writable arrays
    source = torch.from_numpy(values if values.flags.writeable else values.copy())
    out = np.empty(values.shape, np.float16)
    target = torch.from_numpy(out)
    height, width = values.shape
    rows = max(1, _PIECE // width)
    cols = min(width, _PIECE)
    for y in range(0, height, rows):
        for x in range(0, width, cols):
            target[y : y + rows, x : x + cols].copy_(source[y : y + rows, x : x + cols])
    return out
