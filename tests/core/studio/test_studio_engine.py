"""The engine's shared mechanics, through the front-ends that use them: images prepared once for every task,
out-of-memory back-off in the CLI and the Python API, one execution rule, and error reporting."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from sapiens2_studio.cli.main import main
from sapiens2_studio.core.arch.model import Sapiens2Model
from sapiens2_studio.core.pipeline import images as image_module
from sapiens2_studio.core.studio import Host, Studio, TaskOptions
from sapiens2_studio.core.studio.runtime import execution

TASKS = ("seg", "pose", "normal", "pointmap")


@pytest.fixture
def photos(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for name in ("left", "right"):  # not numbered: two single images, not a sequence
        path = tmp_path / f"{name}.png"
        Image.fromarray(rng.integers(0, 256, (40, 32, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


@pytest.fixture
def oom_on_batches(monkeypatch):
    """Segmentation forwards of more than one image fail like a full GPU; everything else runs."""
    forward = Sapiens2Model.forward
    calls = []

    def limited(self, x):
        calls.append((self.task, int(x.shape[0])))
        if self.task == "seg" and x.shape[0] > 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (injected)")
        return forward(self, x)

    monkeypatch.setattr(Sapiens2Model, "forward", limited)
    return calls


def test_an_image_is_converted_and_uploaded_once_for_all_tasks(tiny_checkpoints, monkeypatch):
    conversions = []
    original = image_module._from_numpy
    monkeypatch.setattr(
        image_module, "_from_numpy", lambda arr, *a: conversions.append(arr.shape) or original(arr, *a)
    )
    fast = image_module._uint8_pixels  # the 8-bit RGB path
    monkeypatch.setattr(
        image_module, "_uint8_pixels", lambda arr, *a: conversions.append(arr.shape) or fast(arr, *a)
    )
    images = [np.full((40, 32, 3), 100 + i, np.uint8) for i in range(3)]
    studio = Studio(device="cpu")
    checkpoints = {t: tiny_checkpoints[t] for t in TASKS}
    batches = studio.predict(images, TASKS, checkpoints=checkpoints, options=TaskOptions(chunk_size=2))
    assert set(batches) == set(TASKS) and all(len(b) == 3 for b in batches.values())
    assert len(conversions) == 3  # once per image, not once per image and task (that would be 12)


def test_python_api_backs_off_on_out_of_memory(tiny_checkpoints, oom_on_batches):
    host = Host(on_note=None)
    studio = Studio(device="cpu", host=host)
    images = [np.full((40, 32, 3), 50 * i, np.uint8) for i in range(4)]
    batches = studio.predict(
        images, ("seg", "normal"), checkpoints=tiny_checkpoints, options=TaskOptions(chunk_size=4)
    )
    assert len(batches["seg"]) == 4 and len(batches["normal"]) == 4
    assert ("seg", 4) in oom_on_batches and ("seg", 2) in oom_on_batches and ("seg", 1) in oom_on_batches
    assert any("out of memory with 4 images per chunk; retrying with 2" in n for n in host.notes)
    # the chunk that failed gives the same results as one that did not need to back off
    plain = Studio(device="cpu").predict(images[:1], ("seg",), checkpoints=tiny_checkpoints)
    assert torch.equal(plain["seg"].results[0].labels, batches["seg"].results[0].labels)


def test_cli_backs_off_on_out_of_memory(tiny_checkpoints, oom_on_batches, photos, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["predict", *map(str, photos), "--tasks", "seg,normal", "--out", str(out), "--device", "cpu"]
    argv += ["--batch-size", "2", "--no-previews"]
    argv += [
        f"--checkpoint=seg={tiny_checkpoints['seg']}",
        f"--checkpoint=normal={tiny_checkpoints['normal']}",
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "note: out of memory with 2 images per chunk; retrying with 1" in err
    assert sorted(p.name for p in out.glob("*.json")) == ["left.json", "right.json"]


def test_out_of_memory_with_one_image_is_one_clear_error(
    tiny_checkpoints, monkeypatch, photos, tmp_path, capsys
):
    def always(self, x):
        raise torch.OutOfMemoryError("CUDA out of memory (injected)")

    monkeypatch.setattr(Sapiens2Model, "forward", always)
    argv = ["predict", str(photos[0]), "--tasks", "seg", "--out", str(tmp_path / "o"), "--device", "cpu"]
    assert (
        main([*argv, f"--checkpoint=seg={tiny_checkpoints['seg']}"]) == 5
    )  # EXIT_OUT_OF_MEMORY: a stable code a caller (the Blender add-on) can branch on
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "sapiens2 predict: error: out of memory even with one of the images per forward"
    )
    assert "Traceback" not in "\n".join(err)


def test_an_internal_error_prints_its_traceback_and_says_it_is_a_bug(
    tiny_checkpoints, monkeypatch, photos, tmp_path, capsys
):
    def broken(self, x):
        raise KeyError("a bug")

    monkeypatch.setattr(Sapiens2Model, "forward", broken)
    argv = ["predict", str(photos[0]), "--tasks", "seg", "--out", str(tmp_path / "o"), "--device", "cpu"]
    assert main([*argv, f"--checkpoint=seg={tiny_checkpoints['seg']}"]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "KeyError: 'a bug'" in err
    assert "this is a bug in sapiens2-studio" in err and "github.com" in err


def test_one_auto_rule_with_its_reasons():
    cpu = execution.plan_execution("cpu")
    assert (cpu.dtype, cpu.reasons["dtype"]) == (torch.float32, "auto: fp32 on the CPU")
    for device, bf16, expected in (("cuda", True, torch.bfloat16), ("cuda", False, torch.float16)):
        dtype, reason = execution.resolve_dtype("auto", torch.device(device), bf16_supported=bf16)
        assert dtype == expected and reason.startswith("auto:")
    mps, _ = execution.resolve_dtype("auto", torch.device("mps"), bf16_supported=False)
    assert mps == torch.float16
    assert execution.resolve_attention("auto", torch.device("cuda"), 76) == (
        "sdpa",
        8,
        "auto: head dim 76 padded for fused kernels",
    )
    assert execution.resolve_attention("auto", torch.device("cpu"), 76)[1] == 0
    if not torch.cuda.is_available():
        with pytest.raises(execution.StudioError, match="CUDA is not available") as caught:
            execution.plan_execution("cuda")
        assert "--device cpu" in caught.value.text("cli") and "--device" not in caught.value.text("comfyui")
