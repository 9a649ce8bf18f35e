"""Progress output of `sapiens2 predict` in logs (stderr not a terminal) vs on a terminal."""

from __future__ import annotations

import io
import sys

import pytest
from sapiens2_studio.cli.progress import Progress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_output_is_periodic_lines_without_carriage_returns():
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(1000, stream=stream, log_interval=10.0, clock=clock)
    for _ in range(1000):  # 1000 images at 0.1 s each = 100 s → one line per 10 s, not one per image
        clock.now += 0.1
        progress.update(1, "frame")
    progress.close()
    text = stream.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert 9 <= len(lines) <= 11, lines
    assert lines[-1].startswith("predict: 1000/1000 images") and lines[-1].endswith("done")


def test_terminal_output_overwrites_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # the fallback line, whether or not tqdm is installed
    stream = _Tty()
    progress = Progress(3, stream=stream)
    for _ in range(3):
        progress.update(1, "x")
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and "3/3 images" in text


def test_terminal_output_uses_tqdm_when_installed():
    pytest.importorskip("tqdm")  # installed with the test extra (transformers depends on it)
    stream = _Tty()
    progress = Progress(3, stream=stream)
    for _ in range(3):
        progress.update(1, "x")
    progress.close()
    text = stream.getvalue()
    assert "3/3" in text and "img/s" in text and text.endswith("\n")


@pytest.mark.parametrize("status", ["stopped", "failed"])
def test_the_last_log_line_says_how_the_run_ended(status):
    """Issue 33: a run stopped by Ctrl-C/SIGTERM or ended by failures no longer ends its log with `done`."""
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(10, stream=stream, log_interval=10.0, clock=clock)
    for _ in range(4):
        clock.now += 1.0
        progress.update(1, "frame")
    progress.close(status)
    last = stream.getvalue().splitlines()[-1]
    assert last == f"predict: 4/10 images (1.00 img/s) {status}"


def test_a_run_stopped_before_any_image_still_says_so():
    stream = io.StringIO()
    Progress(5, stream=stream).close("stopped")
    assert stream.getvalue().startswith("predict: 0/5 images") and stream.getvalue().endswith("stopped\n")
    quiet = io.StringIO()
    progress = Progress(5, stream=quiet, quiet=True)  # --progress json: the event stream reports instead
    progress.update(1, "x")
    progress.close("done")
    assert quiet.getvalue() == ""
