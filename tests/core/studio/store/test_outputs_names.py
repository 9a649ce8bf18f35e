"""Output names are a function of the input alone (issue 33): Unicode kept, clashes resolved by each input's own
path and never by arrival order, and a run refuses to write one input's results over another's.

Each test reproduces a failure of the naming before issue 33: `a b.jpg` and `a_b.png` became `a_b`/`a_b_2`, and
after `a b.jpg` went away `a_b.png` wrote over `a_b` (another input's results) while `a_b_2` stayed; two CJK
names became `image`, `image_2`; `Ästronaut 宇宙 #1.jpg` became `_stronaut_____1`.
"""

from __future__ import annotations

import itertools
import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("OpenEXR")
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.studio.sources.inputs import collect_inputs
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint


def _photo(path: Path, seed: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rgb = np.random.default_rng(seed).integers(0, 256, (24, 20, 3)).astype(np.uint8)
    Image.fromarray(rgb).save(path)
    return path


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    write_synthetic_checkpoint(home / "pose" / "sapiens2_0.4b_pose.safetensors", task="pose", seed=0)
    return home


def predict(home: Path, out: Path, *inputs: Path | str, extra: tuple[str, ...] = ()) -> int:
    args = ["predict", *map(str, inputs), "--tasks", "pose", "--out", str(out), "--checkpoint-dir", str(home)]
    return main([*args, "--no-download", "--device", "cpu", "--no-flip-test", *extra])


def _source(out: Path, name: str) -> dict:
    return json.loads((out / f"{name}.json").read_text(encoding="utf-8"))["run"]["source"]


def test_unicode_names_are_kept_and_only_unsafe_characters_replaced(tmp_path, home, capsys) -> None:
    shot = tmp_path / "shot"
    _photo(shot / "宇宙.jpg", 1)
    _photo(shot / "宇宙飞船.png", 2)  # two CJK names: were `image`, `image_2`
    _photo(shot / "Ästronaut 宇宙 #1.jpg", 3)  # accented, CJK, a space and `#`: was `_stronaut_____1`
    _photo(shot / unicodedata.normalize("NFD", "Café 50%.png"), 4)  # typed on macOS: NFD
    names = sorted(j.name for j in collect_inputs([str(shot)]))
    assert names == sorted(["宇宙", "宇宙飞船", "Ästronaut 宇宙 _1", "Café 50_"])
    assert all(unicodedata.is_normalized("NFC", n) for n in names)
    out = tmp_path / "out"
    assert predict(home, out, shot) == 0
    for name in names:
        assert (out / f"{name}.json").is_file() and (out / f"{name}.exr").is_file(), name
        assert (out / f"{name}.keypoints.json").is_file(), name
    # the bundle records its source: the file, where it was (folder/name) and a hash of its bytes
    source = _source(out, "宇宙")
    assert source["file"] == "宇宙.jpg" and source["path"] == "shot/宇宙.jpg" and len(source["sha256"]) == 64


def test_clashing_names_resolve_by_the_inputs_own_paths_not_their_order(tmp_path) -> None:
    files = [
        _photo(tmp_path / "a" / "photo.png", 1),
        _photo(tmp_path / "b" / "photo.png", 2),
        _photo(tmp_path / "a" / "photo.jpg", 3),
        _photo(tmp_path / "a" / "photo_png.png", 4),  # its own name is another input's second choice
        _photo(tmp_path / "a" / "a b.jpg", 5),
        _photo(tmp_path / "a" / "a_b.png", 6),
    ]
    seen = set()
    for order in itertools.permutations(files):
        jobs = collect_inputs([str(p) for p in order])
        seen.add(frozenset((j.path.relative_to(tmp_path).as_posix(), j.name) for j in jobs))
    assert len(seen) == 1  # one naming for all 720 arrival orders
    named = dict(next(iter(seen)))
    assert named["a/a b.jpg"] == "a b" and named["a/a_b.png"] == "a_b"  # no clash at all any more
    assert len(set(named.values())) == len(files)
    assert named["a/photo.jpg"] == "photo_jpg"


def test_a_changed_input_set_never_writes_over_another_inputs_results(tmp_path, home, capsys) -> None:
    shot = tmp_path / "shot"
    _photo(shot / "a b.jpg", 1)
    _photo(shot / "a_b.png", 2)
    out = tmp_path / "out"
    assert predict(home, out, shot) == 0
    assert _source(out, "a b")["file"] == "a b.jpg" and _source(out, "a_b")["file"] == "a_b.png"
    exr_of_a_b = (out / "a_b.exr").read_bytes()
    # `a b.jpg` moved away, the folder run again: `a_b.png` keeps its own name and results, `a b` is kept
    (shot / "a b.jpg").rename(tmp_path / "a b.jpg")
    capsys.readouterr()
    assert predict(home, out, shot, extra=("--skip-existing",)) == 0
    err = capsys.readouterr().err
    assert _source(out, "a_b")["file"] == "a_b.png" and (out / "a_b.exr").read_bytes() == exr_of_a_b
    assert _source(out, "a b")["file"] == "a b.jpg"  # kept, reported
    assert "orphaned 1" in err and "a b (its input shot/a b.jpg is missing)" in err, err
    # another input that would take the name `a_b` (another folder's `a_b.jpg`) is refused, naming both
    other = _photo(tmp_path / "other" / "a_b.jpg", 9)
    stamp = (out / "a_b.json").stat().st_mtime_ns
    capsys.readouterr()
    assert predict(home, out, other) != 0
    err = capsys.readouterr().err
    assert "a_b.jpg" in err and "shot/a_b.png" in err and "another input" in err, err
    assert (out / "a_b.json").stat().st_mtime_ns == stamp and _source(out, "a_b")["file"] == "a_b.png"


def test_the_same_image_moved_to_another_folder_is_the_same_input(tmp_path, home, capsys) -> None:
    first = _photo(tmp_path / "day1" / "hero.png", 1)
    out = tmp_path / "out"
    assert predict(home, out, first) == 0
    moved = tmp_path / "day2" / "hero.png"
    moved.parent.mkdir()
    moved.write_bytes(first.read_bytes())
    capsys.readouterr()
    assert predict(home, out, moved, extra=("--skip-existing",)) == 0
    assert "kept 1 verified result(s)" in capsys.readouterr().err
    edited = _photo(
        tmp_path / "day3" / "hero.png", 2
    )  # the same name elsewhere with other bytes: another input
    assert predict(home, out, edited) != 0
    assert "day1/hero.png" in capsys.readouterr().err
