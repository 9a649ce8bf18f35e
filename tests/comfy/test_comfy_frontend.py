"""The shipped UI workflows in the real ComfyUI frontend (headless Chromium + Python Playwright).

Each workflow is loaded with the frontend's own loader and must show no missing node types, no dialog, no JS
error, and convert to an API prompt holding every node; it is then queued through the frontend's Run path and a
screenshot is kept.  Set SAPIENS2_UPDATE_DOC_IMAGES=1 to refresh docs/images/workflow_*.png and the template
thumbnails workflows/*.jpg from these screenshots.  Skips without ComfyUI, Chromium or playwright.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.comfyui
REPO = Path(__file__).resolve().parents[2]
WORKFLOW_NAMES = sorted(p.stem for p in (REPO / "workflows").glob("*.json"))


def _browser_module():
    spec = importlib.util.spec_from_file_location(
        "sapiens2_comfy_browser", Path(__file__).with_name("browser.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def frontend(comfy_server):
    if importlib.util.find_spec("playwright") is None:
        pytest.skip("Python playwright is not installed (pip install playwright; never 'playwright install')")
    browser = _browser_module()
    chromium = browser.chromium_path()
    if chromium is None:
        pytest.skip("no Chromium binary (Debian: apt-get install chromium, or set SAPIENS2_CHROMIUM)")
    with browser.Frontend(comfy_server.url, chromium) as page:
        yield page


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_workflow_loads_cleanly_and_runs_in_the_real_frontend(
    name, frontend, client, comfy_harness, tmp_path
):
    workflow = comfy_harness.load_json(REPO / "workflows" / f"{name}.json")
    report = frontend.load(workflow, f"{name}.json")
    assert report.problems == [], "\n".join(report.problems)
    executed = [
        n for n in workflow["nodes"] if n["type"] not in ("Note", "MarkdownNote")
    ]  # notes are UI-only
    assert report.prompt_nodes == len(executed)
    frontend.set_widget("Sapiens2ExportMesh", "max_edge_ratio", 10.0)  # synthetic weights: noisy depth
    entry = frontend.queue_and_wait(client)
    error = comfy_harness.execution_error(entry)
    assert error is None, f"{error['node_type']}: {error['exception_message']}" if error else ""
    frontend.page.wait_for_timeout(1500)  # let the output previews render
    shot = frontend.screenshot(tmp_path / f"workflow_{name}.png")
    assert shot.stat().st_size > 10_000
    if os.environ.get("SAPIENS2_UPDATE_DOC_IMAGES"):
        from PIL import Image

        docs = REPO / "docs" / "images"
        docs.mkdir(parents=True, exist_ok=True)
        with Image.open(shot) as im:
            im.convert("RGB").save(docs / f"workflow_{name}.png", optimize=True)
            thumb = im.convert("RGB")
            thumb.thumbnail((800, 500))
            thumb.save(REPO / "workflows" / f"{name}.jpg", quality=85)
