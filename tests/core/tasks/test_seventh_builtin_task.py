"""A seventh built-in task is one new file (issue 27, Must show): its module in core/tasks, and nothing else edited.

The test copies the package as this checkout holds it (`git ls-files` of the package's folders) into a temporary
folder, adds exactly one file, `core/tasks/skin.py` (the module below: skin probability, a one-channel dense
regression on the dense head topology core/arch already has, so core/arch needs no change; no official weights,
so no sizes or Hub entries: users give their checkpoint), and checks by hashing every file before and after that
the copy differs from the checkout by that one added file. Then, with the copy first on `sys.path` (each
subprocess proves `sapiens2_studio.__file__` is in the copy, not the editable install): the registry lists it
among the built-ins and in the run order; `sapiens2 info` and `sapiens2 predict --help` list it; `sapiens2
predict --tasks skin` on a tiny official-layout checkpoint (made by core/testing's synthetic helpers from the
task's own declaration) writes a bundle whose JSON declares its layer, which the bundle reader reads back equal to
the task's own prediction, with its preview; a checkpoint whose head does not match is refused naming the tensor;
the disk estimate counts its layer and preview and bounds what the run wrote; a run with `--skip-existing` keeps
the frame as it was and a run of another task keeps its layer; the Python API and the ComfyUI node's path
(`run_tasks` → `task_views`) give the CLI's values; the ComfyUI "Sapiens2 Run Task" node's task combo lists it
(its schema read in-process on a real ComfyUI's `comfy_api`, no server). Running all this writes nothing into the
copy (no bytecode, no edit).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
SHARED = Path(os.environ.get("SAPIENS2_SHARED", REPO.parent / "shared"))
PACKAGE = ("__init__.py", "core", "cli", "comfy_nodes")  # what `import sapiens2_studio` loads from a checkout
NEW_FILE = "core/tasks/skin.py"
TASK = "skin"

# The seventh built-in task: the one file a contributor adds (docs/tasks.md, "A seventh built-in task").
SEVENTH_MODULE = '''\
"""Skin: the probability that a pixel shows skin, a one-channel dense regression on the dense head topology of
core/arch (3x3 input conv, PixelShuffle upsampling, convs, a 1x1 output conv `conv_skin`). No official weights
exist: a studio fine-tunes the head and passes its checkpoint (`--checkpoint skin=FILE`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import Layer, PredictContext, Preview, StoreContext, Task

LAYER = "skin"  # the bundle's EXR channel is `skin.p`


@dataclass
class SkinResult:
    """One image's skin probability (H, W) at the photo's size, and the NaN/inf count of the raw output."""

    probability: Any
    nonfinite: int = 0


def _draw(frame: Any, image: Any) -> Any:
    """The preview: the probability in grey (None when the frame has no skin layer)."""
    layer = (frame.extra or {}).get(LAYER)
    if layer is None:
        return None

    def make() -> Any:
        import numpy as np

        grey = (np.clip(np.nan_to_num(layer["p"]), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
        return np.repeat(grey[..., None], 3, axis=-1)

    return make


class SkinTask(Task):
    name = "skin"
    label = "skin probability"
    batch_field = "skin"
    run_rank = 60  # after the released tasks; it needs none of them
    list_rank = 60
    builtin = True
    released = ()
    unreleased_reason = "skin is a head you fine-tune: no official skin checkpoints exist"
    output_conv = "conv_skin"
    head_kind = "dense"
    out_channels = 1
    layers = (
        Layer(LAYER, (f"{LAYER}.p",), "half", {"none": 2, "zip": 2.0, "zips": 2.1}, "skin probability"),
    )
    previews = (Preview("skin", 1.0, draw=_draw),)

    def predict(self, module: Any, images: Any, ctx: PredictContext) -> list[SkinResult]:
        """One batch: the dense tasks' resize and pad to the network input, the forward pass, a sigmoid, the
        crop resized back to the photo (the pipeline's own steps)."""
        import torch

        from ..pipeline.errors import PredictionInterrupted
        from ..pipeline.images import ImageSource
        from ..pipeline.postprocess import count_nonfinite, uncrop
        from ..pipeline.preprocess import normalize, preprocess_dense

        source = ImageSource(images)
        prepared = [source.get(i, module.device) for i in range(len(source))]
        if ctx.should_stop is not None and ctx.should_stop():
            raise PredictionInterrupted("prediction stopped by request")
        with torch.inference_mode():
            staged = [preprocess_dense(p.pixels, quantize=p.quantized) for p in prepared]
            raw = module(normalize(torch.stack([s[0] for s in staged])).to(dtype=module.dtype))
            raw = raw.to(torch.float32)
            results = []
            for j, (_, layout) in enumerate(staged):
                probability = uncrop(raw[j : j + 1].sigmoid(), layout)[0, 0]
                results.append(SkinResult(probability.to(ctx.output_device), count_nonfinite(raw[j])))
        return results

    def result_size(self, result: SkinResult) -> tuple[int, int]:
        return int(result.probability.shape[1]), int(result.probability.shape[0])

    def nonfinite(self, result: SkinResult) -> int:
        return int(result.nonfinite)

    def store(self, frame: Any, result: SkinResult, ctx: StoreContext) -> None:
        """The probability as the bundle's declared layer `skin.p` (readers that do not know the task skip it)."""
        import numpy as np

        from ..formats.arrays import to_numpy
        from ..formats.task_layers import TaskLayer

        frame.extra[LAYER] = {"p": to_numpy(result.probability).astype(np.float32)}
        frame.task_layers[LAYER] = TaskLayer(
            task=self.name,
            channels=("p",),
            pixel_type="half",
            meaning="probability",
            description="skin probability per pixel, 0..1",
        )

    def check_stored(self, frame: Any) -> list[str]:
        """The read-back layer is there, at the frame's size, with values in 0..1."""
        import numpy as np

        values = (frame.extra or {}).get(LAYER, {}).get("p")
        if values is None or values.shape != (frame.height, frame.width):
            return ["the skin layer is missing or of another size"]
        finite = values[np.isfinite(values)]
        return [] if ((finite >= 0) & (finite <= 1)).all() else ["skin probabilities outside 0..1"]
'''


def _package_files() -> list[str]:
    """The package's files as this checkout holds them: tracked, plus new ones not ignored (a file being added
    in this checkout is part of what `import sapiens2_studio` loads here); never build output or caches."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *PACKAGE],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sorted({n.decode() for n in listed if n and (REPO / n.decode()).is_file()})


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hashes(root: Path) -> dict[str, str]:
    """Every file under `root` (relative path → sha256), caches included: a diff sees anything written."""
    return {p.relative_to(root).as_posix(): _digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


@dataclass
class Copy:
    root: Path  # on sys.path: holds the package folder `sapiens2_studio`
    package: Path
    work: Path  # the subprocesses' working folder (inputs, outputs, checkpoints)
    source: dict[str, str]  # the checkout's package files
    before: dict[str, str]  # the copy before the task module was added
    after: dict[str, str]  # ... and after

    def run(
        self, *args: str | Path, python: str | Path = sys.executable, path: tuple[Path, ...] = ()
    ) -> subprocess.CompletedProcess:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SAPIENS2_", "PYTHONPATH", "VIRTUAL_ENV"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join(str(p) for p in (self.root, *path)),
            PYTHONDONTWRITEBYTECODE="1",  # the copy's files stay exactly those hashed
            HF_HUB_OFFLINE="1",
            SAPIENS2_HOME=str(self.work / "home"),
        )
        return subprocess.run(
            [str(python), *map(str, args)],
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )

    def python(self, script: str, *args: str | Path, **kw) -> dict:
        """Run `script` with the copy importable; it prints one JSON object last, which is returned."""
        proc = self.run("-c", script, *args, **kw)
        assert proc.returncode == 0, proc.stderr[-4000:]
        doc = json.loads(proc.stdout.strip().splitlines()[-1])
        assert Path(doc["file"]).resolve() == (self.package / "__init__.py").resolve(), doc["file"]
        return doc

    def cli(self, *args: str | Path) -> subprocess.CompletedProcess:
        return self.run("-m", "sapiens2_studio.cli", *args)


WHERE = "import sapiens2_studio, json\nFILE = sapiens2_studio.__file__\n"


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Copy:
    root = tmp_path_factory.mktemp("seventh")
    package, work = root / "sapiens2_studio", tmp_path_factory.mktemp("seventh_work")
    files = _package_files()
    for name in files:
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, package / name)
    source = {name: _digest(REPO / name) for name in files}
    before = _hashes(package)
    assert not (package / NEW_FILE).exists(), f"{NEW_FILE} is already a file of this checkout"
    (package / NEW_FILE).write_text(SEVENTH_MODULE, encoding="utf-8")
    return Copy(root, package, work, source, before, _hashes(package))


def test_adding_it_is_one_new_file(copy) -> None:
    """`git diff --stat` of the copy against the checkout: one file added, none changed or removed."""
    assert copy.before == copy.source, "the copy is not the checkout's package"
    added = sorted(set(copy.after) - set(copy.source))
    removed = sorted(set(copy.source) - set(copy.after))
    changed = sorted(n for n in copy.source if n in copy.after and copy.after[n] != copy.source[n])
    assert (added, changed, removed) == ([NEW_FILE], [], [])
    print(f"seventh built-in task: 1 file added ({NEW_FILE}), 0 changed, 0 removed of {len(copy.source)}")


def _released_order() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The checkout's own task names and run order (its registry, as installed)."""
    from sapiens2_studio.core.tasks import registry

    return registry.names(), registry.run_order()


def test_the_registry_and_the_catalogue_list_it(copy) -> None:
    doc = copy.python(
        WHERE
        + """from sapiens2_studio.core import catalogue
from sapiens2_studio.core.tasks import registry
task = registry.get("skin")
print(json.dumps({"file": FILE, "names": registry.names(), "order": registry.run_order(),
    "builtins": [t.name for t in registry.all_tasks() if t.builtin], "module": type(task).__module__,
    "catalogue": catalogue.TASKS, "run_order": catalogue.RUN_ORDER, "released": catalogue.RELEASED["skin"],
    "defaults": catalogue.DEFAULT_TASKS, "label": catalogue.TASK_LABELS["skin"]}))
"""
    )
    names, order = _released_order()
    assert doc["names"] == [*names, TASK] and doc["builtins"] == doc["names"]  # a built-in, listed last
    assert doc["order"] == [*order, TASK] and doc["run_order"] == doc["order"]  # the six keep their order
    assert doc["catalogue"] == doc["names"] and doc["module"] == "sapiens2_studio.core.tasks.skin"
    assert doc["released"] == [] and TASK not in doc["defaults"] and doc["label"] == "skin probability"


def _listed_tasks(help_text: str) -> list[str]:
    """The `--tasks` choices of a command's help ("comma list of: a,b,...", wrapped)."""
    flat = re.sub(r"\s+", "", help_text)
    return re.search(r"--tasksTASKScommalistof:([a-z_,]+)\(default", flat).group(1).split(",")


def test_the_cli_lists_it(copy) -> None:
    info = copy.cli("info")
    assert info.returncode == 0, info.stderr
    listed = re.search(r"^\s*tasks: (.+)$", info.stdout, re.M).group(1).split(", ")
    names, _ = _released_order()
    assert listed == [*names, TASK]
    helped = copy.cli("predict", "--help")
    assert helped.returncode == 0, helped.stderr
    assert _listed_tasks(helped.stdout) == [*names, TASK]


@dataclass
class Predicted:
    photo: Path
    checkpoint: Path
    seg: Path
    out: Path
    first: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def predicted(copy) -> Predicted:
    """Tiny checkpoints from the task's own declaration (core/testing/synthetic), a photo, one CLI run."""
    from PIL import Image

    photo = copy.work / "photo.png"
    Image.fromarray(np.random.default_rng(27).integers(0, 256, (64, 48, 3), dtype=np.uint8)).save(photo)
    made = copy.python(
        WHERE
        + """import sys
from sapiens2_studio.core.arch.config import DenseHeadConfig, ModelConfig
from sapiens2_studio.core.testing.synthetic import state_dict_for, tiny_config, write_synthetic_checkpoint
from safetensors.torch import save_file
write_synthetic_checkpoint(sys.argv[1], task="skin")
write_synthetic_checkpoint(sys.argv[2], task="seg", seed=1)
backbone = tiny_config().backbone  # a head with 3 outputs under the skin task's conv: not a skin head
head = DenseHeadConfig(backbone.embed_dim, (8,) * 4, (8,), (3,), out_channels=3, output_name="conv_skin")
save_file(state_dict_for(ModelConfig(backbone=backbone, task="skin", head=head)), sys.argv[3])
print(json.dumps({"file": FILE}))
""",
        "skin.safetensors",
        "seg.safetensors",
        "three.safetensors",
    )
    assert made["file"]
    out = copy.work / "out"
    first = copy.cli(
        "predict", photo, "--out", out, "--tasks", TASK, "--checkpoint", "skin=skin.safetensors",
        "--no-download", "--device", "cpu",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-4000:]
    return Predicted(photo, copy.work / "skin.safetensors", copy.work / "seg.safetensors", out, first)


def test_predict_writes_its_declared_layer(copy, predicted) -> None:
    doc = json.loads((predicted.out / "photo.json").read_text(encoding="utf-8"))
    assert doc["task_layers"] == {
        "skin": {
            "task": "skin",
            "channels": ["p"],
            "pixel_type": "half",
            "meaning": "probability",
            "description": "skin probability per pixel, 0..1",
        }
    }
    assert TASK not in doc["layers"] and [m["task"] for m in doc["models"]] == [TASK]
    assert doc["run"]["tasks"] == [TASK] and doc["run"]["computed"] == [TASK]
    from PIL import Image

    with Image.open(predicted.out / "photo.skin.png") as preview:  # its preview, at the photo's size
        assert preview.size == (48, 64)
        drawn = np.asarray(preview.convert("L"), dtype=np.float32) / 255.0
    # read back, and computed again in-process: by the task itself, the Python API and the ComfyUI node's path
    back = copy.python(
        WHERE
        + """import sys
import numpy as np
from PIL import Image
from sapiens2_studio.core.checkpoints.loader import load_model
from sapiens2_studio.core.formats.bundle import read_bundle
from sapiens2_studio.core.studio.compute.run_tasks import TaskOptions, run_tasks
from sapiens2_studio.core.studio.runtime import models
from sapiens2_studio.core.studio.runtime.host import Host
from sapiens2_studio.core.studio.studio import Studio
from sapiens2_studio.core.studio.views.task_views import task_views
from sapiens2_studio.core.tasks import PredictContext, registry
import torch
frame = read_bundle(sys.argv[1])
stored = frame.extra["skin"]["p"]
image = np.asarray(Image.open(sys.argv[2]).convert("RGB"))
model = load_model(sys.argv[3], device="cpu")
task = registry.get("skin")
(own,) = task.predict(model, [image], PredictContext())
studio = Studio(device="cpu")
(api,) = studio.capture([image], studio.predict([image], tasks=("skin",), checkpoints={"skin": sys.argv[3]}))
rgb = torch.from_numpy(image.astype(np.float32) / 255.0)[None]
node = run_tasks({"skin": models.load(sys.argv[3], device="cpu")}, rgb, Host(), TaskOptions(chunk_size=4))["skin"]
preview, mask = task_views("skin", node.results, rgb)
print(json.dumps({"file": FILE, "shape": stored.shape, "dtype": str(stored.dtype),
    "head": type(model.decode_head).__name__, "conv": model.decode_head.output_name, "task": model.task,
    "own_vs_stored": float(np.abs(own.probability.numpy() - stored).max()),
    "api_vs_stored": float(np.abs(api.extra["skin"]["p"] - stored).max()),
    "node_mask_vs_stored": float(np.abs(mask[0].numpy() - stored).max()),
    "preview": list(preview.shape), "problems": task.check_stored(frame),
    "declared": frame.task_layers["skin"].meaning, "stored": stored.tolist()}))
""",
        predicted.out / "photo.json",
        predicted.photo,
        predicted.checkpoint,
    )
    assert (back["head"], back["conv"], back["task"]) == ("DenseHead", "conv_skin", TASK)  # core/arch's head
    assert back["shape"] == [64, 48] and back["declared"] == "probability" and back["problems"] == []
    stored = np.asarray(back["stored"], dtype=np.float32)
    assert np.isfinite(stored).all() and stored.min() >= 0.0 and stored.max() <= 1.0 and np.ptp(stored) > 0
    half = 1e-3  # the layer is stored as half floats: the read-back equals a fresh prediction to that step
    assert (
        back["own_vs_stored"] < half and back["api_vs_stored"] < half and back["node_mask_vs_stored"] < half
    )
    assert back["preview"] == [1, 64, 48, 3]
    assert np.abs(drawn - stored).max() <= 1.0 / 255.0 + half  # the PNG shows the stored values


def test_it_is_refused_without_its_checkpoint_or_with_another_head(copy, predicted) -> None:
    """No official file to download: the run says so; a head with 3 outputs is refused naming the tensor."""
    unreleased = copy.cli(
        "predict",
        predicted.photo,
        "--out",
        copy.work / "none",
        "--tasks",
        TASK,
        "--no-download",
        "--device",
        "cpu",
    )
    assert unreleased.returncode != 0 and "no official skin checkpoints exist" in unreleased.stderr
    assert "--checkpoint skin=PATH" in unreleased.stderr
    proc = copy.cli(
        "predict", predicted.photo, "--out", copy.work / "three", "--tasks", TASK, "--checkpoint",
        "skin=three.safetensors", "--no-download", "--device", "cpu",
    )  # fmt: skip
    assert proc.returncode != 0
    assert (
        "decode_head.conv_skin.weight has shape (3, 8, 1, 1): 3 output channels, but the skin task expects 1"
        in (proc.stderr)
    )
    assert not (copy.work / "three" / "photo.json").exists()


def test_the_disk_estimate_counts_it(copy, predicted) -> None:
    doc = json.loads((predicted.out / "photo.json").read_text(encoding="utf-8"))
    written = sum(doc["run"]["files"].values()) + (predicted.out / "photo.json").stat().st_size
    est = copy.python(
        WHERE
        + """from sapiens2_studio.core.studio.jobs.estimate import estimate_frame_bytes, exr_bytes_per_pixel
from sapiens2_studio.core.tasks import registry
layer = registry.get("skin").layers[0].bytes_per_pixel["zip"]
print(json.dumps({"file": FILE, "frame": estimate_frame_bytes(48, 64, ["skin"]),
    "exr": exr_bytes_per_pixel(["skin"], "zip") - exr_bytes_per_pixel([], "zip"), "layer": layer,
    "preview": estimate_frame_bytes(48, 64, ["skin"]) - estimate_frame_bytes(48, 64, ["skin"], previews=False)}))
"""
    )
    assert est["exr"] == est["layer"] > 0 and est["preview"] > 0  # its declared layer and preview count
    assert written <= est["frame"] <= 1.5 * written, (written, est["frame"])
    print(f"skin frame: estimate {est['frame']} B for {written} B written ({est['frame'] / written:.2f}x)")


def test_a_resumed_run_keeps_it(copy, predicted, tmp_path) -> None:
    files = {p.name: _digest(p) for p in predicted.out.iterdir()}
    again = copy.cli(
        "predict", predicted.photo, "--out", predicted.out, "--tasks", TASK, "--checkpoint",
        "skin=skin.safetensors", "--no-download", "--device", "cpu", "--skip-existing",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-4000:]
    assert (
        "wrote 0 result(s)" in again.stderr + again.stdout
        and "kept 1 verified" in again.stderr + again.stdout
    )
    assert {p.name: _digest(p) for p in predicted.out.iterdir()} == files  # the frame is kept as it was
    # a run of another task into the same folder keeps the skin layer and its declaration (Task.carry)
    other = tmp_path / "other"
    shutil.copytree(predicted.out, other)
    seg = copy.cli(
        "predict", predicted.photo, "--out", other, "--tasks", "seg", "--checkpoint", "seg=seg.safetensors",
        "--no-download", "--device", "cpu", "--no-previews",
    )  # fmt: skip
    assert seg.returncode == 0, seg.stderr[-4000:]
    doc = json.loads((other / "photo.json").read_text(encoding="utf-8"))
    first = json.loads((predicted.out / "photo.json").read_text(encoding="utf-8"))
    assert doc["run"]["computed"] == ["seg"] and set(doc["run"]["tasks"]) == {"seg", TASK}
    assert doc["task_layers"] == first["task_layers"] and set(first["layers"]) < set(doc["layers"])
    kept = copy.python(
        WHERE
        + """import sys
import numpy as np
from sapiens2_studio.core.formats.bundle import read_bundle
a, b = (read_bundle(p).extra["skin"]["p"] for p in sys.argv[1:3])
print(json.dumps({"file": FILE, "equal": bool(np.array_equal(a, b))}))
""",
        other / "photo.json",
        predicted.out / "photo.json",
    )
    assert kept["equal"]


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name))


def _comfy_backends(tmp: Path) -> list[tuple[str, Path, Path]]:
    """(version, checkout, python) of the ComfyUI backends to read the node's schema on: COMFYUI_PATH; else the
    hosts of .hosts/hosts.json (tests/comfy/hosts.py), each with its own venv; else the newest ComfyUI snapshot
    in shared/hosts, unpacked here and run with this Python."""
    if os.environ.get("COMFYUI_PATH"):
        python = os.environ.get("COMFYUI_PYTHON") or sys.executable
        return [("COMFYUI_PATH", Path(os.environ["COMFYUI_PATH"]), Path(python))]
    manifest = Path(os.environ.get("SAPIENS2_HOSTS_FILE") or REPO / ".hosts" / "hosts.json")
    if manifest.is_file():
        hosts = json.loads(manifest.read_text(encoding="utf-8")).get("comfyui", [])
        found = [(h["version"], Path(h["path"]), Path(h["python"])) for h in hosts]
        found = [h for h in found if h[1].is_dir() and h[2].is_file()]
        if found:
            return found
    snapshots = sorted((SHARED / "hosts").glob("comfyui-*.tar.gz"), key=lambda p: _version(p.name))
    if not snapshots:
        return []
    with tarfile.open(snapshots[-1]) as archive:
        archive.extractall(tmp, filter="data")
    (checkout,) = [p for p in tmp.iterdir() if p.is_dir()]
    return [(".".join(map(str, _version(snapshots[-1].name))), checkout, Path(sys.executable))]


def test_the_comfyui_run_task_node_lists_it(copy, tmp_path) -> None:
    backends = _comfy_backends(tmp_path)
    if not backends:
        message = "no ComfyUI checkout (COMFYUI_PATH, .hosts/hosts.json or shared/hosts/comfyui-*.tar.gz)"
        if os.environ.get("SAPIENS2_REQUIRE_SHARED"):
            pytest.fail(message)
        pytest.skip(message)
    names, _ = _released_order()
    for version, checkout, python in backends:
        doc = copy.python(
            WHERE
            + """from sapiens2_studio.comfy_nodes.nodes_task import Sapiens2RunTask, task_choices
schema = Sapiens2RunTask.define_schema()
(combo,) = [i for i in schema.inputs if getattr(i, "id", None) == "task"]
print(json.dumps({"file": FILE, "choices": task_choices(), "combo": list(combo.options)}))
""",
            python=python,
            path=(checkout,),
        )
        assert doc["combo"] == doc["choices"] and doc["combo"][1:] == [*names, TASK], version


def test_running_it_wrote_nothing_into_the_copy(copy) -> None:
    """Last: every run above left the copy as it was after the module was added (no bytecode, no edit)."""
    assert _hashes(copy.package) == copy.after
