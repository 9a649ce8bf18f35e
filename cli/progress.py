"""A progress bar: tqdm when installed, else one self-overwriting stderr line (no extra dependency)."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """`update(n, label)` after each item; `close()` at the end. Silent when stderr is not a terminal and no tqdm."""

    def __init__(self, total: int | None, desc: str = "predict") -> None:
        self.total = total or None
        self.count = 0
        self.desc = desc
        self._bar: Any = None
        self._start = time.perf_counter()
        try:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit="img", file=sys.stderr, leave=True)
        except ImportError:
            self._bar = None

    def update(self, n: int = 1, label: str = "") -> None:
        self.count += n
        if self._bar is not None:
            if label:
                self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(n)
            return
        rate = self.count / max(time.perf_counter() - self._start, 1e-9)
        total = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\r{self.desc}: {self.count}{total} images ({rate:.2f} img/s) {label[:40]:<40}")
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.count:
            sys.stderr.write("\n")
            sys.stderr.flush()
