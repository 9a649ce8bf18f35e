"""The CLI says what it is and refuses an output place nobody would look in (issue 33)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sapiens2_studio import __version__
from sapiens2_studio.cli.main import main


def test_version_prints_the_package_version_and_exits_0():
    proc = subprocess.run(
        [sys.executable, "-m", "sapiens2_studio.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"sapiens2 {__version__}"


@pytest.mark.parametrize("out", ["", "   "])
def test_an_empty_out_is_refused_before_anything_is_written(out, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "photo.png").write_bytes(b"not read: the command line is refused first")
    with pytest.raises(SystemExit) as stop:
        main(["predict", "photo.png", "--out", out])
    assert stop.value.code == 2  # a usage error, as argparse reports every other one
    err = capsys.readouterr().err
    assert "--out" in err and "current folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photo.png"]
