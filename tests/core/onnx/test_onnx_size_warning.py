"""ONNX Runtime gives the same size warning as PyTorch (code review, issue 33's warning): a file saved under an
official name whose tensors hold another size is named in `LoadedModel.extra["warning"]` and the bundle's models
entry, whether the checkpoint is exported on the fly or an exported .onnx file is loaded directly."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from sapiens2_studio.core.onnx import export_onnx
from sapiens2_studio.core.studio.runtime import models
from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

OFFICIAL = "sapiens2_0.4b_seg.safetensors"  # a tiny file under the official 0.4b name


@pytest.fixture(scope="module")
def misnamed(tmp_path_factory):
    """A tiny seg checkpoint saved under the official 0.4b name, and its PyTorch-loaded warning."""
    path = write_synthetic_checkpoint(tmp_path_factory.mktemp("ckpt") / OFFICIAL, task="seg")
    torch_loaded = models.load(path, device="cpu")
    assert torch_loaded.spec.size == "custom"
    assert "but its name promises 0.4b" in torch_loaded.extra["warning"]
    return path, torch_loaded.extra["warning"]


def test_a_misnamed_checkpoint_exported_on_the_fly_warns_as_pytorch_does(misnamed, tmp_path):
    path, torch_warning = misnamed
    loaded = models.load(path, device="cpu", runtime="onnxruntime", hash_cache_dir=tmp_path)
    assert loaded.runtime == "onnxruntime" and loaded.checkpoint == OFFICIAL
    assert loaded.extra["warning"] == torch_warning
    record = loaded.record()
    assert record["warning"] == torch_warning and record["runtime"] == "onnxruntime"


def test_an_onnx_file_exported_from_a_misnamed_checkpoint_warns_with_both_names(misnamed, tmp_path):
    path, torch_warning = misnamed
    onnx_file = export_onnx(path, tmp_path / "people.onnx", task="seg").path
    loaded = models.load(onnx_file, device="cpu", runtime="onnxruntime")
    assert loaded.extra["warning"] == f"{torch_warning} (people.onnx was exported from it)"
    assert loaded.record()["warning"] == loaded.extra["warning"]


def test_files_of_their_own_names_give_no_warning(tmp_path):
    path = write_synthetic_checkpoint(tmp_path / "tiny_seg.safetensors", task="seg")
    on_the_fly = models.load(path, device="cpu", runtime="onnxruntime", hash_cache_dir=tmp_path)
    onnx_file = export_onnx(path, tmp_path / "tiny_seg.onnx", task="seg").path
    direct = models.load(onnx_file, device="cpu", runtime="onnxruntime")
    for loaded in (on_the_fly, direct):
        assert "warning" not in loaded.extra and "warning" not in loaded.record()
