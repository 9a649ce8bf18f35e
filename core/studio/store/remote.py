"""Outputs to a filesystem URL (`s3://`, `gs://`, `az://`, `memory://`, any fsspec protocol): staged, then published.

Why staging: a frame's commit (`transaction.py`) relies on atomic renames, and the folder lock (`lock.py`) on
flock; object stores have neither. So a job writes into a local *staging folder* with every guarantee of a local
run, and the publisher mirrors what is committed there to the URL, frame by frame, in an order that keeps the
remote copy as safe as the folder:

1. a frame whose remote copy is out of date first loses its remote JSON: from here it reads as incomplete there,
   as in step 1 of a local commit;
2. its files are uploaded (those not there already), then files its old remote version listed and the new one
   does not are removed;
3. the JSON goes last, and only if none of the frame's local files changed during the upload (a commit in
   progress: the next round takes it).

Documents that are not frames (a sequence's partial marker and index) follow their folder's frames, the index
last. An object PUT is atomic and read-after-write consistent (S3, GCS, Azure), so a reader that sees a frame's
JSON sees every file it lists, at the size it lists (`run.files`).

*Hydration*, before a run: the remote's committed frames that the staging folder lacks are downloaded (JSON
last), so that `--skip-existing`, the carrying over of tasks and `finalize` see what other machines published
(the chunks of a render-farm job). The manifest `.sapiens2-published.json` in the staging folder records each
file as published or hydrated (size, mtime), so a round uploads only what changed, and a file this staging
published and later removed (an obsolete preview, a stale frame, a partial marker) is removed there too, never
a file another machine published.

*Lock*: an object `.sapiens2-locks/<run>.<host>.<pid>.json` per writer. A run refuses to start while a lock of
another run is there (the chunks of one farm run share theirs). fsspec offers no atomic create-if-absent, so
this is best effort (two starts in the same second both see each other, and the later one gives way); the
staging folder's own lock is exact.

Connection settings (endpoint, credentials) are fsspec's and the protocol library's own: environment variables
such as `AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL` or `FSSPEC_S3_ENDPOINT_URL`, or `storage_options` in Python.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from ...formats.bundle import FORMAT_NAME
from ..errors import OutputError
from .lock import pid_alive
from .transaction import temp_name, write_document

MANIFEST_NAME = ".sapiens2-published.json"
LOCKS_FOLDER = ".sapiens2-locks"
STAGING_ENV = "SAPIENS2_STAGING"
INTERVAL_ENV = "SAPIENS2_PUBLISH_INTERVAL"
DEFAULT_INTERVAL = 30.0  # seconds between publishing rounds during a run
INSTALL_HINTS = {
    "cli": "install it with: pip install 'sapiens2-studio[remote]' (fsspec), plus the protocol's own package "
    "(s3fs for s3://, gcsfs for gs://, adlfs for az://)",
    "python": "pip install 'sapiens2-studio[remote]' and the protocol's package (s3fs, gcsfs, adlfs)",
}
_LOCAL_SCHEMES = ("", "file", "local")


def is_remote(out: str | os.PathLike) -> bool:
    """True for a URL of a filesystem other than this machine's (`s3://bucket/shot`); False for a path or file://."""
    text = os.fspath(out)
    return "://" in text and urlsplit(text).scheme.lower() not in _LOCAL_SCHEMES


def local_path(out: str | os.PathLike) -> Path:
    """The local folder `out` names: a path, or the path of a `file://` URL."""
    text = os.fspath(out)
    if "://" in text and urlsplit(text).scheme.lower() in ("file", "local"):
        text = urlsplit(text).path
    return Path(text).expanduser()


def default_staging(url: str) -> Path:
    """Where a URL's outputs are staged unless told: `$SAPIENS2_STAGING/<protocol>-<hash of the URL>`, default
    under `~/.cache/sapiens2/staging`. The same URL gives the same folder, so a resumed run finds its work."""
    base = os.environ.get(STAGING_ENV)
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "sapiens2" / "staging"
    scheme = urlsplit(url).scheme.lower() or "url"
    digest = hashlib.sha256(url.rstrip("/").encode("utf-8")).hexdigest()[:16]
    return root / f"{scheme}-{digest}"


def publish_interval() -> float:
    """Seconds between publishing rounds (`$SAPIENS2_PUBLISH_INTERVAL`, default 30)."""
    try:
        return max(0.05, float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL)))
    except ValueError:
        return DEFAULT_INTERVAL


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in PurePosixPath(rel).parts)


def _frame_files(rel: str, doc: Any) -> list[str] | None:
    """The files (relative to the output root) of a frame whose bundle JSON is `rel`, or None for a document."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        return None
    files = (doc.get("run") or {}).get("files")
    if not isinstance(files, dict):
        return None
    folder = PurePosixPath(rel).parent
    return sorted(
        str(folder / name) for name in files if not str(name).startswith((".", "/")) and ".." not in name
    )


class RemoteOutput:
    """An output URL and its staging folder: hydrate before a run, publish during and after it (module docstring)."""

    def __init__(
        self,
        url: str,
        staging: str | os.PathLike | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.staging = Path(staging).expanduser() if staging is not None else default_staging(self.url)
        self._options = dict(storage_options or {})
        self._fs: Any = None
        self._root = ""
        self._lock_path: str | None = None
        self._manifest_lock = threading.Lock()

    # ------------------------------------------------------------------------------------------------ access

    @property
    def fs(self) -> Any:
        if self._fs is None:
            try:
                import fsspec
            except ImportError:
                raise OutputError(
                    f"{self.url}: writing to a URL needs fsspec, which is not installed", hints=INSTALL_HINTS
                ) from None
            try:
                self._fs, self._root = fsspec.core.url_to_fs(self.url, **self._options)
            except (ImportError, ValueError) as exc:
                raise OutputError(
                    f"{self.url}: no filesystem for this URL ({exc})", hints=INSTALL_HINTS
                ) from None
            self._root = self._root.rstrip("/")
        return self._fs

    def _remote(self, rel: str) -> str:
        self.fs  # noqa: B018 - resolves the root
        return f"{self._root}/{rel}" if self._root else rel

    def _error(self, what: str, exc: BaseException) -> OutputError:
        return OutputError(
            f"{self.url}: cannot {what} ({type(exc).__name__}: {exc})",
            hints={
                "cli": "check the URL, your credentials and the endpoint (e.g. AWS_ENDPOINT_URL); what is staged "
                f"in {self.staging} is kept: run again with --skip-existing to publish it",
                "python": f"check the URL and credentials; the staged outputs in {self.staging} are kept",
            },
        )

    def check(self) -> None:
        """Before any model loads: the URL's filesystem answers, and its bucket (or the nearest folder above the
        output) exists. Buckets are never created: a typo should not make one."""
        try:
            fs = self.fs
            parts = [p for p in self._root.split("/") if p]
            lead = "/" if self._root.startswith("/") else ""
            for depth in range(len(parts), 0, -1):
                if fs.exists(lead + "/".join(parts[:depth])):
                    return
            if parts and not lead:  # bucket-style root (s3, gs, az): its first part must exist
                raise OutputError(
                    f"{self.url}: the bucket or top folder {parts[0]!r} does not exist there",
                    hints={"cli": "create it first (e.g. aws s3 mb), or check the URL for a typo"},
                )
        except OutputError:
            raise
        except Exception as exc:  # backends raise their own types (botocore, aiohttp, …)
            raise self._error("reach the output", exc) from None

    def _listing(self, under: str = "") -> dict[str, int]:
        """Relative path → size of every file under the URL (or its folder `under`), fresh: caches are dropped."""
        fs = self.fs
        with contextlib.suppress(AttributeError):
            fs.invalidate_cache()
        try:
            found = fs.find(
                self._remote(under) if under else (self._root or "/"), detail=True, withdirs=False
            )
        except FileNotFoundError:
            return {}
        prefix = f"{self._root}/" if self._root else ""
        out = {}
        for path, info in found.items():
            if prefix and not path.startswith(prefix):
                continue  # not under the output (a backend's odd path form): not ours to touch
            rel = path[len(prefix) :].lstrip("/")
            if rel and info.get("type", "file") == "file":
                out[rel] = int(info.get("size") or 0)
        return out

    def _local_files(self) -> dict[str, tuple[int, int]]:
        found = {}
        if not self.staging.is_dir():
            return found
        for path in self.staging.rglob("*"):
            rel = path.relative_to(self.staging).as_posix()
            if _hidden(rel) or not path.is_file():
                continue
            stat = _stat(path)
            if stat is not None:
                found[rel] = stat
        return found

    # ------------------------------------------------------------------------------------------------ manifest

    def _load_manifest(self) -> dict[str, dict[str, Any]]:
        try:
            doc = json.loads((self.staging / MANIFEST_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return doc.get("files", {}) if isinstance(doc, dict) and doc.get("url") == self.url else {}

    def _save_manifest(self, manifest: dict[str, dict[str, Any]]) -> None:
        try:
            self.staging.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{self.staging}: cannot create the staging folder ({exc})") from None
        write_document(self.staging / MANIFEST_NAME, {"url": self.url, "files": manifest})

    # ------------------------------------------------------------------------------------------------ hydrate

    def hydrate(self) -> int:
        """Download the remote's committed frames (and documents) that the staging folder lacks; the JSON of each
        frame last. Returns the number of frames fetched."""
        try:
            remote = self._listing()
            local = self._local_files()
            manifest = self._load_manifest()
            fetched = 0
            for rel in sorted(r for r in remote if r.endswith(".json") and not _hidden(r) and r not in local):
                doc = json.loads(self.fs.cat_file(self._remote(rel)))
                files = _frame_files(rel, doc)
                if files is not None and not all(f in remote for f in files):
                    continue  # incomplete there (being published): not a committed frame
                for name in files or []:
                    if name != rel and local.get(name, (None,))[0] != remote[name]:
                        self._download(name, manifest)
                self._download(rel, manifest, files=None if files is None else [f for f in files if f != rel])
                fetched += files is not None
            self._save_manifest(manifest)
        except OutputError:
            raise
        except Exception as exc:  # backends raise their own types
            raise self._error("read what is already published", exc) from None
        return fetched

    def _download(
        self, rel: str, manifest: dict[str, dict[str, Any]], *, files: list[str] | None = None
    ) -> None:
        target = self.staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / temp_name(target.name, uuid.uuid4().hex[:8])
        try:
            self.fs.get_file(self._remote(rel), str(tmp))
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        size, mtime = _stat(target) or (0, 0)
        manifest[rel] = {"size": size, "mtime_ns": mtime, **({"files": files} if files is not None else {})}

    # ------------------------------------------------------------------------------------------------ publish

    def publish(self, *, verify: bool = False, fresh: bool = True) -> list[str]:
        """One round: mirror the staging folder's committed state to the URL (module docstring). `verify`: list
        the remote again afterwards and fail if any published file is missing or has the wrong size. Returns the
        frames left for the next round (a commit rewrote them during the upload). `fresh`:
        start from a listing of the URL; otherwise from the manifest (the rounds during a run: a listing of a
        large job's URL is many requests, and only this run writes its frames there meanwhile)."""
        with self._manifest_lock:
            try:
                deferred = self._publish_round(fresh)
                if verify:
                    self._verify()
            except OutputError:
                raise
            except Exception as exc:  # backends raise their own types
                raise self._error("publish", exc) from None
            return deferred

    def _publish_round(self, fresh: bool) -> list[str]:
        deferred: list[str] = []
        manifest = self._load_manifest()
        local = self._local_files()
        remote = self._listing() if fresh else {rel: entry["size"] for rel, entry in manifest.items()}
        frames: dict[str, list[str]] = {}
        for rel in sorted(r for r in local if r.endswith(".json")):
            entry = manifest.get(rel)
            if entry is not None and (entry["size"], entry["mtime_ns"]) == local[rel]:
                if "files" in entry:  # unchanged since published: no need to read it again
                    frames[rel] = list(entry["files"])
                continue
            try:
                doc = json.loads((self.staging / rel).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # replaced meanwhile: the next round
            files = _frame_files(rel, doc)
            if files is not None:
                frames[rel] = [f for f in files if f != rel]
        claimed = {f for files in frames.values() for f in files} | set(frames)

        def current(rel: str) -> bool:
            entry = manifest.get(rel)
            return (
                entry is not None
                and (entry["size"], entry["mtime_ns"]) == local.get(rel)
                and remote.get(rel) == entry["size"]
            )

        # frames this staging published that are gone here (stale frames of a shorter re-run): remove there
        for rel, entry in sorted(manifest.items()):
            if "files" in entry and rel not in local:
                self._remove(rel, remote, manifest)
                for name in entry["files"]:
                    if name not in claimed and name not in local:
                        self._remove(name, remote, manifest)
        for rel, files in frames.items():
            if all(current(f) for f in [*files, rel]):
                continue
            if any(f not in local for f in files):
                deferred.append(rel)  # replaced while we listed: the next round
                continue
            old = manifest.get(rel, {}).get("files")
            if rel in remote:
                if old is None:
                    old = _frame_files(rel, json.loads(self.fs.cat_file(self._remote(rel)))) or []
                self._remove(rel, remote, manifest)
            for name in files:
                if not current(name):
                    self._upload(name, local[name], remote, manifest)
            for name in set(old or ()) - set(files) - claimed:
                if name not in local:
                    self._remove(name, remote, manifest)
            if any(_stat(self.staging / f) != local.get(f) for f in [*files, rel]):
                deferred.append(rel)  # a commit rewrote it meanwhile: the next round publishes it whole
                continue
            self._upload(rel, local[rel], remote, manifest, files=files)
        documents = sorted(
            (r for r in local if r not in claimed),
            key=lambda r: (PurePosixPath(r).parent, r.endswith(".sequence.json"), r),
        )
        for rel in documents:
            if not current(rel):
                self._upload(rel, local[rel], remote, manifest)
        for rel, entry in sorted(manifest.items()):
            if "files" not in entry and rel not in local and rel not in claimed:
                self._remove(rel, remote, manifest)  # e.g. a partial marker once its index is written
        self._save_manifest(manifest)
        return deferred

    def _upload(
        self,
        rel: str,
        stat: tuple[int, int],
        remote: dict[str, int],
        manifest: dict[str, dict[str, Any]],
        *,
        files: list[str] | None = None,
    ) -> None:
        target = self._remote(rel)
        parent = target.rsplit("/", 1)[0]
        with contextlib.suppress(Exception):
            self.fs.makedirs(parent, exist_ok=True)  # object stores need none; some filesystems do
        self.fs.put_file(str(self.staging / rel), target)
        remote[rel] = stat[0]
        manifest[rel] = {
            "size": stat[0],
            "mtime_ns": stat[1],
            **({"files": files} if files is not None else {}),
        }

    def _remove(self, rel: str, remote: dict[str, int], manifest: dict[str, dict[str, Any]]) -> None:
        if rel in remote:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(self._remote(rel))
            remote.pop(rel, None)
        manifest.pop(rel, None)

    def _verify(self) -> None:
        remote = self._listing()
        manifest = self._load_manifest()
        wrong = sorted(rel for rel, entry in manifest.items() if remote.get(rel) != entry["size"])
        if wrong:
            raise OutputError(
                f"{self.url}: {len(wrong)} published file(s) are missing or differ there: {', '.join(wrong[:5])}"
                + (" …" if len(wrong) > 5 else ""),
                hints={"cli": "run again with --skip-existing to publish them again"},
            )

    @contextlib.contextmanager
    def publishing(self, interval: float | None = None) -> Iterator[None]:
        """Publish every `interval` seconds while the body runs, and once more (verified) when it ends, also
        after an error or Ctrl-C, so that what was committed is not left only here."""
        interval = publish_interval() if interval is None else interval
        stop = threading.Event()

        def loop() -> None:
            fresh = True  # the first round starts from a listing, the others from the manifest
            while not stop.wait(interval):
                with contextlib.suppress(OutputError):  # a passing network error: the next round retries
                    self.publish(fresh=fresh)
                    fresh = False

        thread = threading.Thread(target=loop, name="sapiens2-publish", daemon=True)
        thread.start()
        try:
            yield
        except BaseException:
            stop.set()
            thread.join()
            with contextlib.suppress(OutputError):  # the job's own error is the one to report
                self.publish()
            raise
        stop.set()
        thread.join()
        for _ in range(3):  # nothing commits any more: a frame deferred here was caught mid-commit by a round
            if not self.publish():
                break
        self.publish(verify=True)  # then a round with nothing left to do, and the listing checked

    @contextlib.contextmanager
    def mirrored(self, run_id: str | None, *, shared: bool = False) -> Iterator[int]:
        """What a run into a URL is wrapped in, whatever runs (a predict job on any engine, finalize): the lock
        object held, the staging folder hydrated (yields the frames fetched), published during and after."""
        with self.session(run_id, shared=shared):
            fetched = self.hydrate()
            with self.publishing():
                yield fetched

    # ------------------------------------------------------------------------------------------------ lock

    @contextlib.contextmanager
    def session(self, run_id: str | None, *, shared: bool = False) -> Iterator[None]:
        """Hold a lock object at the URL for the body (module docstring). `shared`: other writers of the same run
        may hold theirs (render-farm chunks); `run_id` None: refuse every other writer (finalize)."""
        host, pid = socket.gethostname(), os.getpid()
        name = f"{run_id or 'exclusive'}.{host}.{pid}.json"
        info = {"run": run_id, "host": host, "pid": pid, "shared": shared, "started": time.time()}
        try:
            self._refuse_others(info)
            self._lock_path = self._remote(f"{LOCKS_FOLDER}/{name}")
            with contextlib.suppress(Exception):
                self.fs.makedirs(self._remote(LOCKS_FOLDER), exist_ok=True)
            self.fs.pipe_file(self._lock_path, json.dumps(info).encode("utf-8"))
            self._refuse_others(info, after_write=True)
        except OutputError:
            self._drop_lock()
            raise
        except Exception as exc:  # backends raise their own types
            self._drop_lock()
            raise self._error("write its lock", exc) from None
        try:
            yield
        finally:
            self._drop_lock()

    def _drop_lock(self) -> None:
        if self._lock_path is not None:
            with contextlib.suppress(Exception):
                self.fs.rm_file(self._lock_path)
            self._lock_path = None

    def _refuse_others(self, mine: dict[str, Any], *, after_write: bool = False) -> None:
        for rel in sorted(self._listing(LOCKS_FOLDER)):
            path = self._remote(rel)
            if path == self._lock_path:
                continue
            try:
                other = json.loads(self.fs.cat_file(path))
            except Exception:  # removed meanwhile, or not ours: not a lock to honour
                continue
            if not isinstance(other, dict):
                continue
            same_run = mine["run"] is not None and other.get("run") == mine["run"]
            if same_run and mine["shared"] and other.get("shared"):
                continue
            if other.get("host") == mine["host"] and not pid_alive(other.get("pid")):
                with contextlib.suppress(Exception):
                    self.fs.rm_file(path)  # its writer on this machine is gone
                continue
            if after_write and float(other.get("started", 0)) > mine["started"]:
                continue  # we both wrote; the later one gives way
            raise OutputError(
                f"{self.url}: another run is writing here: run {other.get('run') or '(finalize)'} on "
                f"{other.get('host')} (pid {other.get('pid')}); two runs into one output would mix their frames",
                hints={
                    "cli": "wait for it to finish, or choose another --out; if no such run is still going, delete "
                    f"{self.url}/{rel} and start again",
                    "python": f"wait for it, or delete {self.url}/{rel} if that run is gone",
                },
            )
