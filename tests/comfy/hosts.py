"""The ComfyUI host matrix the integration tests run on: which backends, which frontends, which third-party packs.

``scripts/ci_matrix.py`` sets the hosts up from ``../shared/hosts`` (source snapshots of ComfyUI and
comfyui_controlnet_aux) and the package registries into ``.hosts/`` and describes them in ``.hosts/hosts.json``;
this module reads that file, so a plain ``pytest tests/comfy`` runs every test on every host listed there.

- ``SAPIENS2_HOSTS_FILE``: another manifest (default ``<repo>/.hosts/hosts.json``).
- ``SAPIENS2_COMFY_HOSTS=0.33.0``: only these backend versions (comma-separated; CI runs one leg per backend).
- ``COMFYUI_PATH`` (+ ``COMFYUI_PYTHON``): one checkout of your own instead of the manifest, pinned frontend only.
- ``SAPIENS2_REQUIRE_HOSTS=1`` (CI): a missing host, browser or pack fails the tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MANIFEST = REPO / ".hosts" / "hosts.json"
PINNED = "pinned"  # a frontend served from the backend's own comfyui-frontend-package (no --front-end-root)


@dataclass(frozen=True)
class Frontend:
    """One ComfyUI frontend build: the backend's pinned package (``root`` None) or a registry build served
    with ``--front-end-root``."""

    version: str
    root: Path | None = None

    @property
    def pinned(self) -> bool:
        return self.root is None


@dataclass(frozen=True)
class ComfyHost:
    """One ComfyUI backend (checkout + venv) with the frontends the tests drive it with."""

    version: str
    checkout: Path
    python: Path
    frontends: tuple[Frontend, ...] = ()
    controlnet_aux: Path | None = None  # the comfyui_controlnet_aux pack, set up in this host's venv
    aux_version: str = ""

    @property
    def id(self) -> str:
        return f"comfyui-{self.version}"

    def older_than(self, version: str) -> bool:
        """Whether this backend predates ``version`` (a checkout of unknown version counts as the newest)."""
        mine = re.findall(r"\d+", self.version)
        return bool(mine) and tuple(map(int, mine)) < tuple(map(int, re.findall(r"\d+", version)))

    @property
    def pinned_frontend(self) -> Frontend:
        return next((f for f in self.frontends if f.pinned), Frontend("unknown"))


@dataclass(frozen=True)
class Matrix:
    """Everything the manifest says, or why there is nothing to run on."""

    hosts: tuple[ComfyHost, ...] = ()
    chromium: str | None = None
    reason: str = ""  # why ``hosts`` is empty
    source: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)


def required() -> bool:
    """CI mode: hosts must be there (a skip would hide a whole host)."""
    return os.environ.get("SAPIENS2_REQUIRE_HOSTS", "") not in ("", "0")


def _version_of_checkout(checkout: Path) -> str:
    text = (checkout / "comfyui_version.py").read_text(encoding="utf-8") if checkout.is_dir() else ""
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return found.group(1) if found else "custom"


def _from_env_checkout() -> Matrix | None:
    path = os.environ.get("COMFYUI_PATH")
    if not path:
        return None
    checkout = Path(path)
    python = Path(os.environ.get("COMFYUI_PYTHON") or f"{path}-venv/bin/python")
    if not (checkout / "main.py").is_file():
        return Matrix(reason=f"COMFYUI_PATH={path} has no main.py", source="COMFYUI_PATH")
    if not python.is_file():
        return Matrix(reason=f"COMFYUI_PYTHON={python} does not exist", source="COMFYUI_PATH")
    host = ComfyHost(_version_of_checkout(checkout), checkout, python, (Frontend(PINNED),))
    return Matrix((host,), source="COMFYUI_PATH")


def _host_from_entry(entry: dict, frontends: dict[str, str], aux: dict | None) -> ComfyHost:
    served = [Frontend(entry.get("frontend", PINNED))]
    served += [Frontend(v, Path(root)) for v, root in frontends.items() if v != served[0].version]
    return ComfyHost(
        version=entry["version"],
        checkout=Path(entry["path"]),
        python=Path(entry["python"]),
        frontends=tuple(served),
        controlnet_aux=Path(aux["path"]) if aux else None,
        aux_version=aux.get("version", "") if aux else "",
    )


def load_matrix() -> Matrix:
    """The hosts to test on (narrowed by ``SAPIENS2_COMFY_HOSTS``), or the reason there are none."""
    env = _from_env_checkout()
    if env is not None:
        return env
    manifest = Path(os.environ.get("SAPIENS2_HOSTS_FILE") or DEFAULT_MANIFEST)
    if not manifest.is_file():
        return Matrix(
            reason=f"no ComfyUI hosts: {manifest} is missing (run `bash scripts/test.sh`, which sets them up "
            "from ../shared/hosts, or set COMFYUI_PATH; see docs/testing.md)"
        )
    data = json.loads(manifest.read_text(encoding="utf-8"))
    hosts = [
        _host_from_entry(e, data.get("frontends", {}), data.get("controlnet_aux")) for e in data["comfyui"]
    ]
    wanted = [v.strip() for v in os.environ.get("SAPIENS2_COMFY_HOSTS", "").split(",") if v.strip()]
    if wanted:
        unknown = sorted(set(wanted) - {h.version for h in hosts})
        if unknown:
            return Matrix(reason=f"SAPIENS2_COMFY_HOSTS asks for {unknown}, {manifest} has none of them")
        hosts = [h for h in hosts if h.version in wanted]
    for host in hosts:
        if not host.python.is_file() or not (host.checkout / "main.py").is_file():
            return Matrix(reason=f"{host.id} in {manifest} is incomplete ({host.checkout}, {host.python})")
    return Matrix(tuple(hosts), chromium=data.get("chromium"), source=str(manifest), extra=data)
