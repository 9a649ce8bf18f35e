"""Overlap of host work with the models: a bounded prefetcher for inputs and a bounded, ordered writer pool.

Why: a frame's decode and its writing (EXR compression, PNG encoding, JSON) cost host cores that an accelerator
would otherwise wait for. Both stages run in threads because the expensive parts release the GIL (image
decoding, zlib/EXR compression, numpy); both are bounded, so memory stays flat on a long video:

- `prefetch(items, depth)` runs an iterator (e.g. a video's frame decoder) up to `depth` items ahead in one
  background thread; items and the iterator's exceptions arrive in the original order.
- `OrderedWriter(workers)` runs up to `workers` "write this frame" callables at once and hands each result to
  its `commit` callback on the submitting thread, in submission order. The callable is whatever the job calls per
  frame (today `write_frame_outputs`: one frame's transaction), so what is atomic stays atomic; the commit
  callbacks (recording the frame in the sequence index, counting, progress) see frames in order, exactly as in a
  sequential run. `workers=0` runs each callable inline: the sequential path, unchanged.

Errors: the first failing frame's exception is raised (in order) from `submit`/`drain`; frames submitted after it
that had not started are cancelled, running ones finish (each is a complete transaction) but are not committed.

Stops and errors of the submitting thread (Ctrl-C, SIGTERM, an error computing the next frame) leave the block
through `stop`: frames not started are cancelled, and every frame already written gets its commit callback, in
order, before the exception goes on. So a frame on disk is always a frame recorded and reported (the CLI's
`frame` events): the progress a caller saw never falls behind what a stopped run committed. Commit callbacks run
with SIGINT/SIGTERM held (transaction.signals_held), so a stop lands between two of them, never inside one.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from ..errors import StudioError


def _transaction() -> Any:
    """The transaction module, imported when a writer first needs it: the CLI's parser reads DEFAULT_WRITERS from
    here and must stay free of numpy and torch (tests/test_architecture.py)."""
    from ..store import transaction

    return transaction


T = TypeVar("T")
R = TypeVar("R")

# Writer threads of a predict job by default (JobSpec.writers, `--writers`); measured in docs/performance.md.
DEFAULT_WRITERS = 2

_DONE = object()


def prefetch(items: Iterable[T], depth: int = 1) -> Iterator[T]:
    """Iterate `items` in a background thread, at most `depth` items ahead of the consumer; `depth` 0 = inline.

    The producer's exception is re-raised after the items it produced before it. If the consumer stops early
    (break, exception, garbage collection), the producer stops at its next item and the source iterator is
    closed in the producer's thread (a video container is released there).
    """
    if depth < 0:
        raise StudioError(f"the prefetch depth must be ≥ 0, got {depth}")
    if depth == 0:
        yield from items
        return
    slots: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        source = iter(items)
        try:
            for item in source:
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as exc:  # handed to the consumer, raised there
            put((_DONE, exc))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="sapiens2-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item, error = slots.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()


class OrderedWriter(Generic[R]):
    """Run per-frame work concurrently on `workers` threads; commit results in submission order.

    At most `max_pending` frames (default 2 × workers) are submitted and not yet committed: `submit` waits for
    the oldest one when the pool is full, so at most that many frames' data are alive at once.
    Use as a context manager; leaving the block normally commits everything (`drain`), leaving it with an
    exception cancels what has not started and waits for what is running, without committing it.
    """

    def __init__(self, workers: int = 0, *, max_pending: int | None = None) -> None:
        if workers < 0:
            raise StudioError(f"the number of writers must be ≥ 0, got {workers}")
        self.workers = workers
        self.max_pending = max(1, max_pending if max_pending is not None else 2 * workers)
        self._pool = (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sapiens2-writer") if workers else None
        )
        self._pending: deque[tuple[Future[R], Callable[[R], Any] | None]] = deque()

    def submit(self, work: Callable[[], R], commit: Callable[[R], Any] | None = None) -> None:
        """Run `work()` (now, or on a writer thread); `commit(result)` follows on this thread, in order."""
        if self._pool is None:
            with (
                _transaction().signals_held_after_commit()
            ):  # a stop held by the frame's commit waits for its callback too
                result = work()
                self._report(commit, result)
            return
        while len(self._pending) >= self.max_pending:
            self._commit_oldest()
        self._pending.append((self._pool.submit(work), commit))
        while self._pending and self._pending[0][0].done():  # commit finished frames early (progress)
            self._commit_oldest()

    def _commit_oldest(self) -> None:
        future, commit = self._pending[0]
        try:
            result = future.result()
        except BaseException as exc:
            if not future.done() or future.cancelled() or future.exception() is not exc:
                raise  # a stop while waiting: the frame is still pending, leaving the block (stop) reports it
            self._pending.popleft()  # the frame itself failed: nothing after it is committed
            self.cancel()
            raise
        self._pending.popleft()
        self._report(commit, result)

    @staticmethod
    def _report(commit: Callable[[R], Any] | None, result: R) -> None:
        if commit is not None:
            with (
                _transaction().signals_held()
            ):  # a stop lands between two frames' callbacks, never inside one
                commit(result)

    def drain(self) -> None:
        """Wait for every submitted frame and commit it, in order."""
        while self._pending:
            self._commit_oldest()

    def stop(self) -> None:
        """Leaving on a stop or an error: cancel the frames not started, wait for the running ones, then commit
        the written ones in order, up to the first that failed or never ran. SIGINT/SIGTERM stay held meanwhile
        (at most `workers` frames' writing), so a second Ctrl-C cannot drop a written frame's callback either."""
        with _transaction().signals_held():
            pending, self._pending = self._pending, deque()
            for future, _ in pending:
                future.cancel()
            for future, commit in pending:
                if future.cancelled():
                    break
                try:
                    result = future.result()
                except BaseException:  # failed: it and the frames after it stay uncommitted
                    break
                try:
                    if commit is not None:
                        commit(result)
                except Exception:  # bookkeeping failed: keep the error the block is being left with
                    break
            for future, _ in pending:  # the running ones after a break finish before the pool goes
                if not future.cancelled():
                    with contextlib.suppress(BaseException):
                        future.result()

    def cancel(self) -> None:
        """Cancel frames that have not started; wait for running ones; commit nothing more."""
        pending, self._pending = self._pending, deque()
        for future, _ in pending:
            future.cancel()
        for future, _ in pending:
            if not future.cancelled():
                with contextlib.suppress(BaseException):  # already failing: the first error is the one raised
                    future.result()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> OrderedWriter[R]:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self.drain()
            else:
                self.stop()
        finally:
            self.close()
