"""Where the Sapiens2 engine is: a ``sapiens2`` executable, a Python with the package, or a virtual environment's
folder; found on PATH and in the usual places when the preferences name none. No ``bpy`` here."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ENGINE_ENV = "SAPIENS2_ENGINE"  # overrides the preferences (farm jobs, tests)
EXE = "sapiens2.exe" if sys.platform == "win32" else "sapiens2"
BIN = "Scripts" if sys.platform == "win32" else "bin"
PYTHON = "python.exe" if sys.platform == "win32" else "python"
# Inherited from Blender or its bpy venv, these would make the engine's Python import the wrong packages.
_DROPPED_ENV = ("PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONEXECUTABLE", "__PYVENV_LAUNCHER__")


@dataclass(frozen=True)
class Engine:
    """How to start the CLI: `argv` is the command up to (not including) its sub-command."""

    argv: tuple[str, ...]
    origin: str  # where it was found, for the preferences ("preferences", "PATH", "~/.venvs/…", …)

    def command(self, *args: str) -> list[str]:
        return [*self.argv, *args]


def engine_argv(path: str | os.PathLike) -> tuple[str, ...] | None:
    """The command for a configured path: an executable named like ``sapiens2`` runs as it is, a Python runs
    ``-m sapiens2_studio.cli``, a folder is a virtual environment (its ``sapiens2``, else its Python)."""
    p = Path(os.path.expanduser(os.fspath(path)))
    if p.is_dir():
        for candidate in (p / BIN / EXE, p / EXE, p / BIN / PYTHON):
            if candidate.is_file():
                return engine_argv(candidate)
        return None
    if not p.is_file():
        found = shutil.which(os.fspath(path))
        if not found:
            return None
        p = Path(found)
    if p.name.lower().startswith("python"):
        return (str(p), "-m", "sapiens2_studio.cli")
    return (str(p),)


def usual_places(home: Path | None = None) -> list[Path]:
    """Folders a user's install usually lands in (pip --user, pipx, venvs and conda envs in the home folder)."""
    home = home or Path.home()
    places = [home / ".local" / BIN, home / ".local" / "pipx" / "venvs" / "sapiens2-studio" / BIN]
    for root in (home / ".venvs", home / "venvs", home / ".virtualenvs", home / "miniconda3" / "envs",
                 home / "anaconda3" / "envs", home / "miniforge3" / "envs", home / "mambaforge" / "envs"):  # fmt: skip
        if root.is_dir():
            places += [
                env / BIN if sys.platform != "win32" else env / "Scripts" for env in sorted(root.iterdir())
            ]
    for venv in ("sapiens2", "sapiens2-studio", ".venv", "venv"):
        places.append(home / venv / BIN)
    return places


def candidates(configured: str = "", environ: dict | None = None) -> list[Engine]:
    """Every engine found, best first: the environment variable, the preferences' path, PATH, the usual places."""
    env = os.environ if environ is None else environ
    found: list[Engine] = []
    seen: set[tuple[str, ...]] = set()

    def add(path: str | os.PathLike | None, origin: str) -> None:
        argv = engine_argv(path) if path else None
        if argv and argv not in seen:
            seen.add(argv)
            found.append(Engine(argv, origin))

    add(env.get(ENGINE_ENV), ENGINE_ENV)
    add(configured, "preferences")
    add(shutil.which("sapiens2", path=env.get("PATH")), "PATH")
    for folder in usual_places():
        if (folder / EXE).is_file():
            add(folder / EXE, str(folder))
    return found


def find_engine(configured: str = "", environ: dict | None = None) -> Engine | None:
    found = candidates(configured, environ)
    return found[0] if found else None


def child_environment(base: dict | None = None) -> dict[str, str]:
    """The engine's environment: Blender's, without the Python variables that would mislead another Python, with
    unbuffered UTF-8 output (events arrive as they happen)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _DROPPED_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONIOENCODING"] = "utf-8"
    return env
