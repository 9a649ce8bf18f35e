"""One checkpoint identity (issue 27): a file's header is read and checked once, the weights load from that
parsed header, its sha256 is hashed at most once, and a file replaced on disk is identified again."""

from __future__ import annotations

import hashlib
import os

import pytest
import torch
from sapiens2_studio.core import CheckpointError, load_model
from sapiens2_studio.core.checkpoints import hub
from sapiens2_studio.core.checkpoints.identity import identify, identify_file
from sapiens2_studio.core.checkpoints.loader import load_identity
from sapiens2_studio.core.studio.runtime.models import ModelCache, check_checkpoint, load
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint


def test_identity_holds_what_the_loader_reads(tmp_path):
    path = write_synthetic_checkpoint(tmp_path / "sapiens2_0.4b_normal.safetensors", task="normal")
    identity = identify(path, task="normal", hash_home=tmp_path / "home")
    model = load_model(path, task="normal")
    assert identity.task == "normal" and identity.spec == model.spec
    assert identity.size_bytes == path.stat().st_size and identity.official == ("normal", "0.4b")
    assert set(identity.header.shapes) == set(load_model(path, device="meta").state_dict())
    assert identity.size_contradiction() is not None  # a tiny file under an official 0.4b name
    loaded = load_identity(identity, "cpu")
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))


def test_sha256_is_hashed_once_per_identity(tmp_path):
    path = write_synthetic_checkpoint(tmp_path / "pose.safetensors", task="pose")
    home = tmp_path / "home"
    identity = identify(path, hash_home=home)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert identity.sha256 == digest == hub.file_sha256(path, home)
    (home / "sha256-cache.json").unlink()  # the identity does not ask the hub (nor the file) again
    assert identity.sha256 == digest and not (home / "sha256-cache.json").exists()


def test_wrong_task_and_bad_files_give_the_loaders_messages(tmp_path):
    path = write_synthetic_checkpoint(tmp_path / "seg.safetensors", task="seg")
    with pytest.raises(CheckpointError) as direct:
        load_model(path, device="meta", task="pose")
    with pytest.raises(CheckpointError) as checked:
        identify(path).require_task("pose")
    assert str(checked.value) == str(direct.value)
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CheckpointError) as loaded:
        load_model(cut)
    with pytest.raises(CheckpointError) as identified:
        identify(cut)
    assert str(identified.value) == str(loaded.value) and "truncated" in str(loaded.value)


def test_the_job_path_reads_each_header_once_and_loads_from_it(tmp_path):
    path = write_synthetic_checkpoint(tmp_path / "albedo.safetensors", task="albedo")
    cache = ModelCache()
    identity = check_checkpoint(path, task="albedo", cache=cache, hash_home=tmp_path)
    assert check_checkpoint(path, task="albedo", cache=cache, hash_home=tmp_path) is identity
    with pytest.raises(CheckpointError, match="albedo checkpoint, but a seg model"):
        check_checkpoint(path, task="seg", cache=cache, hash_home=tmp_path)
    loaded = cache.get(identity, task="albedo", device="cpu", hash_cache_dir=tmp_path)
    assert loaded.identity is identity and loaded.size_bytes == identity.size_bytes
    assert loaded.checkpoint_sha256() == identity.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert load(path, task="albedo", device="cpu", hash_cache_dir=tmp_path).record() == loaded.record()


def test_a_file_replaced_since_it_was_identified_is_identified_again(tmp_path):
    path = write_synthetic_checkpoint(tmp_path / "model.safetensors", task="pose")
    identity = identify(path, task="pose")
    write_synthetic_checkpoint(path, task="seg")
    os.utime(path, ns=(identity.mtime_ns + 10**9, identity.mtime_ns + 10**9))
    assert not identity.is_current()
    with pytest.raises(CheckpointError, match="seg checkpoint, but a pose model"):
        load_identity(identity, "cpu")
    with pytest.raises(CheckpointError, match="seg checkpoint, but a pose model"):
        load(identity, task="pose", device="cpu")
    assert ModelCache().identity(path).task == "seg"
    assert identify_file(path, task="seg").header is None
