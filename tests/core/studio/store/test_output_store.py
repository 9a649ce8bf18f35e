"""The output store every engine opens (issue 27): the folder made and locked for a run, another run refused while
it holds it, what killed runs left completed on opening, and the folders a run made but left empty removed."""

from __future__ import annotations

from pathlib import Path

import pytest
from sapiens2_studio.core.studio.errors import OutputError
from sapiens2_studio.core.studio.runtime.host import Host
from sapiens2_studio.core.studio.store.output_store import OutputStore


def test_a_run_opens_its_folder_alone_and_leaves_only_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "out"
    store = OutputStore(out)
    assert store.folder == out and store.remote is None
    with store.opened("run-a", Host()):
        assert out.is_dir() and (out / ".sapiens2.lock").exists()
        with pytest.raises(OutputError), OutputStore(out).opened("run-b", Host()):
            pass  # another run may not write into a locked folder
        store.make_folder(out / "empty")
        store.make_folder(out / "kept")
        (out / "kept" / "frame.json").write_text("{}", encoding="utf-8")
    assert not (out / ".sapiens2.lock").exists()
    assert not (out / "empty").exists() and (out / "kept" / "frame.json").is_file()


def test_opening_alone_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    stale = out / ".frame.exr.deadbeef.tmp.exr"  # a temporary of a run that died before its commit
    stale.write_bytes(b"half written")
    host = Host()
    with OutputStore(out).opened("run-a", host):
        assert not stale.exists()  # removed before the run writes anything
    assert any("removed 1 temporary file" in note for note in host.notes), host.notes
    stale.write_bytes(b"half written")
    with OutputStore(out).opened("run-b", Host(), shared=True):
        assert stale.exists()  # a writer joining others of its run leaves their files alone


def test_a_local_store_publishes_nothing(tmp_path: Path) -> None:
    store = OutputStore(tmp_path / "out")
    host = Host()
    with store.published("run-a", host):
        pass
    assert not host.notes
