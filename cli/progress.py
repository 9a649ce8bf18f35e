"""Progress output: a live bar on a terminal, periodic plain lines in logs.

On a terminal: tqdm when installed, else one self-overwriting stderr line (no extra dependency). When stderr is
not a terminal (CI logs, `2> log.txt`, job schedulers) carriage returns would pile up into one huge line, so the
progress is printed as a full line every `log_interval` seconds instead, plus a final summary line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

LOG_INTERVAL_S = 30.0


class Progress:
    """`update(n, label)` after each item; `close()` at the end."""

    def __init__(
        self,
        total: int | None,
        desc: str = "predict",
        *,
        stream: TextIO | None = None,
        log_interval: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.perf_counter,
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
        self.interactive = bool(isatty and isatty())
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

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.interactive:
            if self.count:
                self.stream.write("\n")
                self.stream.flush()
        elif self.count:
            self.stream.write(self._status("done") + "\n")
            self.stream.flush()
