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


def _photo(folder):
    import numpy as np
    from PIL import Image

    path = folder / "photo.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (32, 24, 3), dtype=np.uint8)).save(path)
    return path


def test_a_file_that_is_not_the_size_its_official_name_promises_is_named_in_a_warning(tmp_path):
    """A tiny test file saved under the official 0.4b name, used with --size 0.4b: before issue 33 it ran with
    no word; now the CLI says so on stderr, the progress stream as a `warning` event, and the bundle's models
    entry records it."""
    import json

    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    home = tmp_path / "home"
    write_synthetic_checkpoint(home / "seg" / "sapiens2_0.4b_seg.safetensors", task="seg")
    photo = _photo(tmp_path)
    base = [
        sys.executable,
        "-m",
        "sapiens2_studio.cli",
        "predict",
        str(photo),
        "--tasks",
        "seg",
    ]
    base += ["--checkpoint-dir", str(home), "--no-download", "--device", "cpu", "--no-previews"]
    expected = "sapiens2_0.4b_seg.safetensors holds a seg model of no released size (embed_dim "
    plain = subprocess.run([*base, "--out", str(tmp_path / "a")], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    note = [line for line in plain.stderr.splitlines() if expected in line]
    assert len(note) == 1 and note[0].startswith("sapiens2 predict: note: "), plain.stderr
    assert "but its name promises 0.4b" in note[0]
    assert "sapiens2 download --task seg --size 0.4b --force" in note[0]
    streamed = subprocess.run(
        [*base, "--out", str(tmp_path / "b"), "--progress", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert streamed.returncode == 0, streamed.stderr
    events = [json.loads(line) for line in streamed.stdout.splitlines()]
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert any(expected in w for w in warnings), events
    models = json.loads((tmp_path / "b" / "photo.json").read_text())["models"]
    assert models[0]["size"] == "custom" and expected in models[0]["warning"]
    # With the size asked for (--size 0.4b) the same file is refused before any image is read (issue 33).
    asked = subprocess.run(
        [*base, "--size", "0.4b", "--out", str(tmp_path / "c"), "--progress", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert asked.returncode == 4, asked.stderr  # EXIT_CHECKPOINT
    error = [json.loads(line) for line in asked.stdout.splitlines()][-1]
    assert error["event"] == "error" and expected in error["message"], error
    assert "so it is refused" in error["message"] and "leave out --size" in asked.stderr
    assert not (tmp_path / "c").exists()


def test_a_file_of_its_own_name_or_the_promised_size_gives_no_warning(tmp_path):
    from sapiens2_studio.core.checkpoints.loader import load_model, size_contradiction
    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    tiny = load_model(
        write_synthetic_checkpoint(tmp_path / "tiny_pose.safetensors", task="pose"), device="meta"
    )
    assert size_contradiction("tiny_pose.safetensors", tiny.spec) is None
    message = size_contradiction("tiny_pose.safetensors", tiny.spec, requested="1b")
    assert message is not None and "but size 1b was asked for" in message
    both = size_contradiction("sapiens2_0.4b_pose.safetensors", tiny.spec, requested="1b")
    assert "its name promises 0.4b and size 1b was asked for" in both
    released = type(tiny.spec)(**{**tiny.spec.__dict__, "size": "0.4b"})  # the 0.4b architecture
    assert size_contradiction("sapiens2_0.4b_pose.safetensors", released, requested="0.4b") is None
