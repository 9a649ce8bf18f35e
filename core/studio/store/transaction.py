"""Per-frame output transactions: a frame's files appear together, committed with the bundle JSON last.

Every file of a frame (EXR, previews, keypoint JSONs, mesh) is first written under a hidden temporary name in the
same folder (`.<final name>.<token>.tmp<ext>`). `FrameTransaction.commit` then renames them in one fixed order:

0. a commit journal `.<name>.commit.json` (the list of renames below) is written atomically;
1. the old `<name>.json` is removed: from here until step 4 the frame has no JSON, i.e. it is *incomplete*
   (readers, Blender and `--skip-existing` treat it as missing; nothing half-new looks complete);
2. the EXR is renamed, then every other staged file in name order;
3. files of an earlier run for `<name>` that this commit does not hold are removed;
4. the JSON is renamed last: the commit point. Its `run.files` lists every file of the commit with its size, so
   a later run can verify the set, not just see it;
5. the journal is removed.

SIGINT/SIGTERM arriving during steps 1–5 are held until the commit is done, so Ctrl-C never splits a frame; where the
caller records and reports the frame right after (`signals_held_after_commit`), until that is done too, so a stop
never leaves a committed frame unreported.
SIGKILL (or a crash) can stop a commit between 1 and 5: the next run, under the folder lock, finds the journal and
rolls the commit forward (`recover_commits`: the remaining renames, then the JSON), so the frame ends up wholly
new, never half. Temporaries of a run killed before step 0 stay behind hidden; `clean_stale_temporaries` removes
them at the start of the next run (under the lock, so none can belong to a live writer). Write errors become
`OutputError`s naming the user's file, never a temporary. (Durability against power loss is not attempted: files
are not fsynced.)

`SAPIENS2_TEST_PAUSE_AT` (tests only, read in `pause_point` alone): `POINT[:N[:ACTION]]` makes the N-th arrival
(default 1) at a named point act: `kill` (SIGKILL itself), `kill-once:PATH` (SIGKILL itself if it is the first to
create PATH: one worker of many dies), `int` (SIGINT itself; held like a user's Ctrl-C),
`wait:PATH` (create PATH.reached, then wait up to 120 s for PATH to exist). Points: `staged` (all temporaries of a
frame written), `exr` (EXR renamed, JSON not yet), `files` (all but the JSON committed), `committed` (JSON
renamed), `index` (before a sequence index is written), `locked` (the folder lock taken, before any model loads).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ...errors import Sapiens2Error
from ...formats.bundle import CaptureFrame, dump_document, restage_bundle, stage_bundle
from ...formats.casting import HalfCast
from ..errors import OutputError

PAUSE_ENV = "SAPIENS2_TEST_PAUSE_AT"
# Temporaries of this module, of `write_bundle` and of older versions (`.<name>.<suffix>.<token>.tmp.png`).
TEMP_PATTERN = re.compile(r"^\..+\.[0-9a-f]{8}\.tmp(\.[A-Za-z0-9]+)?$")
_pause_counts: dict[str, int] = {}


def pause_point(point: str) -> None:
    """Test hook (see the module docstring): does nothing unless SAPIENS2_TEST_PAUSE_AT names `point`."""
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    name, _, rest = spec.partition(":")
    if name != point:
        return
    count, _, action = rest.partition(":")
    _pause_counts[point] = _pause_counts.get(point, 0) + 1
    if _pause_counts[point] != int(count or 1):
        return
    if action in ("", "kill"):
        os.kill(os.getpid(), signal.SIGKILL)
    elif action.startswith("kill-once:"):  # one of many processes (workers) dies: the first to get here
        with contextlib.suppress(FileExistsError):
            os.close(os.open(action[len("kill-once:") :], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os.kill(os.getpid(), signal.SIGKILL)
    elif action == "int":
        os.kill(os.getpid(), signal.SIGINT)
    elif action.startswith("wait:"):
        gate = Path(action[len("wait:") :])
        Path(f"{gate}.reached").write_text(str(os.getpid()), encoding="utf-8")
        deadline = time.monotonic() + 120
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


# Open `signals_held_after_commit` blocks of the main thread, innermost last: each takes over the hold of the first
# commit inside it (the handlers to restore and the signals held), to release it when the block ends.
_after_commit: list[dict[str, Any]] = []


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while the block runs; they are delivered when it ends, so an interrupt lands
    between two frames, never inside one commit. Inside `signals_held_after_commit` the first such hold lasts
    until that block ends instead.

    Why Python handlers and not a signal mask: torch's worker threads do not block signals, so the kernel may
    deliver a Ctrl-C to one of them and Python would still raise it in the main thread mid-commit. A deferring
    handler catches it wherever it lands. Python runs handlers only in the main thread, so elsewhere (ComfyUI's
    worker thread, which gets no signals) this is a no-op. Nested holds compose: an inner one delivers what it
    held to the outer one's handler, which holds it in turn."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def defer(signum: int, frame: object) -> None:
        pending.append(signum)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        old = signal.signal(sig, defer)
        previous[sig] = signal.SIG_DFL if old is None else old
    try:
        yield
    finally:
        block = _after_commit[-1] if _after_commit else None
        if block is not None and block["previous"] is None:  # held on until the enclosing block ends
            block["previous"], block["pending"] = previous, pending
        else:
            _release(previous, pending)


def _release(previous: Mapping[int, Any], pending: list[int]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    for sig in dict.fromkeys(pending):  # now, to the program's own handlers (KeyboardInterrupt, …)
        signal.raise_signal(sig)


@contextlib.contextmanager
def signals_held_after_commit() -> Iterator[None]:
    """A stop (SIGINT, SIGTERM) held by a commit inside this block stays held until the block ends, so what the
    caller does right after the commit (record the frame, report it: a `frame` event) happens with it: a stop
    lands before the commit began or after the frame was reported, never between. Until a commit begins nothing
    is held (staging a frame's files stays interruptible). Main thread only, like `signals_held`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    block: dict[str, Any] = {"previous": None, "pending": []}
    _after_commit.append(block)
    try:
        yield
    finally:
        _after_commit.pop()  # blocks nest: this one is the innermost
        if block["previous"] is not None:
            _release(block["previous"], block["pending"])


def temp_name(final_name: str, token: str) -> str:
    """Hidden temporary beside `final_name`; it keeps the extension, since writers pick the format from it."""
    return f".{final_name}.{token}.tmp{Path(final_name).suffix}"


def clean_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporaries that killed runs left in `folder` and its sub-folders (sequences), one level deep.

    Call only while holding the folder's lock: then no live writer owns any of them."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for place in (folder, *(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())):
        for path in place.iterdir():
            if TEMP_PATTERN.match(path.name) and path.is_file():
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path)
    return removed


JOURNAL_SUFFIX = ".commit.json"
JOURNAL_FORMAT = "sapiens2-commit"


def journal_path(folder: Path, name: str) -> Path:
    """Where the commit journal of frame `<name>` lives while its commit runs."""
    return folder / f".{name}{JOURNAL_SUFFIX}"


def recover_commits(folder: Path) -> list[str]:
    """Roll forward every commit a killed run left half done in `folder` and its sub-folders (one level); returns
    the frames completed. Call only while holding the folder's lock, before `clean_stale_temporaries`."""
    done: list[str] = []
    if not folder.is_dir():
        return done
    for place in (folder, *(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())):
        for journal in sorted(place.glob(f".*{JOURNAL_SUFFIX}")):
            try:
                doc = json.loads(journal.read_text(encoding="utf-8"))
                renames = [(str(a), str(b)) for a, b in doc["renames"]]
                obsolete = [str(n) for n in doc.get("obsolete", [])]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not ours or unreadable: leave it for a person to look at
            if any(Path(n).name != n for pair in renames for n in pair) or any(
                Path(n).name != n for n in obsolete
            ):
                continue
            with signals_held():
                for tmp, final in renames[:-1]:
                    if (place / tmp).exists():
                        os.replace(place / tmp, place / final)
                for final in obsolete:
                    if final not in {f for _, f in renames}:
                        with contextlib.suppress(FileNotFoundError):
                            (place / final).unlink()
                json_tmp, json_final = renames[-1]
                if (place / json_tmp).exists():
                    os.replace(place / json_tmp, place / json_final)
                journal.unlink()
            done.append(str(place / renames[-1][1]))
    return done


def output_error(exc: BaseException, path: Path) -> OutputError:
    """An OutputError for a failed write of the user's file `path` (never the temporary's name)."""
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    code = getattr(cause, "errno", None)
    folder = path.parent
    if code is None and _free_bytes(folder) < 1 << 20:  # e.g. OpenEXR's own "cannot write" on a full disk
        code = errno.ENOSPC
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", -1)):
        return OutputError(
            f"no space left on the disk of {folder} while writing {path.name}; the frames committed so far are "
            "complete, this one was not written",
            hints={
                "cli": "free some space (or choose another --out) and rerun with --skip-existing to finish",
                "python": "free some space and rerun with skip_existing=True to finish",
            },
        )
    if code == errno.EROFS:
        return OutputError(f"{folder} is on a read-only file system; cannot write {path.name}")
    if code in (errno.EACCES, errno.EPERM):
        return OutputError(f"permission denied writing {path} ; check the folder's permissions")
    if isinstance(exc, Sapiens2Error) and not isinstance(cause, OSError):
        return OutputError(f"could not write {path}: {exc.message}")
    reason = os.strerror(code) if code else str(exc)
    return OutputError(f"could not write {path} ({reason})")


def _free_bytes(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 1 << 62


def write_document(path: Path, doc: Mapping[str, Any]) -> Path:
    """Write a small JSON document (index, marker) atomically: temporary, then rename over `path`."""
    tmp = path.with_name(temp_name(path.name, uuid.uuid4().hex[:8]))
    try:
        tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False), encoding="utf-8")
        with signals_held():
            os.replace(tmp, path)
    except OSError as exc:
        raise output_error(exc, path) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return path


class FrameTransaction:
    """The files of one frame `<name>` in `folder`, staged under temporaries and committed together.

    >>> with FrameTransaction(folder, "photo") as tx:
    ...     tx.stage("photo.seg.png", lambda tmp: save_png(tmp, preview))
    ...     tx.stage_bundle(frame)           # the EXR now; the JSON at commit, with `run.files`
    ...     json_path = tx.commit(obsolete=["photo.pose.png"])
    Leaving the block without a commit (an error, an interrupt) removes every temporary.
    """

    def __init__(self, folder: Path, name: str) -> None:
        self.folder, self.name = folder, name
        self.token = uuid.uuid4().hex[:8]
        self.staged: dict[str, Path] = {}  # final name → temporary
        self.kept: dict[str, int] = {}  # final name → bytes of a committed file this commit keeps unchanged
        self.doc: dict[str, Any] | None = None

    def __enter__(self) -> FrameTransaction:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def _temp(self, final_name: str) -> Path:
        if final_name in self.staged:
            raise OutputError(f"{final_name} is staged twice in one frame")
        tmp = self.folder / temp_name(final_name, self.token)
        self.staged[final_name] = tmp
        return tmp

    def stage(self, final_name: str, write: Callable[[Path], object]) -> None:
        """Write one file through `write(temporary path)`."""
        tmp = self._temp(final_name)
        try:
            write(tmp)
        except (OSError, Sapiens2Error) as exc:
            raise output_error(exc, self.folder / final_name) from None

    def keep(self, final_names: list[str]) -> None:
        """Committed files of `<name>` that this commit keeps as they are: listed in `run.files`, not removed."""
        for final in final_names:
            try:
                self.kept[final] = (self.folder / final).stat().st_size
            except OSError as exc:
                raise output_error(exc, self.folder / final) from None

    def stage_bundle(
        self,
        frame: CaptureFrame,
        *,
        source_exr: Path | None = None,
        points_changed: bool = False,
        compression: str | None = None,
        half: HalfCast | None = None,
    ) -> None:
        """Write the bundle's EXR now: from `frame` with `compression` (None: the default), or restaged from
        the committed `source_exr` in that file's own compression (`restage_bundle`); its JSON (with the sizes
        of all staged files) is written at commit. `half`: the float16 converter (core/formats/casting.py)."""
        exr = f"{self.name}.exr"
        tmp = self._temp(exr)
        try:
            if source_exr is None:
                self.doc = stage_bundle(tmp, self.name, frame, compression=compression, half=half)
            else:
                self.doc = restage_bundle(
                    tmp, source_exr, self.name, frame, points_changed=points_changed, half=half
                )
        except OSError as exc:
            raise output_error(exc, self.folder / exr) from None
        except Sapiens2Error as exc:
            if isinstance(exc.__cause__, OSError) or _free_bytes(self.folder) < 1 << 20:
                raise output_error(exc, self.folder / exr) from None
            raise

    def sizes(self) -> dict[str, int]:
        """Final name → bytes of every file staged so far (and of those kept)."""
        sizes = {**self.kept, **{final: tmp.stat().st_size for final, tmp in self.staged.items()}}
        return dict(sorted(sizes.items()))

    def commit(self, obsolete: Iterable[str] = ()) -> Path:
        """Commit in the documented order (module docstring); `obsolete`: file names of `<name>` to remove unless
        this commit holds them. Returns the JSON path."""
        if self.doc is None:
            raise OutputError(f"{self.name}: a frame commit needs its bundle (stage_bundle) first")
        json_name = f"{self.name}.json"
        if isinstance(self.doc.get("run"), dict):
            self.doc["run"]["files"] = self.sizes()
        json_tmp = self._temp(json_name)
        try:
            json_tmp.write_text(dump_document(self.doc), encoding="utf-8")
        except OSError as exc:
            raise output_error(exc, self.folder / json_name) from None
        pause_point("staged")
        exr = f"{self.name}.exr"
        order = [exr, *sorted(n for n in self.staged if n not in (exr, json_name))]
        final_json = self.folder / json_name
        obsolete = [n for n in obsolete if n not in self.staged and n not in self.kept]
        journal = journal_path(self.folder, self.name)
        renames = [[self.staged[f].name, f] for f in order] + [[json_tmp.name, json_name]]
        write_document(journal, {"format": JOURNAL_FORMAT, "renames": renames, "obsolete": obsolete})
        try:
            with signals_held():
                with contextlib.suppress(FileNotFoundError):
                    final_json.unlink()
                for final in order:
                    os.replace(self.staged[final], self.folder / final)
                    if final == exr:
                        pause_point("exr")
                for final in obsolete:
                    with contextlib.suppress(FileNotFoundError):
                        (self.folder / final).unlink()
                pause_point("files")
                os.replace(json_tmp, final_json)
                journal.unlink()
        except OSError as exc:
            raise output_error(exc, final_json) from None
        self.staged.clear()
        pause_point("committed")
        return final_json

    def discard(self) -> None:
        """Remove every temporary still staged (after an error or interrupt)."""
        for tmp in self.staged.values():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self.staged.clear()


def commit_document(folder: Path, name: str, doc: Mapping[str, Any]) -> Path:
    """Replace only `<name>.json` (the other files of the frame unchanged and already verified), atomically: used
    to record that a verified frame belongs to the run being completed."""
    path = folder / f"{name}.json"
    tmp = folder / temp_name(path.name, uuid.uuid4().hex[:8])
    try:
        tmp.write_text(dump_document(doc), encoding="utf-8")
        with signals_held():
            os.replace(tmp, path)
    except OSError as exc:
        raise output_error(exc, path) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    pause_point("committed")
    return path
