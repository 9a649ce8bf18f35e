"""Progress output: a live bar on a terminal, periodic plain lines in logs, or a JSON event stream.

On a terminal: tqdm when installed, else one self-overwriting stderr line (no extra dependency). When stderr is
not a terminal (CI logs, `2> log.txt`, job schedulers) carriage returns would pile up into one huge line, so the
progress is printed as a full line every `log_interval` seconds instead, plus a final line that says how the
run ended: `done`, `stopped` (Ctrl-C, SIGTERM) or `failed`. `--progress json` replaces both with `Events`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

LOG_INTERVAL_S = 30.0


class Progress:
    """`update(n, label)` after each item; `close(status)` at the end ("done", "stopped" or "failed")."""

    def __init__(
        self,
        total: int | None,
        desc: str = "predict",
        *,
        stream: TextIO | None = None,
        log_interval: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
        quiet: bool = False,
    ) -> None:
        self.total = total or None
        self.count = 0
        self.desc = desc
        self.stream = sys.stderr if stream is None else stream
        self.log_interval = log_interval
        self._clock = clock
        self._start = clock()
        self._last_line = self._start
        self._bar: Any = None
        isatty = getattr(self.stream, "isatty", None)
        self.quiet = quiet  # another channel reports the progress (the JSON stream)
        self.interactive = bool(isatty and isatty()) and not quiet
        if self.interactive:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=self.total, desc=desc, unit="img", file=self.stream, leave=True)
            except ImportError:
                self._bar = None

    def _status(self, label: str) -> str:
        elapsed = max(self._clock() - self._start, 1e-9)
        total = f"/{self.total}" if self.total else ""
        text = f"{self.desc}: {self.count}{total} images ({self.count / elapsed:.2f} img/s)"
        return f"{text} {label}" if label else text

    def update(self, n: int = 1, label: str = "") -> None:
        self.count += n
        if self.quiet:
            return
        if self._bar is not None:
            if label:
                self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(n)
            return
        if self.interactive:
            self.stream.write(f"\r{self._status(label[:40]):<80}")
            self.stream.flush()
            return
        now = self._clock()
        if now - self._last_line >= self.log_interval:
            self._last_line = now
            self.stream.write(self._status(label) + "\n")
            self.stream.flush()

    def close(self, status: str = "done") -> None:
        """End the bar (a terminal) or write the final line (logs), which says how the run ended."""
        if self.quiet:
            return
        if self._bar is not None:
            if status != "done":
                self._bar.set_postfix_str(status, refresh=True)
            self._bar.close()
        elif self.interactive:
            if self.count or status != "done":
                self.stream.write(f"\r{self._status(status):<80}\n" if status != "done" else "\n")
                self.stream.flush()
        elif self.count or status != "done":
            self.stream.write(self._status(status) + "\n")
            self.stream.flush()


# ------------------------------------------------------------------------------------------ machine-readable

EVENT_SCHEMA = 1  # bumped only when a field changes meaning or goes away; new fields may be added any time


class Events:
    """`--progress json`: one JSON object per line on `stream` (stdout), flushed at once, for programs that drive
    the CLI (the Blender add-on, farm wrappers). Every line has `event` and `t` (seconds since the epoch); the
    events are documented in docs/cli.md ("Progress stream"). Disabled (`stream` None), every method is a no-op.

    A consumer that went away (closed pipe) does not stop the run: the stream just goes quiet."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream
        self._lock = threading.Lock()  # notes may come from writer threads
        self.warned: set[str] = set()
        self.frames: int | None = None  # frames reported so far, once a run started (`FrameEvents`)

    @property
    def enabled(self) -> bool:
        return self.stream is not None

    def emit(self, event: str, **fields: Any) -> None:
        if self.stream is None:
            return
        if event == "error" and self.frames is not None:  # a stop or failure mid-run: how far it got
            fields.setdefault("frames", self.frames)
        line = json.dumps({"event": event, "t": round(time.time(), 3), **fields}, ensure_ascii=True)
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):  # the reader is gone: keep running, quietly
                self.stream = None

    def warning(self, message: str, kind: str = "note") -> None:
        """A note of the engine (emitted once per text, as the summary lists it once)."""
        if message in self.warned:
            return
        self.warned.add(message)
        self.emit("warning", kind=kind, message=message)


class FrameEvents:
    """`on_item` → one `frame` event per item, with whether it was written, kept or failed: read from the job
    report's counters, which the engine updates right before it reports the item (no second bookkeeping)."""

    def __init__(self, events: Events, report: Any, total: int | None) -> None:
        self.events = events
        self.report = report
        self.total = total
        self.done = 0
        self._seen = self._counts()
        events.frames = 0

    def _counts(self) -> tuple[int, int, int]:
        return self.report.written, self.report.skipped, len(self.report.failures)

    def __call__(self, n: int, label: str) -> None:
        self.done += n
        self.events.frames = self.done
        now = self._counts()
        written, kept, failed = (a - b for a, b in zip(now, self._seen))
        self._seen = now
        status = "failed" if failed else "kept" if kept and not written else "written"
        fields: dict[str, Any] = {"done": self.done, "total": self.total, "name": label, "status": status}
        if n != 1:  # a distributed engine's work unit reports several frames at once
            fields["frames"] = n
        self.events.emit("frame", **fields)
