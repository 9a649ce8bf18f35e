"""The one timing seam: every stage of a job reports its name, wall and CPU seconds here.

Why one seam and not a profiler that wraps functions: a stage is named where it happens (`with stage("decode")`),
so a renamed function keeps its stage and a removed stage is missed by whoever expects it (the benchmarks assert
the set), instead of being skipped silently. Why it lives at the bottom of `core` (stdlib only): the predictors in
`core/pipeline` and the bundle writer in `core/formats` report stages too, and they may not import `core/studio`.

Nobody listening (ComfyUI nodes, the Python API): `stage()` returns one shared do-nothing context manager, a
context-variable lookup per call. Listening (`listening(report)`, what a predict job does for its run record):
time is attributed *exclusively* per thread (a stage's nested stages are subtracted from it), so the stages of
one thread add up to its time. CPU time is the process's (`time.process_time`: torch's intra-op threads
included, i.e. core-seconds); where stages of several threads overlap (writer threads) their CPU seconds overlap
too. Work handed to another thread keeps the listener only when handed over with `in_context`.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

ReportFn = Callable[[str, float, float], Any]  # (stage name, wall seconds, CPU seconds), exclusive
T = TypeVar("T")


class StageClock:
    """Times the stages of the threads that see it and hands each finished one to `report`.

    `synchronize` (e.g. `torch.cuda.synchronize`) runs at every stage boundary, so that asynchronous device work is
    charged to the stage that launched it; only benchmarks ask for it (it stalls the device queue)."""

    __slots__ = ("_local", "_report", "_sync")

    def __init__(self, report: ReportFn, synchronize: Callable[[], Any] | None = None) -> None:
        self._report = report
        self._sync = synchronize
        self._local = threading.local()

    def _stack(self) -> list[list[Any]]:
        try:
            return self._local.stack
        except AttributeError:
            self._local.stack = []
            return self._local.stack

    def enter(self, name: str) -> None:
        if self._sync is not None:
            self._sync()
        wall, cpu = time.perf_counter(), time.process_time()
        stack = self._stack()
        if stack:  # pause the parent: its exclusive time stops here
            parent = stack[-1]
            parent[1] += wall - parent[3]
            parent[2] += cpu - parent[4]
        stack.append([name, 0.0, 0.0, wall, cpu])

    def leave(self) -> None:
        if self._sync is not None:
            self._sync()
        wall, cpu = time.perf_counter(), time.process_time()
        stack = self._stack()
        name, spent_wall, spent_cpu, start_wall, start_cpu = stack.pop()
        if stack:  # resume the parent
            stack[-1][3], stack[-1][4] = wall, cpu
        self._report(name, spent_wall + wall - start_wall, spent_cpu + cpu - start_cpu)


_CLOCK: contextvars.ContextVar[StageClock | None] = contextvars.ContextVar(
    "sapiens2_stage_clock", default=None
)


class _Timed:
    __slots__ = ("_clock", "_name")

    def __init__(self, clock: StageClock, name: str) -> None:
        self._clock, self._name = clock, name

    def __enter__(self) -> None:
        self._clock.enter(self._name)

    def __exit__(self, *exc: object) -> None:
        self._clock.leave()


class _Silent:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_SILENT = _Silent()


def stage(name: str) -> _Timed | _Silent:
    """`with stage("decode"):` — the block is one stage of whatever listens in this context (nothing: no cost)."""
    clock = _CLOCK.get()
    return _SILENT if clock is None else _Timed(clock, name)


def active() -> bool:
    """Whether anybody listens here (to skip building a stage name that costs something)."""
    return _CLOCK.get() is not None


@contextmanager
def listening(report: ReportFn, *, synchronize: Callable[[], Any] | None = None) -> Iterator[StageClock]:
    """Every stage reported in this context (and in work handed over with `in_context`) goes to `report`; an outer
    listener hears nothing from inside."""
    token = _CLOCK.set(StageClock(report, synchronize))
    try:
        yield _CLOCK.get()  # type: ignore[misc]
    finally:
        _CLOCK.reset(token)


def in_context(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` bound to this thread's listener, for running on another thread (a writer thread, an executor)."""
    if _CLOCK.get() is None:
        return fn
    context = contextvars.copy_context()
    return lambda *args, **kwargs: context.run(fn, *args, **kwargs)


# ------------------------------------------------------------------------------------------------ totals


@dataclass
class StageTime:
    """One stage's totals over a run: exclusive wall and CPU seconds, and how often it ran (plain data: it crosses
    process boundaries from a distributed run's workers)."""

    wall: float = 0.0
    cpu: float = 0.0
    calls: int = 0

    def record(self) -> dict[str, float]:
        return {"wall_s": self.wall, "cpu_s": self.cpu, "calls": self.calls}


_TOTALS_LOCK = threading.Lock()  # writer threads report concurrently; one lock for all totals is uncontended


def add_stage(totals: dict[str, StageTime], name: str, wall: float, cpu: float, calls: int = 1) -> None:
    """Add one finished stage (or `calls` of them) to `totals`, thread-safely."""
    with _TOTALS_LOCK:
        entry = totals.get(name)
        if entry is None:
            totals[name] = entry = StageTime()
        entry.wall += wall
        entry.cpu += cpu
        entry.calls += calls


def merge_stages(totals: dict[str, StageTime], other: Mapping[str, StageTime]) -> None:
    """Add every stage of `other` (e.g. a work unit's) to `totals`."""
    for name, entry in other.items():
        add_stage(totals, name, entry.wall, entry.cpu, entry.calls)
