"""One run per output folder: `<out>/.sapiens2.lock`, held for the whole run.

Two modes. *Exclusive* (the local engine, `finalize`): one process, which may also complete or delete what killed
runs left (`transaction.recover_commits`, `clean_stale_temporaries`). *Shared* (the chunks of a render-farm job,
the workers of a distributed run): any number of processes of the **same run id** write frames at once — their
commits never collide (per-frame journals, unique temporary names) — while a process of another run, shared or
exclusive, is refused. Shared writers never recover or clean anything (a journal or temporary may belong to a
live writer); that waits for the next exclusive holder, which by holding the flock knows that no writer is live.

Why: two runs into one folder would replace each other's frames and both report success. The second run is
refused before any model loads, with the holder's pid, host, run id and start time.

How (shared): the first writer takes the flock exclusively, records `mode: shared` and its run id, then turns it
into a shared flock; later writers take it shared and join only when the record names their run. The last one
out (the one that can turn its flock exclusive again) removes the file.

How (exclusive): the lock file is opened and `flock`ed (exclusive, non-blocking). The kernel drops an flock when its process
dies, however it dies (SIGKILL, OOM killer, power cut on a local disk), so a crashed run never blocks the next:
whoever gets the flock knows the previous holder is gone, takes the file over and says so (stale-lock recovery).
The file's text (pid, host, run, started) is only for messages. A holder on *another* host whose flock we could
still take is not trusted to be dead (network file systems may not share flocks): that run is refused with the
path to delete. Where flock is not available (Windows, some network mounts) the file is created exclusively
instead; a leftover file is taken over only when it names this host and a pid that no longer exists.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import OutputError
from ..runtime.host import Host

LOCK_NAME = ".sapiens2.lock"

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def pid_alive(pid: Any) -> bool:
    """Whether process `pid` exists on this host (True when unsure: a lock is never stolen on a guess)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if sys.platform == "win32":
        return True  # no safe probe without extra packages; the user is told which file to delete
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(info: dict[str, Any]) -> str:
    if not info:
        return "another run (no details recorded)"
    if info.get("mode") == "shared":
        return (
            f"the writers of run {info.get('run', '?')} (chunks or workers; the first, pid {info.get('pid', '?')} "
            f"on host {info.get('host', '?')}, started {info.get('started', '?')})"
        )
    return (
        f"run {info.get('run', '?')} (pid {info.get('pid', '?')} on host {info.get('host', '?')}, started "
        f"{info.get('started', '?')})"
    )


class OutputLock:
    """The exclusive lock of one output folder for one run; a context manager.

    `acquire()` raises OutputError when another live run holds the folder, and returns a note (or None) when it
    recovered the lock of a run that died."""

    def __init__(self, folder: Path, run_id: str, *, shared: bool = False) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.run_id = run_id
        self.shared = shared
        self._fd: int | None = None

    def _info(self) -> dict[str, Any]:
        return {
            "mode": "shared" if self.shared else "exclusive",
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "run": self.run_id,
            "started": _now(),
            "command": " ".join(sys.argv[:1] + sys.argv[1:6])[:300],
        }

    def _refuse(self, info: dict[str, Any], why: str) -> OutputError:
        return OutputError(
            f"{self.folder} is in use by {_holder(info)}{why}; two runs into one folder would overwrite each "
            f"other's results. Wait for it to finish, or choose another output folder. If that run is no longer "
            f"running, delete {self.path}",
            hints={"cli": "(or pass another --out)"},
        )

    def acquire(self) -> str | None:
        if self.shared:
            return self._acquire_shared()
        if fcntl is None:
            return self._acquire_exclusive()
        for _ in range(10):  # the holder may unlink the file between our open and our flock: then retry
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise self._refuse(_read(self.path), "") from None
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    return self._acquire_exclusive()
                raise
            try:
                same_file = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same_file = False
            if not same_file:
                os.close(fd)
                continue
            previous = _read(self.path)
            if previous and previous.get("host") not in (None, socket.gethostname()):
                os.close(fd)
                raise self._refuse(previous, " (on another machine: it cannot be checked from here)")
            self._write(fd)
            self._fd = fd
            if previous:
                return f"{self.folder}: recovered the lock of {_holder(previous)}, which is no longer running"
            return None
        raise OutputError(f"{self.path}: could not take the output folder's lock (it keeps changing)")

    def _open_same(self) -> int | None:
        """The lock file opened, or None when a releasing holder unlinked it meanwhile (then: try again)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
        return None

    def _acquire_shared(self) -> str | None:
        """Join the writers of this run (module docstring); refuse any other run."""
        if fcntl is None:
            raise OutputError(
                f"{self.folder}: writers sharing an output folder need flock, which this system lacks; "
                "run the chunks one after another or into separate folders"
            )
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            fd = self._open_same()
            if fd is None:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                first = True
            except BlockingIOError:
                first = False
            if first:
                previous = _read(self.path)
                foreign = previous.get("host") not in (None, socket.gethostname())
                if foreign and not (previous.get("mode") == "shared" and previous.get("run") == self.run_id):
                    os.close(fd)
                    raise self._refuse(previous, " (on another machine: it cannot be checked from here)")
                self._write(fd)
                fcntl.flock(fd, fcntl.LOCK_SH)  # not atomic: an exclusive taker may slip in; checked below
            else:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:  # held exclusively: another run, or a writer of ours that is joining
                    info = _read(self.path)
                    os.close(fd)
                    if info.get("mode") == "shared" and info.get("run") == self.run_id:
                        time.sleep(0.05)
                        continue
                    raise self._refuse(info, "") from None
            info = _read(self.path)
            if info.get("mode") != "shared" or info.get("run") != self.run_id:
                os.close(fd)
                if not info:  # the first writer is still writing its record
                    time.sleep(0.05)
                    continue
                raise self._refuse(info, "")
            self._fd = fd
            return None
        raise OutputError(
            f"{self.path}: could not join the writers of run {self.run_id} (the lock keeps changing)"
        )

    def _write(self, fd: int) -> None:
        data = json.dumps(self._info(), indent=1).encode("utf-8")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)
        os.fsync(fd)

    def _acquire_exclusive(self) -> str | None:
        """Fallback without flock: an exclusively created file; a leftover one of a dead local pid is replaced."""
        note = None
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                previous = _read(self.path)
                local = previous.get("host") == socket.gethostname()
                if not local or pid_alive(previous.get("pid")):
                    raise self._refuse(previous, "") from None
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                note = f"{self.folder}: recovered the lock of {_holder(previous)}, which is no longer running"
                continue
            self._write(fd)
            self._fd = fd
            return note
        raise self._refuse(_read(self.path), "")

    def release(self) -> None:
        """Remove the lock file, then drop the lock (in this order, see `acquire`'s retry); a shared writer removes
        it only when it is the last one (its flock turns exclusive)."""
        if self._fd is None:
            return
        last = True
        if self.shared and fcntl is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                last = False
        if last:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self._fd)
        self._fd = None

    def share(self) -> None:
        """Turn an exclusive lock into a shared one for this run's other writers to join (a distributed run's
        driver, after it recovered what earlier runs left). Like a first shared writer's, the switch is not
        atomic: a taker slipping in between finds the record naming this run in shared mode, so only this run's
        writers can join."""
        if fcntl is None:
            raise OutputError(
                f"{self.folder}: writers sharing an output folder need flock, which this system lacks"
            )
        if self.shared or self._fd is None:
            return
        self.shared = True
        self._write(self._fd)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def exclusive(self, wait: float = 60.0) -> None:
        """Turn a shared lock into an exclusive one once the other writers are gone (a distributed run's driver,
        before it completes what killed workers left and finalizes); OutputError after `wait` seconds."""
        if not self.shared or self._fd is None or fcntl is None:
            return
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise self._refuse(_read(self.path), " (its workers have not let go)") from None
                time.sleep(0.1)
        try:
            same_file = os.fstat(self._fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            same_file = False
        self.shared = False
        if not same_file:  # a writer that left last removed the file meanwhile: take the folder afresh
            os.close(self._fd)
            self._fd = None
            self.acquire()
            return
        self._write(self._fd)

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_output(folder: Path, run_id: str, host: Host | None = None, *, shared: bool = False) -> OutputLock:
    """Take the folder's lock for `run_id` (note a recovered stale lock on `host`); release it when done.
    `shared`: join the other writers of the same run (module docstring)."""
    lock = OutputLock(folder, run_id, shared=shared)
    note = lock.acquire()
    if note and host is not None:
        host.note(note)
    return lock
