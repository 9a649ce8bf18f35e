"""The Python example in docs/pipeline.md runs as written and gives the CLI's main job's bundle."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("OpenEXR")
REPO = Path(__file__).resolve().parents[1]
TASKS = ("pose", "seg", "normal", "pointmap")


def _example() -> str:
    text = (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    section = text.split("## The CLI's main job from Python", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 15
    return code


def test_pipeline_doc_example_reproduces_the_cli_main_job(tmp_path, monkeypatch):
    from sapiens2_studio.cli.main import main
    from sapiens2_studio.core.formats.bundle import read_bundle
    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    home = tmp_path / "home"  # tiny checkpoints under the official names: no download
    for seed, task in enumerate(TASKS):
        write_synthetic_checkpoint(home / task / f"sapiens2_0.4b_{task}.safetensors", task=task, seed=seed)
    monkeypatch.setenv("SAPIENS2_HOME", str(home))
    (tmp_path / "assets" / "demo").mkdir(parents=True)
    shutil.copy(REPO / "assets" / "demo" / "astronaut.jpg", tmp_path / "assets" / "demo")
    monkeypatch.chdir(tmp_path)
    exec(compile(_example().replace('device="auto"', 'device="cpu"'), "docs/pipeline.md", "exec"), {})
    argv = ["predict", "assets/demo/astronaut.jpg", "--tasks", ",".join(TASKS)]
    assert main([*argv, "--out", "cli", "--device", "cpu", "--no-download"]) == 0
    python, cli = (
        read_bundle(tmp_path / "out" / "astronaut.json"),
        read_bundle(tmp_path / "cli" / "astronaut.json"),
    )
    for layer in ("image", "points", "normals", "seg", "mask"):
        assert np.array_equal(getattr(python, layer), getattr(cli, layer)), layer
    assert [p.keypoints.tobytes() for p in python.people] == [p.keypoints.tobytes() for p in cli.people]
    expected = {"astronaut.exr", "astronaut.json", "astronaut.pose.png", "astronaut.seg.png"}
    assert expected <= {p.name for p in (tmp_path / "out").iterdir()}
