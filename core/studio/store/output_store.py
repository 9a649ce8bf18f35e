"""The output store: where a job's frames go, local folder or URL, behind one interface every engine uses.

Why one object: the local engine, the Ray engine's driver and `finalize` each opened the folder the same way
(make it, take its lock, complete what killed runs left, and at the end release the lock and remove the folders
this run made but did not use), and an output URL added hydrating a staging folder before and publishing it
after. `OutputStore` holds those steps once: `folder` is where frames are written (the staging folder of a URL),
`opened(...)` is the lock with its recovery, `published(...)` the URL's round trip, `make_folder` remembers
what a run made. The pieces behind it stay where they are: `lock.py`, `transaction.py`, `orphans.py`,
`remote.py`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..runtime.host import Host
from .lock import OutputLock, lock_output
from .orphans import Orphan, remove_orphans
from .remote import RemoteOutput, is_remote, local_path
from .transaction import clean_stale_temporaries, output_error, pause_point, recover_commits


def recover_left_overs(out: Path, host: Host) -> None:
    """Under the exclusive lock: complete the commits killed runs left half done, remove their temporaries."""
    recovered = recover_commits(out)
    if recovered:
        host.note(f"completed {len(recovered)} frame commit(s) that an interrupted earlier run had started")
    removed = clean_stale_temporaries(out)
    if removed:
        host.note(f"removed {len(removed)} temporary file(s) left by an interrupted earlier run")


class OutputStore:
    """A job's output: `folder` (local, or a URL's staging folder) and the steps every engine takes on it."""

    def __init__(
        self,
        out: str | os.PathLike,
        *,
        staging: str | os.PathLike | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.remote = RemoteOutput(os.fspath(out), staging, storage_options) if is_remote(out) else None
        self.folder = self.remote.staging if self.remote is not None else local_path(out)
        self._created: list[Path] = []

    def make_folder(self, folder: Path) -> None:
        """Make `folder` if missing, remembering it: removed again at the end if the run committed nothing there."""
        if folder.is_dir():
            return
        try:
            folder.mkdir(parents=True)
        except FileExistsError:
            return
        except OSError as exc:
            raise output_error(exc, folder) from None
        self._created.append(folder)

    def remove_unused_folders(self) -> None:
        for folder in reversed(self._created):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only succeeds when empty: nothing of this run (or anyone else's) is there

    @contextlib.contextmanager
    def opened(self, run_id: str, host: Host, *, shared: bool = False) -> Iterator[OutputLock]:
        """The folder made and locked for `run_id`; alone on it (not `shared`), what killed runs left is
        completed first. On exit the lock is released and the folders this run made but left empty go."""
        self.make_folder(self.folder)
        lock = None
        try:
            lock = lock_output(self.folder, run_id, host, shared=shared)
            pause_point("locked")
            if not shared:
                recover_left_overs(self.folder, host)
            yield lock
        finally:
            if lock is not None:
                lock.release()
            self.remove_unused_folders()

    @staticmethod
    def remove_orphans(orphans: list[Orphan]) -> None:
        """Remove the results of inputs that are gone (only when asked: `clean`)."""
        remove_orphans(orphans)

    @contextlib.contextmanager
    def published(self, run_id: str | None, host: Host, *, shared: bool = False) -> Iterator[None]:
        """For an output URL: what is published there is fetched into the staging folder first, and the staging
        folder is published as frames commit and at the end (`remote.RemoteOutput.mirrored`); a local folder
        needs neither."""
        if self.remote is None:
            yield
            return
        with self.remote.mirrored(run_id, shared=shared) as fetched:
            if fetched:
                host.note(
                    f"fetched {fetched} frame(s) published at {self.remote.url} into {self.remote.staging}"
                )
            yield
