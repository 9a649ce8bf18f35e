"""The shipped UI workflows in the real ComfyUI frontend (headless Chromium + Python Playwright).

Runs once per (backend, frontend) pair of the matrix: each backend with its pinned frontend, and with the newest
frontend on the registry.  Each workflow is loaded with the frontend's own loader and must show no missing node
types, no dialog or error overlay, no JS error, keep every saved widget value in its place (a socket the
frontend turned into a widget would shift them), and convert to an API prompt holding every node; it is then
queued through the frontend's Run path and a screenshot is kept.  On a fresh install with no checkpoints the
frontend must name each loader's official file and download it from its official URL.

Set SAPIENS2_UPDATE_DOC_IMAGES=1 to refresh docs/images/workflow_*.png and the template thumbnails
workflows/*.jpg from the screenshots (of the first pair).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.comfyui
REPO = Path(__file__).resolve().parents[2]
WORKFLOW_NAMES = sorted(p.stem for p in (REPO / "workflows").glob("*.json"))
UI_ONLY = ("Note", "MarkdownNote")


@pytest.fixture(scope="session")
def page(ui_server, chromium, browser_module):
    """One browser page on the server of this (backend, frontend) pair."""
    with browser_module.Frontend(ui_server.url, chromium) as frontend_page:
        yield frontend_page


@pytest.fixture(scope="session")
def fresh_page(fresh_server, chromium, browser_module):
    with browser_module.Frontend(fresh_server.url, chromium) as frontend_page:
        yield frontend_page


def _executed(workflow: dict) -> list[dict]:
    return [n for n in workflow["nodes"] if n["type"] not in UI_ONLY]  # notes are UI-only


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_workflow_loads_cleanly_and_runs_in_the_real_frontend(
    name, frontend, page, ui_server, comfy_harness, tmp_path
):
    client = comfy_harness.Client(ui_server.url)
    workflow = comfy_harness.load_json(REPO / "workflows" / f"{name}.json")
    report = page.load(workflow, f"{name}.json")
    assert report.problems == [], "\n".join(report.problems)
    assert report.prompt_nodes == len(_executed(workflow))
    page.set_widget("Sapiens2ExportMesh", "max_edge_ratio", 10.0)  # synthetic weights: noisy depth
    entry = page.queue_and_wait(client)
    error = comfy_harness.execution_error(entry)
    assert error is None, f"{error['node_type']}: {error['exception_message']}" if error else ""
    page.page.wait_for_timeout(1500)  # let the output previews render
    shot = page.screenshot(tmp_path / f"workflow_{name}.png")
    assert shot.stat().st_size > 10_000
    if os.environ.get("SAPIENS2_UPDATE_DOC_IMAGES") and frontend.pinned:
        _update_doc_images(name, shot)


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_saved_widget_values_stay_in_place_and_sockets_stay_sockets(name, page, comfy_harness):
    """What the frontend would save again equals the file: no input became a widget (which inserts a value
    and shifts the rest), and the Pose node's ``bboxes`` is a socket, never the BoundingBox widget."""
    workflow = comfy_harness.load_json(REPO / "workflows" / f"{name}.json")
    report = page.load(workflow, f"{name}.json")
    assert report.problems == [], "\n".join(report.problems)
    saved = page.serialized()
    for node in _executed(workflow):
        now = saved[str(node["id"])]
        values = now["widgets_values"] if now["widgets_values"] is not None else []  # no widgets: omitted
        # a newer core may append a widget to its own node (0.33.0's CreateVideo: bit_depth), filled with its
        # default: nothing shifts; this pack's nodes must match exactly
        expected = node["widgets_values"]
        if not node["type"].startswith("Sapiens2"):
            values = values[: len(expected)]
        assert values == expected, (node["type"], now["widgets"])
        sockets = {i["name"] for i in node["inputs"] if "widget" not in i}
        assert not sockets & set(now["widgets"]), (node["type"], sockets & set(now["widgets"]))
        if node["type"] == "Sapiens2Pose":
            assert "bboxes" in now["inputs"] and "bboxes" not in now["widgets"], now


@pytest.mark.parametrize("name", WORKFLOW_NAMES)
def test_a_fresh_install_is_told_which_models_to_fetch_and_from_where(name, fresh_page, comfy_harness):
    """No checkpoints yet: the frontend lists each loader's official file in the sapiens2 folder (from the
    nodes' ``properties.models``) and its Download buttons fetch exactly the official URLs."""
    workflow = comfy_harness.load_json(REPO / "workflows" / f"{name}.json")
    models = {m["name"]: m for n in workflow["nodes"] for m in n.get("properties", {}).get("models", [])}
    assert models, "the workflow names no models"
    report = fresh_page.missing_models(workflow, f"{name}.json")
    assert report.text is not None, "the frontend did not report the missing models"
    for file_name, model in models.items():
        assert file_name in report.text and model["directory"] in report.text, report.text
    assert sorted(report.downloads) == sorted(m["url"] for m in models.values()), report.downloads


def _update_doc_images(name: str, shot: Path) -> None:
    from PIL import Image

    docs = REPO / "docs" / "images"
    docs.mkdir(parents=True, exist_ok=True)
    with Image.open(shot) as im:
        im.convert("RGB").save(docs / f"workflow_{name}.png", optimize=True)
        thumb = im.convert("RGB")
        thumb.thumbnail((800, 500))
        thumb.save(REPO / "workflows" / f"{name}.jpg", quality=85)
