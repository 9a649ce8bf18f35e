"""The EXR compressions a capture bundle may be written with; a module of its own (no numpy) so that the CLI's
argument parser can offer them without loading the formats.

All three are lossless, read by every OpenEXR reader (Blender 4.2+, Nuke, OpenImageIO) and written in row bands
by our writer (`exr_scanline.py`), so memory stays bounded whichever is chosen. `zip` (16-line blocks, the
default) is the smallest; `zips` (one line per block, Nuke's default for the EXRs it writes) lets a scanline
reader decode only the lines it needs, for ~1.5 % more bytes; `none` does no compression at all, the largest
part of the host's work per frame, for ~2.5x the bytes (docs/formats.md, docs/performance.md).
"""

from __future__ import annotations

__all__ = ["DEFAULT_EXR_COMPRESSION", "EXR_COMPRESSIONS"]

EXR_COMPRESSIONS: tuple[str, ...] = ("zip", "zips", "none")
DEFAULT_EXR_COMPRESSION = EXR_COMPRESSIONS[0]
