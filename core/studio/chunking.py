"""Batches in chunks, with out-of-memory back-off: the one place where a batch is split."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from .errors import OutOfMemoryError, StudioError
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

    Progress is reported after every chunk and cancellation checked before each. An out-of-memory error with one
    item per chunk is re-raised as OutOfMemoryError with advice, since nothing smaller can be tried.
    """
    if total <= 0:
        raise StudioError(f"the batch is empty: there are no {what} to process")
    if chunk_size < 1:
        raise StudioError(f"the chunk size must be at least 1, got {chunk_size}")
    results: list[T] = []
    start, size = 0, chunk_size
    host.progress(0, total)
    while start < total:
        host.check_cancel()
        stop = min(total, start + size)
        try:
            out = list(work(start, stop))
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            host.release_memory()
            if size == 1:
                raise OutOfMemoryError(
                    f"out of memory even with one of the {what} per forward pass: use a smaller model, the "
                    "bf16/fp16 dtype, or free memory used by other programs or models",
                    hints={
                        "comfyui": "unload other models (Manager ▸ Unload Models) or lower the image size"
                    },
                ) from exc
            size = max(1, size // 2)
            host.note(f"out of memory with {stop - start} {what} per chunk; retrying with {size}")
            continue
        if len(out) != stop - start:
            raise RuntimeError(f"internal error: chunk {start}:{stop} returned {len(out)} results")
        results.extend(out)
        start = stop
        host.progress(start, total)
    return results
