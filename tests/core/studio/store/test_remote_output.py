"""Outputs to a filesystem URL (issue #12: `--out s3://…`; `core/studio/store/remote.py`, docs/scale.md).

Against a real S3 API (moto's S3 server, spoken to by s3fs, as a user's job would speak to AWS or MinIO): a job
published to `s3://` equals the same job written to a folder, every EXR channel and JSON value; render-farm chunks
staged on two "machines" (two staging folders) and finalized from a third equal one full run; a job killed
mid-run resumes with --skip-existing and redoes only what is missing; a lock object of another run refuses a
second writer. The publishing order (a frame's JSON only after all its files, and removed before they change) is
checked on a recording in-memory filesystem.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from pathlib import Path
from typing import ClassVar

import pytest

pytest.importorskip("OpenEXR")
fsspec = pytest.importorskip("fsspec")
s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from fsspec.implementations.memory import MemoryFileSystem  # noqa: E402
from sapiens2_studio.cli.main import main  # noqa: E402
from sapiens2_studio.core.studio.store.remote import LOCKS_FOLDER, RemoteOutput, is_remote  # noqa: E402
from studio_runs import assert_same_outputs, predict, predict_killed_after  # noqa: E402

TASKS = "pose,pointmap,normal"
FRAMES = 6
BUCKET = "studio"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A local S3 endpoint; the environment points boto (s3fs) at it, as AWS_ENDPOINT_URL does for MinIO."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "studio",
        "AWS_SECRET_ACCESS_KEY": "studio-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAPIENS2_PUBLISH_INTERVAL": "0.2",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    fs = s3fs.S3FileSystem()
    fs.mkdir(BUCKET)
    yield fs
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, home, walk) -> Path:
    out = tmp_path_factory.mktemp("local")
    assert predict(home, walk, out, "--run-id", "local") == 0
    return out


def download(fs, url: str, into: Path) -> Path:
    """The remote tree as a reader sees it; no lock object may be left."""
    fs.invalidate_cache()
    root = url.removeprefix("s3://")
    found = fs.find(root)
    assert not [p for p in found if f"/{LOCKS_FOLDER}/" in p], found
    for path in found:
        target = into / path[len(root) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(fs.cat_file(path))
    return into


def assert_frames_complete(folder: Path) -> int:
    """Every frame JSON's listed files are there at the listed size (what a reader may rely on)."""
    count = 0
    for path in folder.rglob("*.json"):
        doc = json.loads(path.read_text(encoding="utf-8"))
        files = (doc.get("run") or {}).get("files") if doc.get("format") == "sapiens2-capture" else None
        if files is None:
            continue
        for name, size in files.items():
            assert (path.parent / name).stat().st_size == size, (path, name)
        count += 1
    return count


def test_the_s3_extra_resolves_beside_moto_as_the_test_set_up_installs_it() -> None:
    """`pip install ".[s3]" "moto[server]"` (issue 33) did not resolve: moto takes the newest boto3, whose botocore
    no aiobotocore (s3fs's client) accepts. The s3 extra pins what CI tests, with boto3 held in the botocore range
    of the aiobotocore installed here, so pip's resolver has one answer."""
    import tomllib
    from importlib.metadata import requires, version

    from packaging.requirements import Requirement
    from packaging.version import Version

    extras = tomllib.loads((Path(__file__).parents[4] / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    s3 = {r.name: r for r in map(Requirement, extras["s3"])}
    test = {r.name: r for r in map(Requirement, extras["test"])}
    for name in ("fsspec", "s3fs", "boto3"):
        assert str(s3[name].specifier) == str(test[name].specifier), name  # users get what CI tests
        assert Version(version(name)) in s3[name].specifier, name
    botocore = next(Requirement(r) for r in requires("aiobotocore") if r.startswith("botocore"))
    assert str(s3["boto3"].specifier) == str(botocore.specifier)  # boto3 X.Y.Z needs botocore X.Y.Z
    assert (
        Version(version("aiobotocore"))
        in Requirement(next(r for r in requires("s3fs") if r.startswith("aiobotocore"))).specifier
    )


def test_urls_are_told_from_paths() -> None:
    assert is_remote("s3://bucket/shot") and is_remote("gs://b/x") and is_remote("memory://out")
    assert not is_remote("/tmp/out") and not is_remote("file:///tmp/out") and not is_remote("C:\\out")


def test_a_job_published_to_s3_equals_the_folder_run(tmp_path, s3, home, walk, local_run, capsys) -> None:
    url = f"s3://{BUCKET}/full"
    assert predict(home, walk, url, "--run-id", "local", "--staging", str(tmp_path / "staging")) == 0
    err = capsys.readouterr().err
    assert f"to {url} (staged in" in err, err
    got = download(s3, url, tmp_path / "got")
    assert_same_outputs(local_run, got)
    assert assert_frames_complete(got) == FRAMES


def test_farm_chunks_from_two_machines_finalized_from_a_third_equal_one_run(
    tmp_path, s3, home, walk, local_run
) -> None:
    url = f"s3://{BUCKET}/farm"
    for machine, frames in (("a", "1-3"), ("b", "4-6")):
        staging = tmp_path / f"staging-{machine}"
        assert (
            predict(home, walk, url, "--frames", frames, "--run-id", "farm", "--staging", str(staging)) == 0
        )
    pending = download(s3, url, tmp_path / "pending")
    assert (pending / "walk" / "walk.partial.json").is_file()  # chunks done, not finalized
    assert not (pending / "walk" / "walk.sequence.json").exists()
    assert main(["finalize", url, "--staging", str(tmp_path / "staging-c")]) == 0
    got = download(s3, url, tmp_path / "got")
    assert not (got / "walk" / "walk.partial.json").exists()  # the marker is removed there too
    assert not list(got.rglob("*.pending.npz"))
    assert_same_outputs(local_run, got)


def test_a_killed_job_resumes_and_redoes_only_what_is_missing(
    tmp_path, s3, home, walk, local_run, capsys
) -> None:
    """SIGKILLed after its 4th commit, with smoothing on, then --skip-existing from the same staging folder: what
    it published stays, only the missing frames are computed, and the result equals the uninterrupted run."""
    url = f"s3://{BUCKET}/killed"
    staging = tmp_path / "staging"
    extra = ("--run-id", "local", "--staging", str(staging))
    proc = predict_killed_after(4, home, walk, url, *extra)
    assert proc.returncode == -9, proc.stderr
    s3.invalidate_cache()
    published = [p for p in s3.find(f"{BUCKET}/killed") if re.search(r"/walk_\d{4}\.json$", p)]
    assert 1 <= len(published) <= 4, published  # published while it ran, killed after its 4th commit
    capsys.readouterr()
    assert predict(home, walk, url, *extra, "--skip-existing") == 0
    assert f"wrote 2 result(s) to {url} (staged in {staging}), kept 4 verified" in capsys.readouterr().err
    assert_same_outputs(local_run, download(s3, url, tmp_path / "got"))


def test_a_lock_of_another_run_refuses_a_second_writer(tmp_path, s3, home, walk, capsys) -> None:
    url = f"s3://{BUCKET}/locked"
    lock = {"run": "other", "host": "render-07", "pid": 4242, "shared": False, "started": 1.0}
    s3.pipe_file(f"{BUCKET}/locked/{LOCKS_FOLDER}/other.render-07.4242.json", json.dumps(lock).encode())
    assert predict(home, walk, url, "--staging", str(tmp_path / "staging")) != 0
    err = capsys.readouterr().err
    assert "another run is writing here: run other on render-07 (pid 4242)" in err, err
    assert f"{url}/{LOCKS_FOLDER}/other.render-07.4242.json" in err  # what to delete if that run is gone
    s3.invalidate_cache()
    assert not [p for p in s3.find(f"{BUCKET}/locked") if not p.endswith("4242.json")]  # nothing written

    # a lock left by a process of this machine that is gone is stale: taken over
    dead = {**lock, "host": socket.gethostname(), "pid": 2**22 + 7}
    s3.rm_file(f"{BUCKET}/locked/{LOCKS_FOLDER}/other.render-07.4242.json")
    s3.pipe_file(f"{BUCKET}/locked/{LOCKS_FOLDER}/other.here.json", json.dumps(dead).encode())
    target = RemoteOutput(url, tmp_path / "staging2")
    with target.session("mine"):
        pass
    s3.invalidate_cache()
    assert not s3.find(f"{BUCKET}/locked/{LOCKS_FOLDER}")


def test_an_unreachable_endpoint_fails_before_any_model_loads(
    tmp_path, home, walk, capsys, monkeypatch
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    s3fs.S3FileSystem.clear_instance_cache()  # fsspec reuses filesystems; this one must see the new endpoint
    assert predict(home, walk, "s3://nowhere/shot", "--staging", str(tmp_path / "staging")) != 0
    err = capsys.readouterr().err
    assert "s3://nowhere/shot: cannot reach the output" in err, err
    assert "credentials" in err and "Traceback" not in err
    assert not (tmp_path / "staging").exists()  # nothing staged: it failed in preflight
    s3fs.S3FileSystem.clear_instance_cache()


def test_a_missing_bucket_is_named_not_created(tmp_path, s3, home, walk, capsys) -> None:
    assert predict(home, walk, "s3://no-such-bucket/shot", "--staging", str(tmp_path / "staging")) != 0
    err = capsys.readouterr().err
    assert "s3://no-such-bucket/shot: the bucket or top folder 'no-such-bucket' does not exist" in err, err
    assert not s3.exists("no-such-bucket")


class CheckedMemoryFileSystem(MemoryFileSystem):
    """fsspec's in-memory filesystem that checks, after every change, what a reader relies on: each frame JSON
    present lists only files that are present at the listed size. Violations are collected, not raised (the
    publisher must not be the one to notice)."""

    protocol = ("checkedmem",)
    violations: ClassVar[list[str]] = []
    changes: ClassVar[list[str]] = []

    @classmethod
    def _strip_protocol(cls, path):
        return super()._strip_protocol("memory://" + str(path).removeprefix("checkedmem://"))

    def _check(self, what: str) -> None:
        self.changes.append(what)
        for path in [p for p in list(self.store) if p.endswith(".json")]:
            try:
                doc = json.loads(self.store[path].getvalue())
            except (KeyError, ValueError):
                continue
            if not isinstance(doc, dict) or doc.get("format") != "sapiens2-capture":
                continue
            files = (doc.get("run") or {}).get("files")
            if not isinstance(files, dict):
                continue
            folder = path.rsplit("/", 1)[0]
            for name, size in files.items():
                held = self.store.get(f"{folder}/{name}")
                if held is None or len(held.getvalue()) != size:
                    self.violations.append(
                        f"after {what}: {path} lists {name} ({size} B), there: {held and len(held.getvalue())}"
                    )

    def put_file(self, lpath, rpath, *args, **kwargs):
        super().put_file(lpath, rpath, *args, **kwargs)
        self._check(f"put {rpath}")

    def rm_file(self, path):
        super().rm_file(path)
        self._check(f"rm {path}")

    def pipe_file(self, path, value, *args, **kwargs):
        super().pipe_file(path, value, *args, **kwargs)
        self._check(f"pipe {path}")


def test_a_reader_never_sees_a_frame_json_without_its_files(tmp_path, home, walk) -> None:
    """A job, then a re-run that rewrites every frame with other files (no previews, a mesh less), published
    to a filesystem that checks after every change; the stale files of the first run are removed there."""
    fsspec.register_implementation("checkedmem", CheckedMemoryFileSystem, clobber=True)
    CheckedMemoryFileSystem.violations.clear()
    url, staging = "checkedmem://shot", tmp_path / "staging"
    assert predict(home, walk, url, "--staging", str(staging)) == 0
    first = set(CheckedMemoryFileSystem.store)
    assert any(p.endswith("walk_0001.pose.png") for p in first)
    assert predict(home, walk, url, "--staging", str(staging), "--no-previews", "--clean") == 0
    assert CheckedMemoryFileSystem.violations == []
    now = set(CheckedMemoryFileSystem.store)
    assert not any(p.endswith(".pose.png") for p in now)  # the first run's previews are gone there too
    local = {f"/shot/{p.relative_to(staging).as_posix()}" for p in staging.rglob("*") if p.is_file()}
    assert now == {p for p in local if "/." not in p}  # the remote mirrors the staging folder, no more
    rewrites = [c for c in CheckedMemoryFileSystem.changes if c.endswith("walk_0001.json")]
    assert rewrites[-2:] == ["rm /shot/walk/walk_0001.json", "put /shot/walk/walk_0001.json"]


def test_the_ray_engine_publishes_from_its_driver(tmp_path, s3, home, walk, local_run) -> None:
    """Workers write where the driver stages and only the driver speaks to the store; the result equals the
    folder run."""
    pytest.importorskip("ray")
    url = f"s3://{BUCKET}/ray"
    extra = ("--engine", "ray", "--workers", "1", "--run-id", "local", "--staging", str(tmp_path / "staging"))
    assert predict(home, walk, url, *extra) == 0
    assert_same_outputs(local_run, download(s3, url, tmp_path / "got"))
