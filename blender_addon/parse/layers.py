"""The EXR's channels, grouped into the bundle's layers without copying them.

A 4096x3072 capture has ~15 channels of 12.6 M pixels; stacking them into (H, W, 3) arrays or converting half
floats to float32 up front costs seconds and gigabytes. Layers therefore keep the raw channels and only gather
the pixels a mesh or a joint actually uses (``sample``); a full array is built only when asked for (``[name]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

GROUPS = {
    "rgb": ("R", "G", "B"),
    "P": ("P.X", "P.Y", "P.Z"),
    "N": ("N.X", "N.Y", "N.Z"),
    "albedo": ("albedo.R", "albedo.G", "albedo.B"),
    "matte": ("matte.R", "matte.G", "matte.B"),  # the person's linear colour pre-multiplied by alpha
    "alpha": ("matte.A",),  # the matting model's soft alpha
}
SINGLES = ("A", "seg", "mask", "confidence")
# Single-channel layers by their EXR channel: bundle 1.1 names first (layered, so other tools list them as layers),
# then the bare 1.0 names.
SINGLE_CHANNELS = {"seg": ("seg.id", "seg"), "mask": ("mask.A", "mask")}


class Layers(Mapping):
    """Read-only mapping layer name -> full float32 array, plus cheap per-pixel access."""

    def __init__(self, channels: Mapping[str, np.ndarray] | None = None) -> None:
        self._channels = dict(channels or {})
        self._names = [n for n, chans in GROUPS.items() if all(c in self._channels for c in chans)]
        self._singles = {}
        for name in SINGLES:
            found = [c for c in SINGLE_CHANNELS.get(name, (name,)) if c in self._channels]
            if found:
                self._singles[name] = found[0]
                self._names.append(name)

    def _parts(self, name: str) -> tuple[str, ...]:
        if name not in self._names:
            raise KeyError(name)
        return GROUPS.get(name) or (self._singles[name],)

    def __getitem__(self, name: str) -> np.ndarray:
        parts = self._parts(name)
        if len(parts) == 1:
            return self._channels[parts[0]].astype(np.float32)
        return np.stack([self._channels[c] for c in parts], axis=-1).astype(np.float32)

    def __contains__(self, name: object) -> bool:  # Mapping's default would build the full array
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def channels(self, name: str) -> list[np.ndarray]:
        """The raw (H, W) channel arrays of a layer, in X/Y/Z or R/G/B order, native dtype, no copy."""
        return [self._channels[c] for c in self._parts(name)]

    def sample_channel(self, channel: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """float32 values of one raw EXR channel at the given pixels (task layers, which no group names)."""
        return self._channels[channel][rows, cols].astype(np.float32)

    def sample(self, name: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """float32 values at the given pixels: (V, C) for a group, (V,) for a single channel."""
        parts = self.channels(name)
        if len(parts) == 1:
            return parts[0][rows, cols].astype(np.float32)
        out = np.empty((len(rows), len(parts)), dtype=np.float32)
        for i, channel in enumerate(parts):
            out[:, i] = channel[rows, cols]
        return out
