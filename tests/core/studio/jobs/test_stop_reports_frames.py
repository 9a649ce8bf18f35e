"""A stop never leaves a committed frame unreported (issue 32): `OrderedWriter` commits (records, reports) every frame
already written when the submitting thread stops or fails, in order, and a SIGINT held by a frame's commit stays
held until the frame's callback ran (`signals_held_after_commit`). The CLI's JSON stream relies on this: every
frame on disk has its `frame` event (tests/cli/test_cli_progress_json.py runs it end to end)."""

from __future__ import annotations

import signal
import threading
import time

import pytest
from sapiens2_studio.core.studio.jobs.pipelining import OrderedWriter
from sapiens2_studio.core.studio.store.transaction import signals_held, signals_held_after_commit


def test_a_stop_of_the_submitting_thread_commits_the_frames_already_written_in_order() -> None:
    gate = threading.Event()
    written: list[int] = []
    committed: list[int] = []

    def work(i: int) -> int:
        if i == 1:
            assert gate.wait(10)  # still being written when the stop comes
        written.append(i)
        return i

    with pytest.raises(KeyboardInterrupt), OrderedWriter(2, max_pending=4) as writer:
        for i in range(3):
            writer.submit(lambda i=i: work(i), committed.append)
        deadline = time.monotonic() + 10
        while 2 not in written and time.monotonic() < deadline:  # frame 2 done, frame 1 not
            time.sleep(0.01)
        threading.Timer(0.2, gate.set).start()
        raise KeyboardInterrupt  # Ctrl-C while the models run the next frame
    assert sorted(written) == [0, 1, 2] and committed == [0, 1, 2]


def test_a_stop_while_waiting_for_a_frame_still_commits_it() -> None:
    gate = threading.Event()
    committed: list[int] = []

    def work(i: int) -> int:
        assert gate.wait(10)
        return i

    def stop(*_: object) -> None:  # Ctrl-C while the writer is full and waits for frame 0
        gate.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, stop)
    try:
        with pytest.raises(KeyboardInterrupt), OrderedWriter(1, max_pending=1) as writer:
            writer.submit(lambda: work(0), committed.append)
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            writer.submit(lambda: work(1), committed.append)  # waits for frame 0: the stop lands in that wait
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert committed == [0]  # frame 0 was written after the stop came, and reported; frame 1 never submitted


def test_a_failure_in_the_submitting_thread_commits_the_written_frames_not_the_cancelled() -> None:
    committed: list[int] = []
    started: list[int] = []
    block = threading.Event()

    def work(i: int) -> int:
        started.append(i)
        if i == 0:
            assert block.wait(10)
        return i

    with pytest.raises(RuntimeError, match="out of memory"), OrderedWriter(1, max_pending=3) as writer:
        for i in range(3):
            writer.submit(lambda i=i: work(i), committed.append)
        block.set()
        raise RuntimeError("out of memory")
    assert committed == started  # frames 1 and 2 were cancelled unless they had started; none lost in between


def test_a_sigint_held_by_a_commit_waits_for_the_callback_after_it() -> None:
    order: list[str] = []
    with pytest.raises(KeyboardInterrupt), signals_held_after_commit():
        order.append("staged")
        with signals_held():  # the commit's renames
            signal.raise_signal(signal.SIGINT)  # Ctrl-C mid-commit: held
            order.append("committed")
        order.append("reported")  # still held: the frame's event goes out
        with signals_held():  # a second hold inside composes with the first
            order.append("again")
    assert order == ["staged", "committed", "reported", "again"]


def test_before_a_commit_nothing_is_held() -> None:
    order: list[str] = []
    with pytest.raises(KeyboardInterrupt), signals_held_after_commit():
        order.append("staging")
        signal.raise_signal(signal.SIGINT)  # staging stays interruptible
        order.append("never")
    assert order == ["staging"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_inline_writer_reports_a_frame_whose_commit_held_a_stop() -> None:
    committed: list[int] = []

    def work() -> int:
        with signals_held():
            signal.raise_signal(signal.SIGINT)
        return 7

    with pytest.raises(KeyboardInterrupt), OrderedWriter(0) as writer:
        writer.submit(work, committed.append)
    assert committed == [7]
