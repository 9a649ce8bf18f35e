"""Official Sapiens2 checkpoints: where they live on the Hugging Face Hub, where we keep them, and verified download.

Why this module exists: users should get the right file with one command, and a truncated or tampered file must
never be loaded silently. Every download is checked against the sha256 the Hub reports for the LFS object (and
against `PINNED_SHA256` where we know a value). When the Hub cannot be reached or `huggingface_hub` is missing,
the error says exactly which file to fetch from which URL and where to save it.

Local layout: `$SAPIENS2_HOME/<task>/<file>` (default `~/.cache/sapiens2/<task>/<file>`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .. import catalogue
from ..errors import Sapiens2Error

__all__ = [
    "HOME_ENV",
    "PINNED_SHA256",
    "TASK_SIZES",
    "CheckpointRef",
    "HubError",
    "checkpoint_home",
    "checkpoint_ref",
    "download_checkpoint",
    "ensure_checkpoint",
    "file_sha256",
    "find_checkpoint",
    "local_checkpoint_path",
    "manual_download_hint",
    "sha256_file",
    "verify_sha256",
]

HOME_ENV = "SAPIENS2_HOME"
HUB_URL = catalogue.HUB_URL
TASK_SIZES = catalogue.RELEASED  # sizes with public weights, per task
# Known-good sha256 per file name, checked in addition to the Hub's LFS hash. None are known today: the project
# has not been able to download the official files yet. Add entries as "file name": "hex digest".
PINNED_SHA256: dict[str, str] = {}
_CHUNK = 8 * 1024 * 1024
_HASH_CACHE = "sha256-cache.json"


class HubError(Sapiens2Error, RuntimeError):
    """A checkpoint could not be found, downloaded or verified; the message says how to fix it by hand."""


CheckpointRef = catalogue.OfficialFile


def own_file_hints(task: str) -> dict[str, str]:
    """How each front-end uses a checkpoint file the user already has (advice appended to download errors)."""
    return {
        "cli": f"or pass --checkpoint {task}=PATH",
        "python": "or pass the file's path to load_model()",
        "comfyui": "or put the file into ComfyUI's models/sapiens2 folder and pick it in 'checkpoint'",
    }


def _check_task_size(task: str, size: str) -> None:
    try:
        catalogue.check_task(task)
        catalogue.check_size(size)
    except catalogue.CatalogueError as exc:
        raise HubError(exc.message) from None


def checkpoint_ref(task: str, size: str, home: str | os.PathLike[str] | None = None) -> CheckpointRef:
    """The official Hub location of `task` at `size`; HubError where no public file exists."""
    _check_task_size(task, size)
    try:
        return catalogue.official_file(task, size)
    except catalogue.CatalogueError as exc:
        if catalogue.RELEASED.get(task):
            raise HubError(exc.message) from None
        dest = local_checkpoint_path(task, size, home)
        raise HubError(
            f"{exc.message}, so none can be downloaded. If you have one, save it as {dest}",
            hints=own_file_hints(task),
        ) from None


def checkpoint_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The checkpoint directory: `home` if given, else `$SAPIENS2_HOME`, else `~/.cache/sapiens2`."""
    if home is not None:
        return Path(home).expanduser()
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "sapiens2"


def local_checkpoint_path(task: str, size: str, home: str | os.PathLike[str] | None = None) -> Path:
    """Where `task`/`size` is (or would be) stored: `<home>/<task>/<official file name>`."""
    _check_task_size(task, size)
    return checkpoint_home(home) / task / catalogue.file_name(task, size)


def find_checkpoint(task: str, size: str, home: str | os.PathLike[str] | None = None) -> Path | None:
    """The local file for `task`/`size` if it exists, else None."""
    path = local_checkpoint_path(task, size, home)
    return path if path.is_file() else None


def manual_download_hint(ref: CheckpointRef, home: str | os.PathLike[str] | None = None) -> str:
    """One sentence telling the user how to get the file by hand (front-end advice goes into the error's hints)."""
    dest = local_checkpoint_path(ref.task, ref.size, home)
    return (
        f"Download {ref.filename} from {ref.url} (accept the Sapiens2 license on {ref.page} if asked) "
        f"and save it as {dest}"
    )


# --------------------------------------------------------------------------------------------------- hashing


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, streamed in chunks (checkpoints can be tens of GB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: str | os.PathLike[str], expected: str) -> str:
    """Check `path` against `expected` (hex); returns the digest or raises HubError naming both."""
    actual = sha256_file(path)
    if actual.lower() != expected.strip().lower():
        raise HubError(
            f"{path}: sha256 mismatch (expected {expected.lower()}, got {actual}); the file is corrupt or not the "
            "official one. Delete it and download again."
        )
    return actual


def file_sha256(path: str | os.PathLike[str], home: str | os.PathLike[str] | None = None) -> str:
    """sha256 of a checkpoint, cached in `<home>/sha256-cache.json` by path, size and mtime (hashing 20 GB is slow)."""
    file = Path(path).resolve()
    stat = file.stat()
    key = str(file)
    cache_path = checkpoint_home(home) / _HASH_CACHE
    cache: dict[str, Any] = {}
    try:
        cache = json.loads(cache_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cache = {}
    entry = cache.get(key)
    if (
        isinstance(entry, dict)
        and entry.get("size") == stat.st_size
        and entry.get("mtime_ns") == stat.st_mtime_ns
    ):
        return str(entry["sha256"])
    digest = sha256_file(file)
    cache[key] = {"sha256": digest, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache, indent=1), encoding="utf-8")
        os.replace(tmp, cache_path)
    except OSError:
        pass  # a read-only home only costs a re-hash next time
    return digest


# --------------------------------------------------------------------------------------------------- network


def _import_hub() -> Any:
    import huggingface_hub

    return huggingface_hub


def _remote_sha256(hub: Any, ref: CheckpointRef) -> str | None:
    """The sha256 of the file's LFS object as reported by the Hub (None if the Hub does not report one)."""
    infos = hub.HfApi().get_paths_info(ref.repo_id, [ref.filename])
    for info in infos:
        lfs = getattr(info, "lfs", None)
        if lfs is None:
            continue
        value = lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)
        if value:
            return str(value)
    return None


def _fetch_file(hub: Any, ref: CheckpointRef, dest_dir: Path, force: bool = False) -> Path:
    """Download into `dest_dir` (resumable; huggingface_hub shows its own progress bar)."""
    return Path(hub.hf_hub_download(ref.repo_id, ref.filename, local_dir=str(dest_dir), force_download=force))


def download_checkpoint(
    task: str, size: str, home: str | os.PathLike[str] | None = None, *, force: bool = False
) -> Path:
    """Download the official file to `<home>/<task>/<file>` and verify its sha256; returns the path.

    The file is downloaded and verified in `<home>/<task>/.download/` and only then moved to its final name, so
    a file at the final name has always been verified, even if the process was stopped while hashing (which
    takes a minute for the large models); an interrupted download resumes from the staging folder.
    """
    ref = checkpoint_ref(task, size, home)
    dest = local_checkpoint_path(task, size, home)
    if dest.is_file() and not force:
        return dest
    try:
        hub = _import_hub()
    except ImportError:
        install = {
            "python": 'pip install "sapiens2-studio[hub]"',
            "cli": 'pip install "sapiens2-studio[hub]"',
            "comfyui": "python -m pip install huggingface_hub with ComfyUI's Python, then restart ComfyUI",
        }
        own = own_file_hints(task)
        raise HubError(
            "downloading needs the optional 'huggingface_hub' package. " + manual_download_hint(ref, home),
            hints={k: f"Install it ({install[k]}), {own[k]}" for k in own},
        ) from None
    staging = dest.parent / ".download"
    staging.mkdir(parents=True, exist_ok=True)
    try:
        expected = _remote_sha256(hub, ref)
        fetched = _fetch_file(hub, ref, staging, force)
    except Exception as exc:  # offline, gated repo, HTTP errors: all end the same way for the user
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        raise HubError(
            f"could not download {ref.filename} ({reason}). " + manual_download_hint(ref, home),
            hints=own_file_hints(task),
        ) from exc
    pinned = PINNED_SHA256.get(ref.filename)
    try:
        if expected is None and pinned is None:
            raise HubError(
                f"the Hub did not report a sha256 for {ref.filename}, so the download cannot be verified. "
                + manual_download_hint(ref, home),
                hints=own_file_hints(task),
            )
        digest = verify_sha256(fetched, expected or pinned or "")
        if pinned is not None and digest != pinned.lower():
            raise HubError(
                f"{ref.filename}: sha256 {digest} matches the Hub but not the pinned value {pinned}; the Hub "
                "file changed. Update sapiens2-studio or report this."
            )
    except HubError:
        fetched.unlink(missing_ok=True)
        raise
    os.replace(fetched, dest)  # same folder tree: atomic; only verified files ever get the final name
    _remember_hash(dest, digest, home)
    return dest


def _remember_hash(path: Path, digest: str, home: str | os.PathLike[str] | None) -> None:
    """Seed the hash cache so the first `predict` does not re-hash a freshly verified file."""
    cache_path = checkpoint_home(home) / _HASH_CACHE
    try:
        cache = json.loads(cache_path.read_text(encoding="utf-8")) if cache_path.is_file() else {}
        stat = path.resolve().stat()
        cache[str(path.resolve())] = {"sha256": digest, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
        cache_path.write_text(json.dumps(cache, indent=1), encoding="utf-8")
    except (OSError, ValueError):
        pass


def ensure_checkpoint(
    task: str, size: str, home: str | os.PathLike[str] | None = None, *, allow_download: bool = True
) -> Path:
    """The local checkpoint for `task`/`size`, downloading it on first use unless `allow_download` is False."""
    found = find_checkpoint(task, size, home)
    if found is not None:
        return found
    ref = checkpoint_ref(task, size, home)  # raises for albedo / unreleased sizes with the right advice
    if not allow_download:
        raise HubError(
            f"{ref.filename} is not in {checkpoint_home(home)} and downloads are off. "
            + manual_download_hint(ref, home),
            hints=own_file_hints(task),
        )
    return download_checkpoint(task, size, home)
