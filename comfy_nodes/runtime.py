"""The few host services node logic needs, and chunked batch processing with out-of-memory back-off.

Node logic is written against ``Runtime`` so it runs (and is tested) without ComfyUI: ``Runtime`` itself is the
plain implementation for scripts and tests (one device, no progress UI); ``comfy_host.ComfyRuntime`` implements the
same methods with ComfyUI's model management, progress bar and interrupt flag.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from .types import LoadedModel

log = logging.getLogger("sapiens2")
T = TypeVar("T")


class Runtime:
    """Plain runtime: compute on ``device``, return results on ``output_device``; no progress, no interrupts."""

    def __init__(self, device: str | torch.device = "cpu", output_device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)
        self.output_device = torch.device(output_device)
        self.notes: list[str] = []

    def activate(self, loaded: LoadedModel) -> Any:
        """Make the model's weights usable on the compute device and return the module to call."""
        if loaded.model.device != self.device:
            loaded.model.to(self.device)
        return loaded.model

    def progress(self, done: int, total: int) -> None:
        """Report progress; a host may raise here to stop work (ComfyUI's interrupt)."""

    def check_interrupt(self) -> None:
        """Raise if the user asked to stop."""

    def free_cache(self) -> None:
        """Return cached accelerator memory after an out-of-memory error."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def note(self, message: str) -> None:
        """Something the user should see (logged, and shown by nodes that have a text output)."""
        log.warning(message)
        self.notes.append(message)


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA (and other accelerator) OOMs: the dedicated exception type or the classic RuntimeError text."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def run_chunked(
    total: int,
    chunk_size: int,
    work: Callable[[int, int], Sequence[T]],
    runtime: Runtime,
    *,
    what: str = "images",
) -> list[T]:
    """Call ``work(start, stop)`` over ``range(total)`` in chunks, halving the chunk on out-of-memory errors.

    Progress is reported after every chunk and the interrupt flag is checked before each one.  An OOM at chunk
    size 1 is re-raised with advice, since nothing smaller can be tried.
    """
    if total <= 0:
        raise ValueError(
            f"the batch is empty: there are no {what} to process; connect a non-empty image batch"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk size must be >= 1, got {chunk_size}")
    results: list[T] = []
    start = 0
    size = chunk_size
    runtime.progress(0, total)
    while start < total:
        runtime.check_interrupt()
        stop = min(total, start + size)
        try:
            out = list(work(start, stop))
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            runtime.free_cache()
            if size == 1:
                raise RuntimeError(
                    f"out of memory even with one image per chunk while processing {what}: use a smaller model, "
                    "dtype bf16/fp16, or free memory used by other models (ComfyUI: unload models)"
                ) from exc
            size = max(1, size // 2)
            runtime.note(
                f"Sapiens2: out of memory with {stop - start} {what} per chunk; retrying with {size}"
            )
            continue
        if len(out) != stop - start:
            raise RuntimeError(f"internal error: chunk {start}:{stop} returned {len(out)} results")
        results.extend(out)
        start = stop
        runtime.progress(start, total)
    return results
