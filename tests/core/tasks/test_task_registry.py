"""The task registry: built-ins, and plug-in tasks found through a real entry point or an explicit module,
loaded only when trusted (issue 27)."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from sapiens2_studio.core.checkpoints.errors import CheckpointError
from sapiens2_studio.core.tasks import registry
from sapiens2_studio.core.tasks.errors import TaskError, UntrustedTaskError

PLUGIN = """
from sapiens2_studio.core.tasks.base import Layer, Task


class {cls}(Task):
    name = "{name}"
    label = "garment parsing (test)"
    run_rank = 15
    needs = ("seg",)
    output_conv = "{conv}"
    head_kind = "heatmap"
    out_channels = 7
    layers = (Layer("{name}", ("{name}.id",), "float", {{"none": 4, "zip": 1.0, "zips": 1.1}}),)
"""


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv(registry.TRUST_ENV, raising=False)
    monkeypatch.delenv(registry.MODULES_ENV, raising=False)
    registry.reset_plugins()
    yield
    registry.reset_plugins()


def _plugin_module(where: Path, name: str, conv: str | None = None) -> str:
    """A real module file `<where>/<module>.py` defining one task; returns the module name."""
    module = f"s2_task_{uuid.uuid4().hex[:10]}"
    text = PLUGIN.format(cls="GarmentTask", name=name, conv=conv or f"conv_{name}")
    (where / f"{module}.py").write_text(textwrap.dedent(text))
    return module


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """An installed distribution (a dist-info with entry_points.txt on sys.path) exposing a task in the group
    `sapiens2_studio.tasks`, found by importlib.metadata as pip-installed packages are."""

    def install(name: str, ep_name: str | None = None, conv: str | None = None) -> str:
        site = tmp_path / f"site_{uuid.uuid4().hex[:6]}"
        site.mkdir()
        module = _plugin_module(site, name, conv)
        dist = site / f"{module}-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(
            f"[{registry.ENTRY_POINT_GROUP}]\n{ep_name or name} = {module}:GarmentTask\n"
        )
        monkeypatch.syspath_prepend(str(site))
        return module

    return install


def test_builtins_are_registered_in_listing_and_run_order():
    assert registry.names() == ("pose", "seg", "normal", "albedo", "pointmap", "matting")
    # seg first: pose takes its boxes from it, the dense tasks their mask; matting last
    assert registry.run_order() == ("seg", "pose", "normal", "albedo", "pointmap", "matting")
    assert registry.run_order(["matting", "pose", "seg"]) == ("seg", "pose", "matting")
    assert registry.get("pose").needs == ("seg",)
    assert all(task.builtin for task in registry.all_tasks())


def test_unknown_task_lists_the_choices():
    with pytest.raises(TaskError, match="unknown task 'garmnet'; choose one of pose, seg"):
        registry.get("garmnet")


def test_head_match_by_output_conv():
    assert registry.by_output_conv("conv_pointmap").name == "pointmap"
    assert registry.by_output_conv("conv_nothing") is None
    head = {"conv_layers.0.weight": (8, 8, 1, 1), "conv_seg.weight": (29, 8, 1, 1)}
    assert registry.for_head(head).name == "seg"
    registry.get("seg").check_head(head)
    with pytest.raises(
        CheckpointError, match=r"needs decode_head\.conv_pose\.weight .* has decode_head\.conv_seg"
    ):
        registry.get("pose").check_head(head)


def test_entry_point_plugin_is_refused_until_trusted(installed):
    name = f"garment{uuid.uuid4().hex[:4]}"
    installed(name)
    assert registry.load_plugins() == []  # found, not trusted: no code ran
    assert name not in registry.names()
    assert name in registry.refused()
    with pytest.raises(UntrustedTaskError) as refused:
        registry.get(name)
    message = str(refused.value)
    assert "--trust-task-code" in message and "SAPIENS2_TRUST_TASKS" in message
    assert refused.value.hints["cli"].startswith(f"add --trust-task-code {name}")

    assert registry.load_plugins(trust=[name]) == [name]
    task = registry.get(name)
    assert type(task).__module__ in sys.modules  # imported for real, by the entry point
    assert task.needs == ("seg",) and task.out_channels == 7
    assert registry.run_order([name, "pose", "seg"]) == ("seg", name, "pose")  # run_rank 15
    assert registry.names()[-1] == name and registry.refused() == {}
    assert registry.load_plugins(trust=True) == []  # once per source


def test_entry_point_trusted_by_environment(installed, monkeypatch):
    name = f"garment{uuid.uuid4().hex[:4]}"
    installed(name)
    monkeypatch.setenv(registry.TRUST_ENV, "*")
    assert registry.load_plugins() == [name]
    assert registry.by_output_conv(f"conv_{name}").name == name


def test_head_mismatch_names_the_tensors(installed):
    name = f"garment{uuid.uuid4().hex[:4]}"
    installed(name)
    registry.load_plugins(trust=name)
    task = registry.get(name)
    task.check_head({f"conv_{name}.weight": (7, 16, 1, 1)})
    with pytest.raises(
        CheckpointError, match=rf"decode_head\.conv_{name}\.weight has shape \(29, 16, 1, 1\)"
    ):
        task.check_head({f"conv_{name}.weight": (29, 16, 1, 1)})


def test_entry_point_must_be_named_after_its_task(installed):
    name = f"garment{uuid.uuid4().hex[:4]}"
    installed(name, ep_name="other")
    with pytest.raises(TaskError, match=f"entry point 'other' .* loads a task named '{name}'"):
        registry.load_plugins(trust=True)
    assert name not in registry.names()


def test_plugin_cannot_take_a_builtin_name_or_head(installed):
    installed("seg", conv="conv_garment_x")
    with pytest.raises(TaskError, match="a task named 'seg' is already registered"):
        registry.load_plugins(trust=True)
    registry.reset_plugins()
    installed(f"garment{uuid.uuid4().hex[:4]}", conv="conv_pose")
    with pytest.raises(TaskError, match=r"decode_head\.conv_pose, which is task 'pose'"):
        registry.load_plugins(trust=True)


def test_explicit_module_file_by_env_needs_trust(tmp_path, monkeypatch):
    name = f"garment{uuid.uuid4().hex[:4]}"
    module = _plugin_module(tmp_path, name)
    path = str(tmp_path / f"{module}.py")
    monkeypatch.setenv(registry.MODULES_ENV, path)
    assert registry.load_plugins() == []
    assert module in registry.refused()
    assert "--trust-task-code" in registry.refused()[module]
    assert registry.load_plugins(trust=module) == [name]
    assert registry.get(name).label == "garment parsing (test)"


def test_explicit_module_by_dotted_name(tmp_path, monkeypatch):
    name = f"garment{uuid.uuid4().hex[:4]}"
    module = _plugin_module(tmp_path, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert registry.load_plugins(trust=["*"], modules=[module]) == [name]


def test_builtins_are_the_modules_of_the_package():
    """A built-in task is its own module in core/tasks (found there; no list to edit), named after its task."""
    package = Path(registry.__file__).parent
    modules = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    assert modules - set(registry._SUPPORT_MODULES) == set(registry.names())


def test_a_task_cannot_take_another_tasks_results_name():
    """Front-ends take each task's results under its `field` (a ComfyUI input, a Python argument): a plug-in that
    reused "normals" would have its batch handed to the normal task's layers."""
    seg = type(registry.get("seg"))
    clash = type(
        "ClashTask", (seg,), {"name": "clashy", "output_conv": "conv_clashy", "batch_field": "normals"}
    )
    try:
        with pytest.raises(TaskError, match="names its results 'normals', as task 'normal' does"):
            registry.register(clash)
        assert "clashy" not in registry.names()
        own = type(
            "OwnTask", (seg,), {"name": "clashy", "output_conv": "conv_clashy", "batch_field": "clashy"}
        )
        assert registry.register(own).field == "clashy"
    finally:
        registry.unregister("clashy")
