"""Checkpoint hub: names, paths, offline advice and sha256 verification, all without touching the network."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sapiens2_studio.core.checkpoints import hub


def test_official_names_and_repos() -> None:
    ref = hub.checkpoint_ref("pose", "0.4b")
    assert (ref.repo_id, ref.filename) == ("facebook/sapiens2-pose-0.4b", "sapiens2_0.4b_pose.safetensors")
    assert (
        ref.url
        == "https://huggingface.co/facebook/sapiens2-pose-0.4b/resolve/main/sapiens2_0.4b_pose.safetensors"
    )
    ref = hub.checkpoint_ref("pretrain", "1b-4k")
    assert (ref.repo_id, ref.filename) == (
        "facebook/sapiens2-pretrain-1b-4k",
        "sapiens2_1b_4k_pretrain.safetensors",
    )
    assert hub.checkpoint_ref("pretrain", "0.1b").filename == "sapiens2_0.1b_pretrain.safetensors"
    for task in ("pose", "seg", "normal", "pointmap"):
        for size in ("0.4b", "0.8b", "1b", "5b"):
            ref = hub.checkpoint_ref(task, size)
            assert ref.repo_id == f"facebook/sapiens2-{task}-{size}"
            assert ref.filename == f"sapiens2_{size}_{task}.safetensors"


def test_unavailable_checkpoints_explain_why(tmp_path: Path) -> None:
    with pytest.raises(hub.HubError, match=r"no albedo checkpoints are public yet") as caught:
        hub.checkpoint_ref("albedo", "1b", tmp_path)
    # advice per front-end: the CLI flag only in the CLI, the models folder only in ComfyUI
    assert "--checkpoint albedo=PATH" in caught.value.text("cli")
    assert "--checkpoint" not in caught.value.text("comfyui") and "models/sapiens2" in caught.value.text(
        "comfyui"
    )
    assert "--checkpoint" not in str(caught.value)
    with pytest.raises(hub.HubError, match=r"no official pose checkpoint of size 0\.1b"):
        hub.checkpoint_ref("pose", "0.1b")
    with pytest.raises(hub.HubError, match="unknown task 'depth'"):
        hub.checkpoint_ref("depth", "1b")
    with pytest.raises(hub.HubError, match="unknown size '2b'"):
        hub.checkpoint_ref("pose", "2b")


def test_home_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAPIENS2_HOME", str(tmp_path / "h"))
    assert hub.checkpoint_home() == tmp_path / "h"
    assert hub.local_checkpoint_path("seg", "1b") == tmp_path / "h" / "seg" / "sapiens2_1b_seg.safetensors"
    assert (
        hub.local_checkpoint_path("seg", "1b", tmp_path / "x")
        == tmp_path / "x" / "seg" / "sapiens2_1b_seg.safetensors"
    )
    monkeypatch.delenv("SAPIENS2_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert hub.checkpoint_home() == tmp_path / "user" / ".cache" / "sapiens2"
    # albedo has a local name (the official demo's), so a user-supplied file is found
    assert hub.find_checkpoint("albedo", "1b", tmp_path) is None
    path = hub.local_checkpoint_path("albedo", "1b", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x")
    assert hub.ensure_checkpoint("albedo", "1b", tmp_path, allow_download=False) == path


def test_missing_package_gives_manual_instructions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_hub():
        raise ImportError("No module named 'huggingface_hub'")

    monkeypatch.setattr(hub, "_import_hub", no_hub)
    with pytest.raises(hub.HubError) as info:
        hub.ensure_checkpoint("normal", "0.8b", tmp_path)
    message = str(info.value)
    assert 'pip install "sapiens2-studio[hub]"' in message
    assert (
        "https://huggingface.co/facebook/sapiens2-normal-0.8b/resolve/main/sapiens2_0.8b_normal.safetensors"
        in message
    )
    assert str(tmp_path / "normal" / "sapiens2_0.8b_normal.safetensors") in message


def test_no_download_flag(tmp_path: Path) -> None:
    with pytest.raises(
        hub.HubError, match=r"downloads are off\. Download sapiens2_1b_seg\.safetensors from https://"
    ):
        hub.ensure_checkpoint("seg", "1b", tmp_path, allow_download=False)


class _FakeHub:
    """Stands in for the network calls only; files are real and really hashed."""


def _install_fake_network(
    monkeypatch, payload: bytes, reported_sha: str | None, fail: Exception | None = None
):
    monkeypatch.setattr(hub, "_import_hub", lambda: _FakeHub())

    def remote_sha(_hub, _ref):
        if fail is not None:
            raise fail
        return reported_sha

    def fetch(_hub, ref, dest_dir: Path, force: bool = False) -> Path:
        out = dest_dir / ref.filename
        out.write_bytes(payload)
        return out

    monkeypatch.setattr(hub, "_remote_sha256", remote_sha)
    monkeypatch.setattr(hub, "_fetch_file", fetch)


def test_download_verifies_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"sapiens2 weights " * 1000
    good = hashlib.sha256(payload).hexdigest()
    _install_fake_network(monkeypatch, payload, good)
    path = hub.download_checkpoint("pose", "1b", tmp_path)
    assert path == tmp_path / "pose" / "sapiens2_1b_pose.safetensors" and path.read_bytes() == payload
    assert hub.file_sha256(path, tmp_path) == good  # served from the cache written after verification
    assert (tmp_path / "sha256-cache.json").is_file()


def test_download_with_wrong_hash_is_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake_network(monkeypatch, b"tampered", "0" * 64)
    with pytest.raises(hub.HubError, match="sha256 mismatch"):
        hub.download_checkpoint("seg", "0.4b", tmp_path)
    assert not (tmp_path / "seg" / "sapiens2_0.4b_seg.safetensors").exists()


def test_pinned_hash_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = b"abc"
    _install_fake_network(monkeypatch, payload, hashlib.sha256(payload).hexdigest())
    monkeypatch.setitem(hub.PINNED_SHA256, "sapiens2_0.4b_seg.safetensors", "1" * 64)
    with pytest.raises(hub.HubError, match="not the pinned value"):
        hub.download_checkpoint("seg", "0.4b", tmp_path)
    assert not (tmp_path / "seg" / "sapiens2_0.4b_seg.safetensors").exists()


def test_offline_error_names_file_url_and_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_fake_network(monkeypatch, b"", None, fail=ConnectionError("Name or service not known"))
    with pytest.raises(hub.HubError) as info:
        hub.download_checkpoint("pointmap", "5b", tmp_path)
    message = str(info.value)
    assert (
        "could not download sapiens2_5b_pointmap.safetensors (ConnectionError: Name or service not known)"
        in message
    )
    assert (
        "https://huggingface.co/facebook/sapiens2-pointmap-5b/resolve/main/sapiens2_5b_pointmap.safetensors"
        in message
    )
    assert str(tmp_path / "pointmap" / "sapiens2_5b_pointmap.safetensors") in message


def test_verify_and_cache_on_local_file(tmp_path: Path) -> None:
    file = tmp_path / "w.safetensors"
    file.write_bytes(bytes(range(256)) * 50000)  # > one 8 MB chunk
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    assert hub.sha256_file(file) == digest
    assert hub.verify_sha256(file, digest.upper()) == digest
    with pytest.raises(hub.HubError, match="sha256 mismatch"):
        hub.verify_sha256(file, "f" * 64)
    assert hub.file_sha256(file, tmp_path) == digest
    file.write_bytes(b"changed")  # size changes -> cache miss -> re-hash
    assert hub.file_sha256(file, tmp_path) == hashlib.sha256(b"changed").hexdigest()


def test_file_gets_its_final_name_only_after_verification(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopping while the (minute-long) hash runs must not leave an unverified file where it would be used."""
    _install_fake_network(monkeypatch, b"weights", hashlib.sha256(b"weights").hexdigest())

    def interrupted(path, expected):
        assert not (tmp_path / "pose" / "sapiens2_1b_pose.safetensors").exists()
        raise KeyboardInterrupt

    monkeypatch.setattr(hub, "verify_sha256", interrupted)
    with pytest.raises(KeyboardInterrupt):
        hub.download_checkpoint("pose", "1b", tmp_path)
    assert hub.find_checkpoint("pose", "1b", tmp_path) is None


def test_force_download_reaches_the_hub_client(tmp_path: Path) -> None:
    calls = []

    class Client:
        def hf_hub_download(self, repo_id, filename, local_dir, force_download):
            calls.append((repo_id, filename, force_download))
            return str(Path(local_dir) / filename)

    ref = hub.checkpoint_ref("seg", "1b")
    hub._fetch_file(Client(), ref, tmp_path, force=True)
    assert calls == [("facebook/sapiens2-seg-1b", "sapiens2_1b_seg.safetensors", True)]
