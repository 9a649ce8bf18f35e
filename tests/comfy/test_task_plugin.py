"""A user's task, installed from outside the repository, runs everywhere without a project file edited (issue 27).

One fresh venv per session (a copy of this checkout with its `exr` extra and a copy of examples/garment_seg, pip-installed as a user
would; torch==2.13.0 from pip's cache) holds the project and the example plug-in. Then, with the example's tiny
official-layout checkpoint: the CLI refuses the task without the opt-in (naming the flag and the env var), lists
it in `sapiens2 info`, writes a bundle with its declared layer, and refuses a checkpoint whose head does not match
before it reads any image; the Python API gives the same layer; ComfyUI 0.3.64 and 0.33.0 (real servers whose
environment names the installed plug-in and trusts it) run the example workflow with "Sapiens2 Run Task" and the
real frontend loads it; the Blender add-on imports the CLI's bundle with the layer as a named mesh attribute.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.comfyui
REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "garment_seg"
CPU_TORCH = "torch==2.13.0"  # the CPU wheel the test venvs use (tests/core/studio/checks/test_selftest.py), from pip's cache
CHECKPOINT = "sapiens2_garment.safetensors"
WORKFLOW = EXAMPLE / "workflows" / "garment_run_task.json"


def _copy_tracked(source: Path, target: Path) -> None:
    """The files git would ship (tracked and untracked, not ignored): what a user's checkout holds."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SAPIENS2_", "PYTHONPATH", "VIRTUAL_ENV"))
    }
    env.update(HF_HUB_OFFLINE="1", **extra)
    return env


class Plugin:
    """The fresh venv and the files the tests share."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv = root / "venv"
        self.python = self.venv / "bin" / "python"
        self.sapiens2 = self.venv / "bin" / "sapiens2"
        self.checkpoint = root / "models" / "sapiens2" / CHECKPOINT
        self.mismatched = root / "five_classes.safetensors"
        self.pointmap = root / "pointmap.safetensors"
        self.photo = root / "photo.png"
        self.install_s = 0.0

    def run(self, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(a) for a in args],
            cwd=cwd or self.root,
            capture_output=True,
            text=True,
            timeout=600,
            env=_clean_env(**env),
        )

    @property
    def module_file(self) -> Path:
        return next(self.venv.glob("lib/python*/site-packages/sapiens2_garment_seg/garment.py"))


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Plugin:
    root = tmp_path_factory.mktemp("task_plugin")
    checkout, example = root / "checkout", root / "garment_seg"
    _copy_tracked(REPO, checkout)
    shutil.copytree(checkout / "examples" / "garment_seg", example)  # installed from outside the checkout
    env = Plugin(root)
    started = time.perf_counter()
    setup = subprocess.run(
        ["bash", "-c", f"set -e; {sys.executable} -m venv {env.venv}; "
         f"{env.venv}/bin/pip install -q --no-input {CPU_TORCH} '{checkout}[exr]' {example}"],
        capture_output=True, text=True, timeout=900, env=_clean_env(),
    )  # fmt: skip
    assert setup.returncode == 0, setup.stderr[-4000:]
    env.install_s = time.perf_counter() - started
    print(f"task plug-in venv: install {env.install_s:.0f} s")
    made = env.run(env.python, "-m", "sapiens2_garment_seg.checkpoint", env.checkpoint)
    assert made.returncode == 0, made.stderr
    made = env.run(env.python, "-m", "sapiens2_garment_seg.checkpoint", env.mismatched, "5")
    assert made.returncode == 0, made.stderr
    # a built-in task beside it (a plane 2.5 m away), so the bundle has a pointmap mesh for Blender
    made = env.run(env.python, "-c", "import sys; from sapiens2_studio.core.testing.synthetic import "
                   "write_constant_output_checkpoint as w; w(sys.argv[1], 'pointmap', (0.1, -0.2, 2.5), scale=1.0)",
                   env.pointmap)  # fmt: skip
    assert made.returncode == 0, made.stderr
    from PIL import Image

    rng = np.random.default_rng(27)
    Image.fromarray(rng.integers(0, 256, (64, 48, 3), dtype=np.uint8)).save(env.photo)
    return env


def _predict(
    plugin: Plugin, out: Path, *extra: str, inputs: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess:
    return plugin.run(
        plugin.sapiens2, "predict", *(inputs or (plugin.photo,)), "--out", out, "--tasks", "garment",
        "--checkpoint", f"garment={plugin.checkpoint}", "--no-download", "--device", "cpu", "--no-previews",
        *extra,
    )  # fmt: skip


def test_cli_refuses_the_task_without_the_opt_in(plugin) -> None:
    out = plugin.root / "refused"
    proc = _predict(plugin, out)
    assert proc.returncode != 0
    assert "garment" in proc.stderr and "not trusted" in proc.stderr
    assert "--trust-task-code garment" in proc.stderr and "SAPIENS2_TRUST_TASKS=garment" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_info_lists_the_plugin(plugin) -> None:
    untrusted = plugin.run(plugin.sapiens2, "info", "--json")
    assert untrusted.returncode == 0, untrusted.stderr
    report = json.loads(untrusted.stdout)
    assert "garment" in report["refused_tasks"] and "garment" not in [t["name"] for t in report["tasks"]]
    trusted = plugin.run(plugin.sapiens2, "info", "--trust-task-code", "garment")
    assert trusted.returncode == 0, trusted.stderr
    assert "plug-in garment: garment parsing (7 classes) (sapiens2_garment_seg.garment)" in trusted.stdout
    described = plugin.run(plugin.sapiens2, "info", plugin.checkpoint, "--trust-task-code")
    assert described.returncode == 0, described.stderr
    assert "Sapiens2 custom garment" in described.stdout


def test_a_head_that_does_not_match_is_refused_before_any_image_is_read(plugin) -> None:
    broken = plugin.root / "broken.png"
    broken.write_bytes(b"not a picture at all")  # reading it would fail with another message
    proc = plugin.run(
        plugin.sapiens2, "predict", broken, "--out", plugin.root / "mismatch", "--tasks", "garment",
        "--checkpoint", f"garment={plugin.mismatched}", "--no-download", "--device", "cpu", "--trust-task-code",
    )  # fmt: skip
    assert proc.returncode != 0
    assert "decode_head.conv_garment.weight has shape (5, 8, 1, 1)" in proc.stderr, proc.stderr
    assert "expects 7" in proc.stderr and "broken.png" not in proc.stderr


@pytest.fixture(scope="module")
def cli_bundle(plugin) -> Path:
    out = plugin.root / "cli"
    proc = plugin.run(
        plugin.sapiens2, "predict", plugin.photo, "--out", out, "--tasks", "pointmap,garment", "--checkpoint",
        f"garment={plugin.checkpoint}", "--checkpoint", f"pointmap={plugin.pointmap}", "--no-download", "--device",
        "cpu", "--no-previews", "--trust-task-code", "garment",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out / "photo.json"


def test_cli_writes_the_declared_layer(cli_bundle) -> None:
    from sapiens2_studio.core.formats.bundle import read_bundle

    doc = json.loads(cli_bundle.read_text(encoding="utf-8"))
    declared = doc["task_layers"]["garment"]
    assert declared["task"] == "garment" and declared["channels"] == ["id"]
    assert declared["meaning"] == "class_id" and len(declared["classes"]) == 7
    assert "garment" not in doc["layers"] and "P" in doc["layers"]
    assert [m["task"] for m in doc["models"]] == ["pointmap", "garment"]
    frame = read_bundle(cli_bundle)  # this process has no plug-in: the layer reads from its declaration
    ids = frame.extra["garment"]["id"]
    assert ids.shape == (64, 48) and ids.min() >= 0 and ids.max() < 7


def test_a_rerun_of_other_tasks_keeps_the_plugin_layer(plugin, cli_bundle, tmp_path) -> None:
    """Re-running only the pointmap, the plug-in not trusted now: the frame keeps the garment layer, its
    declaration and its model record (nothing of a task is dropped because its code is not loaded)."""
    out = tmp_path / "rerun"
    shutil.copytree(cli_bundle.parent, out)
    # without the opt-in: the plug-in does not run, its layer is kept as it is
    proc = plugin.run(
        plugin.sapiens2,
        "predict",
        plugin.photo,
        "--out",
        out,
        "--tasks",
        "pointmap",
        "--checkpoint",
        f"pointmap={plugin.pointmap}",
        "--no-download",
        "--device",
        "cpu",
        "--no-previews",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "photo.json").read_text(encoding="utf-8"))
    assert doc["run"]["tasks"] == ["pointmap", "garment"] and doc["run"]["computed"] == ["pointmap"]
    assert doc["task_layers"] == json.loads(cli_bundle.read_text(encoding="utf-8"))["task_layers"]
    from sapiens2_studio.core.formats.bundle import read_bundle

    np.testing.assert_array_equal(
        read_bundle(out / "photo.json").extra["garment"]["id"], read_bundle(cli_bundle).extra["garment"]["id"]
    )


def test_python_api_gives_the_cli_layer(plugin, cli_bundle) -> None:
    script = """
import sys
from PIL import Image
import numpy as np
from sapiens2_studio.core.studio.studio import Studio
from sapiens2_studio.core.formats.bundle import write_bundle
studio = Studio(device="cpu", trust_task_code=["garment"])
image = np.asarray(Image.open(sys.argv[1]).convert("RGB"))
batches = studio.predict([image], tasks=("garment",), checkpoints={"garment": sys.argv[2]})
(frame,) = studio.capture([image], batches)
print(write_bundle(sys.argv[3], "photo", frame))
"""
    proc = plugin.run(plugin.python, "-c", script, plugin.photo, plugin.checkpoint, plugin.root / "python")
    assert proc.returncode == 0, proc.stderr
    from sapiens2_studio.core.formats.bundle import read_bundle

    mine, cli = read_bundle(proc.stdout.strip()), read_bundle(cli_bundle)
    np.testing.assert_array_equal(mine.extra["garment"]["id"], cli.extra["garment"]["id"])


# ------------------------------------------------------------------------------------------------- ComfyUI


@pytest.fixture(scope="module")
def plugin_server(comfy_host, plugin, comfy_harness, tmp_path_factory):
    """ComfyUI whose environment names the installed plug-in's module and trusts it, the garment checkpoint in
    models/sapiens2 and the example picture uploaded."""
    root = tmp_path_factory.mktemp(f"plugin_{comfy_host.id}")
    models = root / "models"
    (models / "sapiens2").mkdir(parents=True)
    shutil.copy(plugin.checkpoint, models / "sapiens2" / CHECKPOINT)
    server = comfy_harness.ComfyServer(
        comfy_host.checkout, comfy_host.python, root / "base", comfy_harness.free_port()
    )
    with pytest.MonkeyPatch.context() as mp:  # the server's environment, as a user would start it
        mp.setenv("SAPIENS2_TASK_MODULES", str(plugin.module_file))
        mp.setenv("SAPIENS2_TRUST_TASKS", "garment")
        server.start(models)
    try:
        client = comfy_harness.Client(server.url)
        client.upload_image(plugin.photo, comfy_harness.EXAMPLE_IMAGE)
        yield server
    finally:
        server.stop()


def test_comfyui_runs_the_plugin_task(plugin_server, comfy_harness, cli_bundle) -> None:
    client = comfy_harness.Client(plugin_server.url)
    assert plugin_server.import_failures() == []
    info = client.get("/object_info/Sapiens2RunTask")["Sapiens2RunTask"]
    options = info["input"]["required"]["task"]
    choices = options[1]["options"] if options[0] == "COMBO" else options[0]
    assert "garment" in choices and "seg" in choices, choices
    prompt = comfy_harness.load_json(WORKFLOW.with_name("garment_run_task.api.json"))
    prompt["7"] = {  # and the capture bundle, with the task's own declared layer
        "class_type": "Sapiens2SaveCaptureBundle",
        "inputs": {
            "image": ["1", 0],
            "filename_prefix": "garment/capture",
            "fps": 0.0,
            "task_results": ["3", 2],
        },
    }
    entry = client.run(prompt)
    error = comfy_harness.execution_error(entry)
    assert error is None, f"{error['node_type']}: {error['exception_message']}" if error else ""
    from PIL import Image

    saved = {node: out["images"][0] for node, out in entry["outputs"].items() if "images" in out}
    mask = plugin_server.base / "output" / saved["6"]["subfolder"] / saved["6"]["filename"]
    from sapiens2_studio.core.formats.bundle import read_bundle

    ids = read_bundle(cli_bundle).extra["garment"]["id"]
    shown = np.asarray(Image.open(mask).convert("L"))
    np.testing.assert_array_equal(shown > 127, ids > 0)  # the same classes as the CLI's (one engine)
    (bundle,) = (plugin_server.base / "output" / "garment").glob("capture*.json")
    saved_bundle = read_bundle(bundle)
    np.testing.assert_array_equal(saved_bundle.extra["garment"]["id"], ids)
    doc = json.loads(bundle.read_text(encoding="utf-8"))
    assert doc["task_layers"] == json.loads(cli_bundle.read_text(encoding="utf-8"))["task_layers"]


def test_comfyui_without_the_opt_in_says_how_to_trust_the_plugin(
    comfy_host, plugin, comfy_harness, matrix, tmp_path
) -> None:
    """The same server environment without SAPIENS2_TRUST_TASKS: the plug-in is not run, and loading its
    checkpoint says which variable trusts it. (One host: the message is core's, the same on both.)"""
    if comfy_host != matrix.hosts[0]:
        pytest.skip("checked on the first host of the matrix")
    models = tmp_path / "models"
    (models / "sapiens2").mkdir(parents=True)
    shutil.copy(plugin.checkpoint, models / "sapiens2" / CHECKPOINT)
    server = comfy_harness.ComfyServer(
        comfy_host.checkout, comfy_host.python, tmp_path / "base", comfy_harness.free_port()
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAPIENS2_TASK_MODULES", str(plugin.module_file))
        mp.delenv("SAPIENS2_TRUST_TASKS", raising=False)
        server.start(models)
    try:
        client = comfy_harness.Client(server.url)
        client.upload_image(plugin.photo, comfy_harness.EXAMPLE_IMAGE)
        options = client.get("/object_info/Sapiens2RunTask")["Sapiens2RunTask"]["input"]["required"]["task"]
        assert "garment" not in json.dumps(options)
        prompt = comfy_harness.load_json(WORKFLOW.with_name("garment_run_task.api.json"))
        prompt["3"]["inputs"]["task"] = "auto (the model's task)"
        error = comfy_harness.execution_error(client.run(prompt))
        assert error is not None and error["node_type"] == "Sapiens2ModelLoader", error
        assert "SAPIENS2_TRUST_TASKS=garment" in error["exception_message"], error["exception_message"]
        assert "--trust-task-code" not in error["exception_message"]  # ComfyUI advice only
    finally:
        server.stop()


def test_real_frontend_loads_the_workflow(plugin_server, comfy_host, chromium, browser_module, comfy_harness):
    workflow = comfy_harness.load_json(WORKFLOW)
    with browser_module.Frontend(plugin_server.url, chromium) as page:
        report = page.load(workflow, WORKFLOW.name)
    assert report.problems == [], "\n".join(report.problems)
    assert report.prompt_nodes == len(workflow["nodes"])


# ------------------------------------------------------------------------------------------------- Blender

BPY_SCRIPT = """
import json, sys
import bpy
zip_path, bundle = sys.argv[1], sys.argv[2]
assert bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True) == {"FINISHED"}
import addon_utils
try:
    bpy.ops.import_scene.sapiens2_capture(filepath=bundle, import_armatures=False)
    obj = bpy.data.objects["photo mesh"]
    attribute = obj.data.attributes["garment.id"]
    values = [0] * len(obj.data.vertices)
    attribute.data.foreach_get("value", values)
    print(json.dumps({"type": attribute.data_type, "domain": attribute.domain, "values": values,
                      "classes": obj.data["garment.id.classes"].to_dict()}))
finally:
    addon_utils.disable("bl_ext.user_default.sapiens2_capture")
"""


def _blender_hosts() -> list[tuple[str, str]]:
    manifest = REPO / ".hosts" / "hosts.json"
    listed = json.loads(manifest.read_text(encoding="utf-8")).get("blender", []) if manifest.is_file() else []
    return [(h["version"], h["python"]) for h in listed if h["version"] in ("4.2.23", "5.3.0")]


@pytest.mark.parametrize("version", ["4.2.23", "5.3.0"])
def test_blender_import_shows_the_layer_as_an_attribute(version, cli_bundle, tmp_path) -> None:
    python = dict(_blender_hosts()).get(version)
    if python is None:
        pytest.skip(f"no bpy {version} host in .hosts/hosts.json")
    dist = tmp_path / "dist"
    build = subprocess.run([python, REPO / "scripts" / "build_blender_extension.py", "--output-dir", dist],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    (zip_path,) = dist.glob("sapiens2_capture-*.zip")
    user = tmp_path / "user"
    user.mkdir()
    proc = subprocess.run(
        [python, "-c", BPY_SCRIPT, str(zip_path), str(cli_bundle)],
        capture_output=True, text=True, timeout=240, env={**_clean_env(), "BLENDER_USER_RESOURCES": str(user)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (seen["type"], seen["domain"]) == ("INT", "POINT")
    from sapiens2_studio.core.formats.bundle import read_bundle

    ids = read_bundle(cli_bundle).extra["garment"]["id"]
    assert len(seen["values"]) == ids.size  # a plane: every pixel is a vertex, each with its pixel's class
    np.testing.assert_array_equal(
        np.bincount(seen["values"], minlength=7), np.bincount(ids.ravel(), minlength=7)
    )
    assert seen["classes"]["1"] == "top"
