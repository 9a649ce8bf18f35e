"""The layering rules of docs/architecture.md, checked on the source: no import cycles, imports only point down,
and the front-ends hold no maths of their own."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "cli", "comfy_nodes")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that `name` imports (relative imports, at any depth of the file)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            for candidate in (base, *(f"{base}.{a.name}" for a in node.names)):
                if candidate in modules and candidate != name:
                    out.add(candidate)
    return out


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    seen: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        seen[node] = 1
        for dep in sorted(graph[node]):
            if dep == node.rsplit(".", 1)[0] or node.startswith(dep + "."):
                continue  # a module importing its own package's __init__ (siblings): not a layering cycle
            if seen.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, node, dep]))
            if dep not in seen:
                visit(dep, [*path, node])
        seen[node] = 2

    for name in sorted(graph):
        if name not in seen:
            visit(name, [])


def test_imports_only_point_down():
    modules = _modules()
    for name, path in modules.items():
        deps = _imports(name, path, modules)
        if name.startswith("core"):
            assert not {d for d in deps if d.startswith(("cli", "comfy_nodes"))}, (name, deps)
            assert not _top_level_imports(path) & {"comfy", "comfy_api", "folder_paths", "bpy"}, name
        if name.startswith("cli"):
            assert not {d for d in deps if d.startswith("comfy_nodes")}, (name, deps)
        if name.startswith(
            ("core.arch", "core.checkpoints", "core.pipeline", "core.formats", "core.shading")
        ):
            assert not {d for d in deps if d.startswith("core.studio")}, (name, deps)


def test_front_ends_do_no_maths():
    """The CLI and the node pack translate; numbers are computed in core (one engine). Only ComfyUI's model
    management glue may touch torch (its ModelPatcher needs an nn.Module holder)."""
    for package in ("cli", "comfy_nodes"):
        for path in (REPO / package).glob("*.py"):
            imported = _top_level_imports(path)
            assert "numpy" not in imported, path.name
            if path.name != "comfy_host.py":
                assert "torch" not in imported, path.name


def test_the_cli_parser_imports_no_torch():
    """`sapiens2 --help` and argument errors must stay instant: the parser's imports (catalogue, engines,
    writer defaults) may not pull torch or numpy in through a package `__init__`."""
    code = (
        "import sys; from sapiens2_studio.cli.arguments import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# ----------------------------------------------------------------------------------- a task is one unit (#27)
BUILTIN_TASK_NAMES = {"pose", "seg", "normal", "albedo", "pointmap", "matting"}
# Files that still name tasks, with how many places: each must shrink to zero as its code moves into the task
# modules (core/tasks) or reads the registry; a count may only go down. Kept apart on purpose:
# - core/arch/official_heads.py: the official heads' facts, one table (`HEADS`) that the heads, the presets and
#   the tiny test models of core/testing read; core/arch sits below core/tasks (a task module names its head,
#   never the other way), so a new head kind is the one change outside its task module;
# - core/pipeline/predict.py: PREDICTORS, the pipeline's public per-task functions behind `predict()`;
TASK_NAME_ALLOWED = {
    "core/arch/official_heads.py": 1,
    "core/pipeline/predict.py": 1,
}


def _task_name_places(tree: ast.AST) -> set[int]:
    """Lines that ask "which task is this?" by name: a comparison or `in` test with a task-name string (or a
    tuple of them), a subscript or `.get`/`.pop` by one, or a dict literal keyed by two or more of them."""

    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in BUILTIN_TASK_NAMES

    def holds(node: ast.AST) -> bool:
        return named(node) or (
            isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(named(e) for e in node.elts)
        )

    def asks(node: ast.AST) -> bool:
        if isinstance(node, ast.Compare):
            return holds(node.left) or any(holds(c) for c in node.comparators)
        if isinstance(node, ast.Subscript):
            return named(node.slice)
        if isinstance(node, ast.Call):
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            return method in ("get", "pop") and bool(node.args) and named(node.args[0])
        if isinstance(node, ast.Dict):
            return sum(k is not None and named(k) for k in node.keys) >= 2
        return False

    lines = {node.lineno for node in ast.walk(tree) if asks(node)}
    return lines


def test_no_task_is_named_outside_its_module():
    """Nothing outside core/tasks asks which task it has by comparing names (docs/architecture.md): the
    consumers read the task's declarations from the registry. The allow-list only shrinks."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith("core/tasks/"):
                continue
            places = _task_name_places(ast.parse(path.read_text(encoding="utf-8")))
            if places:
                found[rel] = len(places)
    grown = {f: n for f, n in found.items() if n > TASK_NAME_ALLOWED.get(f, 0)}
    assert not grown, f"task names compared outside core/tasks (read the registry instead): {grown}"
    shrunk = {f: n for f, n in TASK_NAME_ALLOWED.items() if found.get(f, 0) < n}
    assert not shrunk, f"fewer task-name places than allowed; lower TASK_NAME_ALLOWED to: {shrunk}"


# ------------------------------------------------------------------------------------- one chunker (#27)
CHUNKER = "core/chunks.py"
# Where the one chunker may be called: the engine's run_chunked (OOM back-off, progress, cancel of a Host) and the
# pipeline's public predict_* functions (their `batch_size`); everything else hands its batch on whole.
CHUNKER_CALLERS = {
    "core/studio/runtime/chunking.py",
    "core/pipeline/predict.py",
    "core/pipeline/matting_predictor.py",
}


def _predictor_modules() -> list[Path]:
    """Modules that run a model over images: the pipeline predictors and the task modules."""
    found = []
    for folder in ("core/pipeline", "core/tasks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            if any(name == "predict" or name.startswith(("predict_", "_predict")) for name in names):
                found.append(path)
    return found


def test_no_predictor_splits_a_batch():
    """Issue 27: one chunker. Predictors take a batch and run it as given; only `core/chunks.py` cuts a batch
    into chunks (a `range` stepped by a size, a chunk helper of its own), called by the engine's run_chunked and
    the pipeline's public functions. Banding rows of one image (postprocess, resample) is not batching."""
    modules = _predictor_modules()
    assert {"predict.py", "matting.py", "pose.py", "seg.py", "dense.py"} <= {p.name for p in modules}
    for path in modules:
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert "chunk" not in node.name.lower(), (
                    f"{rel}:{node.lineno} defines {node.name}: use core.chunks"
                )
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
                assert len(node.args) < 3, (
                    f"{rel}:{node.lineno} steps a range: batches are cut by core.chunks"
                )
    callers = set()
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                called = (
                    getattr(node.func, "id", getattr(node.func, "attr", ""))
                    if isinstance(node, ast.Call)
                    else ""
                )
                if called == "in_chunks":
                    callers.add(rel)
                if isinstance(node, ast.FunctionDef) and node.name == "in_chunks":
                    assert rel == CHUNKER, f"a second chunker in {rel}"
    assert callers == CHUNKER_CALLERS, callers


# ------------------------------------------------------- a job is a descent: plan → compute → commit (#27, item 3)
CORE_MAX_LINES = 620  # "no file in core/ over ~600 lines"
JOB_MODULES = sorted((REPO / "core" / "studio" / "jobs").glob("job*.py"))


def test_no_core_file_is_over_the_size_limit():
    """Small modules with one job each: no file in core/ grows past ~600 lines (the job was split by concern)."""
    sizes = {p.relative_to(REPO).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in _core()}
    assert {"core/studio/jobs/job.py", "core/studio/jobs/job_plan.py"} <= set(sizes)
    assert not {path: n for path, n in sizes.items() if n > CORE_MAX_LINES}


def _core() -> list[Path]:
    return sorted((REPO / "core").rglob("*.py"))


def test_a_job_is_prepared_by_its_plan_not_by_probing_its_attributes():
    """`prepare` makes one immutable RunPlan that both engines run; no code asks a job (or a job itself) with
    hasattr/getattr-with-default whether it was prepared, and PredictJob sets no attribute outside __init__
    except the writer it opens for the run."""
    from sapiens2_studio.core.studio.jobs.job_plan import RunPlan

    assert RunPlan.__dataclass_params__.frozen  # type: ignore[attr-defined]
    for path in [*_core(), *(REPO / "cli").rglob("*.py")]:
        rel = path.relative_to(REPO).as_posix()
        probed = {"job", "self"} if path in JOB_MODULES or "engines" in path.parts else {"job"}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
                continue
            probe = node.func.id == "hasattr" or (node.func.id == "getattr" and len(node.args) == 3)
            subject = node.args[0]
            assert not (probe and isinstance(subject, ast.Name) and subject.id in probed), (
                f"{rel}:{node.lineno} probes a job's attributes: read its plan (job.plan / job.planned())"
            )
    tree = ast.parse((REPO / "core" / "studio" / "jobs" / "job.py").read_text(encoding="utf-8"))
    job = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PredictJob")
    assigned: dict[str, set[str]] = {}
    for method in (n for n in job.body if isinstance(n, ast.FunctionDef)):
        for node in ast.walk(method):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else [i.optional_vars for i in node.items if i.optional_vars is not None]
                if isinstance(node, ast.With)
                else []
            )
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and getattr(t.value, "id", None) == "self":
                        assigned.setdefault(method.name, set()).add(t.attr)
    initial = assigned.pop("__init__")
    later = set().union(*assigned.values()) - initial
    assert not later, f"PredictJob attributes first set outside __init__: {sorted(later)}"
    assert "plan" in initial and "plan" in assigned["prepare"]


def _import_time_environment_reads(tree: ast.Module) -> list[int]:
    """Lines that read `os.environ` / `os.getenv` (or a bare `environ` / `getenv` imported from os) in code that
    runs on import: module and class bodies, default values and decorators; function and lambda bodies run later."""
    hits: list[int] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Lambda):
            visit(node.args)  # defaults run at definition time, the body later
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for part in (node.args, *node.decorator_list, node.returns):
                if part is not None:
                    visit(part)
            return
        module_read = (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
        )
        if module_read and node.attr in ("environ", "environb", "getenv", "getenvb"):
            hits.append(node.lineno)
        if isinstance(node, ast.Name) and node.id in ("environ", "getenv"):
            hits.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return hits


def test_core_reads_the_environment_when_used_not_on_import():
    """A setting read at import time is frozen for the process: a host (ComfyUI, a farm worker, a test) that sets
    it after importing the package would be ignored, and the behaviour would depend on import order. Every
    `os.environ` / `os.getenv` in core/ sits inside the function that uses the value (issue 27)."""
    found = {}
    for path in sorted((REPO / "core").rglob("*.py")):
        lines = _import_time_environment_reads(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[str(path.relative_to(REPO))] = lines
    assert not found, f"environment read at import time: {found}"
    # the check itself sees each form a module could use
    sample = "import os\nA = os.environ.get('X')\nB = os.getenv('Y')\nclass C:\n    D = os.environ['Z']\n"
    sample += "def f(e=os.getenv('W')):\n    return os.environ.get('V')\ng = lambda: os.getenv('U')\n"
    assert _import_time_environment_reads(ast.parse(sample)) == [2, 3, 5, 6]


# ------------------------------------------------------------------ a layout that shows it (#27, item 5)
# The layers of core at import time, lowest first: a module's import statements that run on import name only its
# own layer and the ones listed before it (docs/architecture.md). Task modules are declarations at import (stdlib
# only; their methods call the pipeline at run time), so the registry and the catalogue of tasks and sizes sit
# low: the model, checkpoint and pipeline layers read them.
CORE_LAYERS = (
    "core",  # errors, dtypes, timing, chunks
    "core.data",
    "core.tasks",
    "core.catalogue",
    "core.arch",
    "core.shading",
    "core.formats",
    "core.pipeline",
    "core.checkpoints",
    "core.onnx",
    "core.testing",
    "core.studio",
)
# The sub-packages of core/studio, lowest first (the same rule inside the engine). A package's own __init__
# (`engines/__init__`: the engine names the CLI parser shows) is a name list, not a dependency.
STUDIO_LAYERS = (
    "errors",
    "sources",
    "runtime",
    "compute",
    "views",
    "store",
    "jobs",
    "checks",
    "engines",
    "studio",
)


def _layer(name: str, layers: tuple[str, ...]) -> int:
    best = max((layer for layer in layers if name == layer or name.startswith(layer + ".")), key=len)
    return layers.index(best)


def _import_time_imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that `name` imports when it is imported: module-level statements (inside `if`/`try` too),
    not those in functions nor under `if TYPE_CHECKING`."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    nodes = list(ast.parse(path.read_text(encoding="utf-8")).body)
    out = set()
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            nodes.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            nodes.extend(node.body + node.orelse + node.finalbody)
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            out |= {
                c for c in (base, *(f"{base}.{a.name}" for a in node.names)) if c in modules and c != name
            }
    return out


def test_core_imports_follow_the_layers():
    """Imports point down the layers of docs/architecture.md: `core/arch` knows nothing above it, the model
    layers never import the engine at all (see test_imports_only_point_down), and at import time no module
    reaches a layer listed after its own."""
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        if name.startswith("core"):
            own = _layer(name, CORE_LAYERS)
            ups = {d for d in _import_time_imports(name, path, modules) if _layer(d, CORE_LAYERS) > own}
            wrong += [f"{name} -> {d}" for d in sorted(ups)]
    assert not wrong, f"imports that point up the layers: {wrong}"


def test_studio_sub_packages_follow_their_order():
    """core/studio is split by concern (sources, runtime, compute, views, store, jobs, checks, engines) and each
    imports only those before it: the output store never reaches into a job, a view never into the store."""
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        if not name.startswith("core.studio."):
            continue
        own = STUDIO_LAYERS.index(name.split(".")[2])
        for dep in _imports(name, path, modules):
            if not dep.startswith("core.studio.") or modules[dep].name == "__init__.py":
                continue
            if STUDIO_LAYERS.index(dep.split(".")[2]) > own:
                wrong.append(f"{name} -> {dep}")
    assert not wrong, f"core/studio imports that point up its sub-packages: {wrong}"
    assert not [p.name for p in (REPO / "core" / "studio").glob("*.py")] or {
        p.name for p in (REPO / "core" / "studio").glob("*.py")
    } == {"__init__.py", "errors.py", "studio.py"}, (
        "core/studio's top holds only its API; modules go in a sub-package"
    )


def test_no_two_core_modules_share_a_name():
    """A name says what a module does, once: no two `boxes.py` or `temporal.py` in core/. A layer's own error
    module (`errors.py`, one subclass per layer) and package `__init__.py` files are the convention's exceptions."""
    seen: dict[str, list[str]] = {}
    for path in _core():
        if path.name not in ("__init__.py", "errors.py"):
            seen.setdefault(path.name, []).append(path.relative_to(REPO).as_posix())
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_tests_mirror_the_package_layout():
    """Unit tests sit in the mirror of the package they test (tests/core/studio/jobs/ for core/studio/jobs/);
    host integration tests are apart (tests/comfy: real ComfyUI servers, tests/blender: real bpy); only the
    checks of the whole repository (this file, the docs' examples) and shared helpers sit at the top."""
    hosts = {"comfy", "blender"}
    tests = REPO / "tests"
    for folder in sorted(p for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        rel = folder.relative_to(tests)
        if rel.parts[0] in hosts:
            continue
        assert (REPO / rel).is_dir(), f"tests/{rel.as_posix()} mirrors no package folder"
        assert list(folder.glob("test_*.py")) or any(folder.iterdir()), f"tests/{rel.as_posix()} is empty"
    top = {p.name for p in tests.glob("test_*.py")}
    assert top <= {"test_architecture.py", "test_docs_examples.py"}, (
        f"tests at the top that test one package: {top}"
    )


# ------------------------------------------------------------------ the "never" column of the layer table
def _all_imports(path: Path) -> set[str]:
    """Every module name an import statement in the file names (absolute), at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def test_model_layers_never_pick_a_device_or_dtype():
    """core/arch and core/checkpoints run on what they are given: no probing of the machine for a device or a
    dtype (the one `auto` rule is core/dtypes, devices are the engine's `runtime/execution`)."""
    for folder in ("core/arch", "core/checkpoints"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in ("is_available", "is_bf16_supported"):
                    raise AssertionError(f"{path.relative_to(REPO)}:{node.lineno} probes the machine")


def test_task_modules_never_import_the_engine_or_heavy_libraries_on_import():
    """core/tasks never imports core/studio or a front-end, and imports numpy/torch only inside methods: the
    CLI's parser reads the registry without them."""
    for path in sorted((REPO / "core" / "tasks").rglob("*.py")):
        assert not {
            m for m in _all_imports(path) if m.startswith(("sapiens2_studio.core.studio", "comfy", "bpy"))
        }
        assert not _top_level_imports_at_module_level(path) & {"numpy", "torch"}, path.name
        text = path.read_text(encoding="utf-8")
        assert "..studio" not in text and "...cli" not in text and "comfy_nodes" not in text, path.name


def _top_level_imports_at_module_level(path: Path) -> set[str]:
    """Top-level package names imported by statements that run on import (module body, `if TYPE_CHECKING` aside)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_pipeline_never_writes_files():
    """core/pipeline computes; files are written by core/formats (and the engine's output store)."""
    writers = {"write_bytes", "write_text", "save", "savez", "savez_compressed", "imwrite", "tofile", "dump"}
    for path in sorted((REPO / "core" / "pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                called = getattr(node.func, "attr", getattr(node.func, "id", ""))
                assert called not in writers, (
                    f"{path.relative_to(REPO)}:{node.lineno} writes a file ({called})"
                )
                if called == "open" and len(node.args) > 1:
                    mode = node.args[1]
                    assert not (isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+")), (
                        path.name
                    )


def test_formats_never_run_models_nor_look_at_imports():
    """core/formats is numpy only: no torch (it never runs a model) and no behaviour keyed on `sys.modules`
    (the fast float16 cast is handed in by the caller)."""
    for path in sorted((REPO / "core" / "formats").rglob("*.py")):
        assert not {m for m in _all_imports(path) if m.split(".")[0] == "torch"}, path.name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            assert not (
                isinstance(node, ast.Attribute)
                and node.attr == "modules"
                and getattr(node.value, "id", "") == "sys"
            ), path.name


def test_the_blender_addon_never_imports_the_engine():
    """The add-on ships alone: it reads bundles and, to predict, starts the installed CLI as a child process."""
    for path in sorted((REPO / "blender_addon").rglob("*.py")):
        if "wheels" in path.parts:
            continue
        imported = _all_imports(path)
        assert not {m for m in imported if m.split(".")[0] in ("sapiens2_studio", "torch")}, path
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                depth = len(path.relative_to(REPO / "blender_addon").parts) - 1
                assert node.level <= depth + 1, f"{path}: a relative import leaves the add-on"


def test_banded_maps_are_a_protocol_outside_their_maker():
    """Banded maps are a writer-side memory strategy: results and every consumer (writers, previews, tasks) know a
    huge map only by the protocol `core/formats/row_bands.RowBands`; the concrete class is named by the module
    that makes it alone, so no code keys behaviour on it."""
    naming = sorted(
        path.relative_to(REPO).as_posix()
        for path in _modules().values()
        if "BandedArray" in path.read_text(encoding="utf-8")
    )
    assert naming == ["core/pipeline/banded.py"], naming
