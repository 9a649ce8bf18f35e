"""The fast zlib-format deflate the EXR and PNG writers share: ISA-L's where `isal` is installed, else zlib's.

Why level 1 of ISA-L: on a 1080p capture frame it took 170 core-ms for 30.9 MB where OpenEXR's own deflate took
~600 core-ms for 30.0 MB; zlib's level 1 (the fallback, same format, any reader decodes both) took 860 core-ms for
31.3 MB (docs/performance.md).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

__all__ = ["ISAL_LEVEL", "ZLIB_LEVEL", "fast_compressor", "fast_deflate"]

ISAL_LEVEL = 1
ZLIB_LEVEL = 1


def _find_deflater() -> Callable[[Any], bytes]:
    try:
        from isal import isal_zlib
    except ImportError:
        return lambda data: zlib.compress(data, ZLIB_LEVEL)
    return lambda data: isal_zlib.compress(data, ISAL_LEVEL)


fast_deflate: Callable[[Any], bytes] = _find_deflater()


def fast_compressor() -> Any:
    """A streaming compressor (`compress(data)`, then `flush()`) of the same kind: one zlib stream fed in pieces,
    for writers that must not hold a whole image (the PNG writer's row bands)."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib.compressobj(ZLIB_LEVEL)
    return isal_zlib.compressobj(ISAL_LEVEL)
