"""Fixtures for the real-ComfyUI tests: every test that needs a server runs once per host of the matrix.

The hosts (ComfyUI 0.3.64 and 0.33.0 with their pinned frontends, the newest registry frontend, the
comfyui_controlnet_aux pack) come from ``hosts.py``; tests that take ``frontend`` run once per frontend of each
backend (``frontend-pinned``, then ``frontend-<newest version>``).  Without hosts the tests skip with the reason, or fail where CI requires them (``SAPIENS2_REQUIRE_HOSTS``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TEST_PACKS = HERE / "packs"  # test-only node packs (e.g. a BOUNDING_BOXES source no core node offers)


def _load(name: str):
    """Load a helper module of this folder by path (tests are not a package; no sys.path edits)."""
    key = f"sapiens2_comfy_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


harness = _load("harness")
workflow_builder = _load("workflow_builder")
hosts = _load("hosts")
consumers = _load("consumers")  # for the interop tests: sys.modules["sapiens2_comfy_consumers"]
MATRIX = hosts.load_matrix()


def unavailable(reason: str) -> None:
    """Skip with the reason, or fail in CI, where a skipped host would hide a whole row of the matrix."""
    if hosts.required():
        pytest.fail(f"required host missing: {reason}")
    pytest.skip(reason)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``comfy_host`` per host; ``frontend`` per frontend kind of that host: its pinned build, then the newest.

    Two separate parametrisations (not one of pairs), so every test of a host shares one host parameter and
    pytest keeps that host's server up across all of them."""
    names = metafunc.fixturenames
    if "comfy_host" in names:
        found = list(MATRIX.hosts) or [None]
        ids = [h.id if h else "no-host" for h in found]
        metafunc.parametrize("comfy_host", found, ids=ids, indirect=True, scope="session")
    if "frontend" in names:
        others = [f for f in (MATRIX.hosts[0].frontends if MATRIX.hosts else ()) if not f.pinned]
        ids = ["frontend-pinned", *(f"frontend-{f.version}" for f in others)]
        metafunc.parametrize("frontend", range(len(ids)), ids=ids, indirect=True, scope="session")


@pytest.fixture(scope="session")
def comfy_host(request):
    if request.param is None:
        unavailable(MATRIX.reason)
    return request.param


@pytest.fixture(scope="session")
def frontend(request, comfy_host):
    """The frontend build of this test: the host's pinned one (kind 0) or a registry build served with it."""
    if request.param >= len(comfy_host.frontends):
        unavailable(f"{comfy_host.id} has no frontend #{request.param}")
    return comfy_host.frontends[request.param]


@pytest.fixture(scope="session")
def comfy_harness():
    return harness


@pytest.fixture(scope="session")
def builder():
    return workflow_builder


@pytest.fixture(scope="session")
def matrix():
    return MATRIX


def start_server(host, root: Path, *, checkpoints: bool = True, front_end_root=None, packs=()) -> object:
    """A running ComfyUI of ``host`` under ``root``: models (tiny checkpoints unless ``checkpoints`` is False,
    i.e. a fresh install), the example picture uploaded."""
    models = root / "models"
    if checkpoints:
        harness.write_models(models)
    else:
        (models / "sapiens2").mkdir(parents=True, exist_ok=True)
    server = harness.ComfyServer(
        host.checkout, host.python, root / "base", harness.free_port(), front_end_root, tuple(packs)
    )
    server.start(models)
    try:
        client = harness.Client(server.url)
        client.upload_image(harness.write_example_image(root / "example.png"), harness.EXAMPLE_IMAGE)
        client.upload_image(harness.write_example_video(root / "example.mp4"), harness.EXAMPLE_VIDEO)
    except Exception:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def comfy_server(comfy_host, tmp_path_factory):
    """ComfyUI (CPU, pinned frontend) with this pack, comfyui_controlnet_aux where the host has it set up, the
    test box source, tiny checkpoints in models/sapiens2 and the example picture; one per host for the session."""
    packs = [TEST_PACKS / "s2test_box_source"]
    if comfy_host.controlnet_aux:
        packs.append(comfy_host.controlnet_aux)
    server = start_server(comfy_host, tmp_path_factory.mktemp(comfy_host.id), packs=packs)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def client(comfy_server):
    return harness.Client(comfy_server.url)


@pytest.fixture(scope="session")
def object_info(client):
    return client.get("/object_info")


@pytest.fixture(scope="session")
def aux_server(comfy_host, comfy_server, object_info):
    """The host's server with both packs: this one and comfyui_controlnet_aux, its POSE_KEYPOINT nodes loaded.

    For interop tests: ``aux_server.url``, or the ``client`` / ``object_info`` fixtures of the same host."""
    if comfy_host.controlnet_aux is None:
        unavailable(f"{comfy_host.id} has no comfyui_controlnet_aux set up (see docs/testing.md)")
    pack = comfy_host.controlnet_aux.name
    assert comfy_server.import_failures(pack) == [], comfy_server.log()[-3000:]
    assert "RenderPeopleKps" in object_info, f"{pack} loaded without its POSE_KEYPOINT nodes"
    return comfy_server


@pytest.fixture(scope="session")
def ui_server(request, comfy_host, frontend, tmp_path_factory):
    """The server the browser tests drive: the host's own (pinned frontend), or one serving another frontend
    build with ``--front-end-root`` (e.g. the newest on the registry against an older backend)."""
    if frontend.pinned:
        yield request.getfixturevalue("comfy_server")
        return
    root = tmp_path_factory.mktemp(f"{comfy_host.id}-frontend-{frontend.version}")
    server = start_server(comfy_host, root, front_end_root=frontend.root)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def fresh_server(comfy_host, frontend, tmp_path_factory):
    """A fresh install: this pack, no checkpoints at all, serving ``frontend`` (what someone who was sent a
    workflow has before fetching any model)."""
    root = tmp_path_factory.mktemp(f"{comfy_host.id}-fresh-{frontend.version}")
    server = start_server(comfy_host, root, checkpoints=False, front_end_root=frontend.root)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser_module():
    return _load("browser")


@pytest.fixture(scope="session")
def chromium_binary(browser_module) -> str:
    """The Chromium executable (Debian's, or SAPIENS2_CHROMIUM) for tests that drive it themselves, or skip/fail."""
    found = browser_module.chromium_path(MATRIX.chromium)
    if found is None:
        unavailable("no Chromium binary (Debian: apt-get install chromium, or set SAPIENS2_CHROMIUM)")
    return found


@pytest.fixture(scope="session")
def controlnet_aux(comfy_host) -> Path:
    """The host's comfyui_controlnet_aux checkout, its requirements importable in the host's Python."""
    if comfy_host.controlnet_aux is None:
        unavailable(f"{comfy_host.id} has no comfyui_controlnet_aux set up (see docs/testing.md)")
    consumers = _load("consumers")
    missing = consumers.missing_requirements(comfy_host.python)
    if missing:
        unavailable(f"{comfy_host.id}'s Python lacks controlnet_aux's requirements {missing}")
    return comfy_host.controlnet_aux


@pytest.fixture(scope="session")
def chromium(browser_module):
    """One headless Chromium (Debian's, or SAPIENS2_CHROMIUM) driven by Python playwright for every page of the
    session, or skip/fail with how to get them."""
    if importlib.util.find_spec("playwright") is None:
        unavailable("Python playwright is not installed (pip install playwright; never 'playwright install')")
    found = browser_module.chromium_path(MATRIX.chromium)
    if found is None:
        unavailable("no Chromium binary (Debian: apt-get install chromium, or set SAPIENS2_CHROMIUM)")
    with browser_module.Browser(found) as browser:
        yield browser
