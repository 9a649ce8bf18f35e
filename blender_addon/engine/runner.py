"""The engine as a child process: start it, poll its events without blocking (Blender's modal timer), stop it
cleanly, or run it to the end (background mode, where no event loop turns). No ``bpy`` here.

Stopping sends what the CLI treats as Ctrl-C (SIGINT; on Windows CTRL_BREAK_EVENT, which the CLI takes as
SIGTERM): the frame being committed finishes, the output folder's lock is released and a sequence stays marked
partial, so `--skip-existing` completes it later. Only a process that ignores that for `kill_after` seconds is
killed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .events import EXIT_MEANINGS, RunProgress, parse_line
from .locate import Engine, child_environment

STDERR_LINES = 200


def _linux_prctl():
    """libc's prctl, looked up before any fork (a child of a threaded Blender must not load libraries)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _linux_prctl()
_PR_SET_PDEATHSIG = 1


def _child_setup(parent: int) -> None:
    """In the child before it runs the CLI: Ctrl-C's default action even where Blender (or a batch shell) ignores
    SIGINT (an ignored SIGINT is inherited, and the CLI would then never see our stop); on Linux, the same stop
    when Blender itself goes away (a crash, a kill), so no engine runs on behind it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # A blocked SIGINT is inherited too (a host thread may mask signals): unblocked, or the stop would stay pending.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGINT))
        if os.getppid() != parent:  # Blender went away before that took effect
            os.kill(os.getpid(), signal.SIGINT)


class EngineRun:
    """One CLI process; `poll()` returns the events that arrived since the last call and never waits."""

    def __init__(self, engine: Engine, args: Sequence[str], *, environ: dict | None = None) -> None:
        self.argv = engine.command(*args)
        self.progress = RunProgress()
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.cancel_requested_at: float | None = None
        self._killed = False
        options: dict[str, Any] = {}
        if sys.platform == "win32":
            options["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # so CTRL_BREAK reaches only it
        else:
            options["preexec_fn"] = functools.partial(_child_setup, os.getpid())
        self.process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_environment(environ),
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            **options,
        )
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True, name="sapiens2-events"),
            threading.Thread(target=self._read_stderr, daemon=True, name="sapiens2-stderr"),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = parse_line(line)
            if event is not None:
                self._queue.put(event)
        self._queue.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.rstrip("\n"))

    def poll(self) -> list[dict[str, Any]]:
        """New events (already fed into `progress`), without waiting."""
        new = []
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if event is None:
                self._queue.put(None)  # keep the end marker for `stream_ended`
                break
            self.progress.feed(event)
            new.append(event)
        return new

    @property
    def stream_ended(self) -> bool:
        return not self._readers[0].is_alive() and self._queue.qsize() <= 1

    @property
    def done(self) -> bool:
        """The process has exited and every event was read."""
        return self.process.poll() is not None and self.stream_ended

    def cancel(self) -> None:
        """Ask the run to stop as Ctrl-C would (once); `escalate()` kills a run that does not stop."""
        if self.cancel_requested_at is not None or self.process.poll() is not None:
            return
        self.cancel_requested_at = time.time()
        with contextlib.suppress(ProcessLookupError, OSError):
            if sys.platform == "win32":
                self.process.send_signal(signal.CTRL_BREAK_EVENT)
            else:
                self.process.send_signal(signal.SIGINT)

    def escalate(self, kill_after: float = 30.0) -> None:
        """Kill a run that has ignored the stop request for `kill_after` seconds (the next run recovers)."""
        if (
            self.cancel_requested_at is not None
            and not self._killed
            and self.process.poll() is None
            and time.time() - self.cancel_requested_at > kill_after
        ):
            self._killed = True
            self.process.kill()

    def wait(self, timeout: float | None = None) -> int:
        code = self.process.wait(timeout)
        for reader in self._readers:
            reader.join(timeout=5)
        self.poll()
        return code

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def outcome(self) -> Outcome:
        """How the run ended, once `done`."""
        code = self.process.poll()
        error = self.progress.error
        # A stop that came after the engine had finished anyway is no stop: the result is complete.
        stopped = code in (130, 143) or (
            self.cancel_requested_at is not None and self.progress.finished is None
        )
        if error is not None:
            message, hint = str(error.get("message") or ""), str(error.get("hint") or "")
        elif code not in (0, 1) or self.progress.finished is None:
            tail = [line for line in self.stderr if line.strip()]
            message = (
                tail[-1] if tail else f"the engine exited with status {code} ({EXIT_MEANINGS.get(code, '?')})"
            )
            hint = (
                ""
                if self.progress.events
                else "is the engine a Sapiens2 Studio with --progress json? (Test it)"
            )
        else:
            message, hint = "", ""
        return Outcome(code if code is not None else -1, stopped, message, hint, self.progress)


@dataclass
class Outcome:
    exit_code: int
    stopped: bool
    message: str  # the CLI's error message ("" when it finished)
    hint: str  # the CLI's own advice for that error
    progress: RunProgress

    @property
    def ok(self) -> bool:
        return self.exit_code in (0, 1) and self.progress.finished is not None and not self.stopped

    def report_text(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


def run_blocking(
    run: EngineRun,
    on_event: Callable[[EngineRun, dict[str, Any]], Any] | None = None,
    *,
    interval: float = 0.05,
    kill_after: float = 30.0,
) -> Outcome:
    """Run to the end in this thread (background mode): the same polls the modal operator makes; Ctrl-C here
    stops the engine cleanly too. `on_event` may call `run.cancel()`."""
    try:
        while not run.done:
            for event in run.poll():
                if on_event is not None:
                    on_event(run, event)
            run.escalate(kill_after)
            time.sleep(interval)
    except KeyboardInterrupt:
        run.cancel()
        run.wait(timeout=kill_after + 30)
    for event in run.poll():
        if on_event is not None:
            on_event(run, event)
    run.wait()
    return run.outcome()


def probe(engine: Engine, checkpoint_dir: str = "", timeout: float = 120.0) -> dict[str, Any]:
    """`sapiens2 info --json` (the preferences' Test button): the install report, or {"error": text}."""
    args = ["info", "--json"] + (["--checkpoint-dir", checkpoint_dir] if checkpoint_dir else [])
    try:
        proc = subprocess.run(
            engine.command(*args),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            env=child_environment(),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"could not run {' '.join(engine.argv)}: {exc}"}
    if proc.returncode != 0:
        tail = [line for line in proc.stderr.splitlines() if line.strip()]
        return {"error": tail[-1] if tail else f"exit status {proc.returncode}"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "the engine answered, but not with a report: is it an older Sapiens2 Studio?"}
