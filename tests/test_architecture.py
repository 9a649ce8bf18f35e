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
