"""The engine's chunking: a batch through the one chunker (`core.chunks`) with a Host's progress and cancel, and
the out-of-memory back-off (halve the chunk, retry). Predictors take the chunk they are given and never split it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from ...chunks import in_chunks
from ..errors import OutOfMemoryError, StudioError
from .host import Host

T = TypeVar("T")


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA/MPS/CPU allocator failures: the dedicated exception type or the classic RuntimeError text."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def run_chunked(
    total: int,
    chunk_size: int,
    work: Callable[[int, int], Sequence[T]],
    host: Host,
    *,
    what: str = "images",
) -> list[T]:
    """Call `work(start, stop)` over `range(total)` in chunks; on out-of-memory halve the chunk and retry.

    Progress is reported before the first chunk and after every chunk, cancellation checked before each. An
    out-of-memory error with one item per chunk is re-raised as OutOfMemoryError with advice, since nothing
    smaller can be tried. The cutting itself is `core.chunks.in_chunks`, the project's one chunker.
    """
    if total <= 0:
        raise StudioError(f"the batch is empty: there are no {what} to process")
    if chunk_size < 1:
        raise StudioError(f"the chunk size must be at least 1, got {chunk_size}")

    def shrink(size: int, start: int, stop: int, exc: Exception) -> int:
        if not is_out_of_memory(exc):
            raise exc
        host.release_memory()
        if size == 1:
            raise OutOfMemoryError(
                f"out of memory even with one of the {what} per forward pass: use a smaller model, the "
                "bf16/fp16 dtype, or free memory used by other programs or models",
                hints={"comfyui": "unload other models (Manager ▸ Unload Models) or lower the image size"},
            ) from exc
        size = max(1, size // 2)
        host.note(f"out of memory with {stop - start} {what} per chunk; retrying with {size}")
        return size

    host.progress(0, total)
    return in_chunks(total, chunk_size, work, progress=host.progress, before=host.check_cancel, shrink=shrink)
