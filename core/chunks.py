"""The one chunker: a batch of `total` items cut into consecutive chunks of at most `size`, in order.

Why one: the engine (`studio/runtime/chunking.run_chunked`, with the out-of-memory back-off, progress and cancel of a
front-end's Host) and the pipeline's public `predict_*` functions (their `batch_size`, `progress`) used to cut
batches each in their own loop; now they share this one, and a predictor's batch kernel never splits what it is
given. No torch here: what counts as out of memory and what to do then is the caller's `shrink`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .errors import Sapiens2Error

T = TypeVar("T")


class ChunkSizeError(Sapiens2Error, ValueError):
    """A chunk size below 1 (callers check first, naming their own option)."""


def in_chunks(
    total: int,
    size: int,
    work: Callable[[int, int], Sequence[T]],
    *,
    progress: Callable[[int, int], Any] | None = None,
    before: Callable[[], Any] | None = None,
    shrink: Callable[[int, int, int, Exception], int] | None = None,
) -> list[T]:
    """`work(start, stop)` for consecutive chunks of `range(total)`; one result per item, in order.

    progress(done, total): after every chunk. before(): before every chunk (a cancel check that raises).
    shrink(size, start, stop, error): called when `work` raises; returns the smaller size to retry the same start
        with, or raises (re-raise `error` for failures it does not handle). None: every error propagates.
    """
    if size < 1:
        raise ChunkSizeError(f"the chunk size must be at least 1, got {size}")
    results: list[T] = []
    start = 0
    while start < total:
        if before is not None:
            before()
        stop = min(total, start + size)
        try:
            out = list(work(start, stop))
        except Exception as exc:
            if shrink is None:
                raise
            size = shrink(size, start, stop, exc)
            continue
        if len(out) != stop - start:
            raise RuntimeError(f"internal error: chunk {start}:{stop} returned {len(out)} results")
        results.extend(out)
        start = stop
        if progress is not None:
            progress(start, total)
    return results
