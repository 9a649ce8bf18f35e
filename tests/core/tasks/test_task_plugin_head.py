"""A plug-in task's head goes through the project's loader (issue 27): the example garment task, loaded from its
file only when trusted, gets its checkpoint's model built from shapes under its own output conv; a checkpoint whose
head does not match the task is refused naming the tensor; without trust the task is refused naming the opt-in.
The installed-package path (entry point, fresh venv, every front-end) is tests/test_task_plugin_install.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from sapiens2_studio.core.checkpoints.errors import CheckpointError
from sapiens2_studio.core.checkpoints.loader import load_model
from sapiens2_studio.core.tasks import registry
from sapiens2_studio.core.tasks.base import PredictContext
from sapiens2_studio.core.tasks.errors import UntrustedTaskError

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "garment_seg" / "src" / "sapiens2_garment_seg"


@pytest.fixture
def example():
    """The example package imported from its folder (not installed here), its task registered as trusted."""
    spec = importlib.util.spec_from_file_location(
        "sapiens2_garment_seg", EXAMPLE / "__init__.py", submodule_search_locations=[str(EXAMPLE)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["sapiens2_garment_seg"] = module
    spec.loader.exec_module(module)
    registry.reset_plugins()
    assert registry.load_plugins(
        trust=["garment"], modules=str(EXAMPLE / "garment.py"), entry_points=False
    ) == ["garment"]
    yield importlib.import_module("sapiens2_garment_seg.checkpoint")
    registry.reset_plugins()
    for name in [n for n in sys.modules if n.startswith("sapiens2_garment_seg")]:
        del sys.modules[name]


def test_untrusted_module_is_refused_naming_the_opt_in() -> None:
    registry.reset_plugins()
    try:
        assert (
            registry.load_plugins(trust=False, modules=str(EXAMPLE / "garment.py"), entry_points=False) == []
        )
        with pytest.raises(
            UntrustedTaskError, match=r"--trust-task-code garment.*SAPIENS2_TRUST_TASKS=garment"
        ):
            registry.get("garment")
        assert not registry.has("garment")
    finally:
        registry.reset_plugins()


def test_plugin_head_loads_and_predicts(example, tmp_path: Path) -> None:
    path = example.write_tiny_checkpoint(tmp_path / "garment.safetensors")
    model = load_model(path, device="cpu")
    assert model.task == "garment" and model.decode_head.output_name == "conv_garment"
    task = registry.get("garment")
    image = np.random.default_rng(1).integers(0, 256, (40, 30, 3), dtype=np.uint8)
    (result,) = task.predict(model, [image], PredictContext())
    assert tuple(result.labels.shape) == (40, 30) and result.nonfinite == 0
    assert int(result.labels.min()) >= 0 and int(result.labels.max()) < len(example.CLASSES)


def test_head_that_does_not_match_is_refused_naming_the_tensor(example, tmp_path: Path) -> None:
    path = example.write_tiny_checkpoint(tmp_path / "five.safetensors", classes=5)
    with pytest.raises(CheckpointError, match=r"decode_head\.conv_garment\.weight has shape \(5, 8, 1, 1\)"):
        load_model(path, device="meta")


def test_default_carry_keeps_the_task_layers_with_their_declarations(example) -> None:
    """A resumed or partly re-run frame keeps a plug-in's layers by the base class's `carry` (the example
    declares none of its own): its layers and only its layers, each with its declaration."""
    from sapiens2_studio.core.formats.bundle import CaptureFrame
    from sapiens2_studio.core.formats.task_layers import TaskLayer

    task = registry.get("garment")
    assert type(task).carry is registry.Task.carry
    old = CaptureFrame(width=4, height=3)
    old.extra = {"garment": {"id": np.ones((3, 4))}, "other": {"v": np.zeros((3, 4))}}
    old.task_layers = {
        "garment": TaskLayer("garment", ("id",)),
        "other": {"task": "someone", "channels": ["v"]},
    }
    new = CaptureFrame(width=4, height=3)
    task.carry(new, old)
    assert set(new.extra) == {"garment"} and new.task_layers == {"garment": old.task_layers["garment"]}
    assert task.stored(new) and not task.stored(CaptureFrame(width=4, height=3))


def test_an_untrusted_plugins_checkpoint_says_how_to_trust_it(example, tmp_path: Path) -> None:
    path = example.write_tiny_checkpoint(tmp_path / "garment.safetensors")
    registry.reset_plugins()
    registry.load_plugins(trust=False, modules=str(EXAMPLE / "garment.py"), entry_points=False)
    with pytest.raises(CheckpointError, match=r"not trusted \(garment\)") as refused:
        load_model(path, device="meta")
    assert (
        refused.value.hints["comfyui"] == "start ComfyUI with SAPIENS2_TRUST_TASKS=garment in its environment"
    )
    assert refused.value.hints["cli"] == "add --trust-task-code garment"
