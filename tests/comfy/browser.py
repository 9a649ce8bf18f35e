"""Load workflows in the real ComfyUI frontend (headless Chromium driven by Python Playwright) and report problems.

What counts as a problem: node types the frontend reports missing (its ``afterConfigureGraph`` list) or has not
registered, a dialog left open after loading (e.g. "Some Nodes Are Missing"), uncaught JS errors or console errors
while loading, and a graph that ``app.graphToPrompt()`` cannot turn into an API prompt containing every node.
Requests to other hosts (the frontend calls api.comfy.org) are ignored: test machines are usually offline.

Uses Debian's ``chromium`` (never ``playwright install``): set ``SAPIENS2_CHROMIUM`` to use another binary.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]  # fmt: skip
BLANK = {"last_node_id": 0, "last_link_id": 0, "nodes": [], "links": [], "groups": [], "config": {}, "extra": {},
         "version": 0.4}  # fmt: skip
# Before the app boots: restore an empty workflow (not the template browser a first visit would open).
INIT_SCRIPT = (
    "try { localStorage.setItem('workflow', " + json.dumps(json.dumps(BLANK)) + ");"
    " localStorage.setItem('Comfy.PreviousWorkflow', 'blank'); } catch (e) {}"
)
READY = """() => !!(window.app && app.graph && app.canvas && window.LiteGraph &&
  Object.keys(LiteGraph.registered_node_types || {}).length > 0)"""
HOOK = """() => {
  if (window.__s2) return;
  window.__s2 = {missing: null};
  app.registerExtension({name: 'sapiens2.test.capture',
    afterConfigureGraph(missing) { window.__s2.missing = JSON.parse(JSON.stringify(missing || [])); }});
}"""
LOAD = """async ({wf, name}) => {
  window.__s2.missing = null;
  try { await app.loadGraphData(wf, true, true, name); return null; }
  catch (e) { return String((e && e.stack) || e); }
}"""
INSPECT = """async () => {
  const reg = LiteGraph.registered_node_types;
  const nodes = app.graph.nodes.map((n) => ({id: n.id, type: n.type, mode: n.mode, registered: n.type in reg,
    virtual: !!n.isVirtualNode}));
  let prompt = null, promptError = null;
  try { prompt = (await app.graphToPrompt()).output; } catch (e) { promptError = String((e && e.stack) || e); }
  const dialogs = [...document.querySelectorAll('.p-dialog')].filter((d) => getComputedStyle(d).display !== 'none')
    .map((d) => (d.innerText || '').replace(/\\s+/g, ' ').slice(0, 400));
  // Frontends from 1.4x report load problems (missing models, nodes) in an overlay instead of a dialog.
  const overlay = (document.body.innerText.match(/\\d+ (errors?|issues?) found[^\\n]*/) || [null])[0];
  return {nodes, prompt, promptError, dialogs, overlay, missing: window.__s2.missing};
}"""
# What the frontend would save for each node: widget values and which inputs are sockets or widgets.
SERIALIZED = """() => {
  const saved = app.graph.serialize();
  return Object.fromEntries(app.graph.nodes.map((n) => {
    const s = saved.nodes.find((x) => String(x.id) === String(n.id)) || {};
    return [String(n.id), {type: n.type, widgets_values: s.widgets_values ?? null,
      widgets: (n.widgets || []).map((w) => w.name), inputs: (n.inputs || []).map((i) => i.name)}];
  }));
}"""
# The missing-model report the frontend shows: the 1.2x dialog, or the 1.4x+ "Missing Models" error group.
MISSING_MODELS = """() => {
  const group = document.querySelector('[data-testid="error-group-missing-model"]');
  const dialog = [...document.querySelectorAll('.p-dialog')].find((d) => /Missing Models/.test(d.innerText));
  const box = group || dialog;
  return box ? box.innerText : null;
}"""
REPORT_IN_PANEL = """() => !!document.querySelector('[data-testid="properties-panel"] [data-testid="error-group-missing-model"]')"""
SET_WIDGET = """({type, widget, value}) => {
  for (const n of app.graph.nodes) if (n.type === type)
    for (const w of n.widgets || []) if (w.name === widget) w.value = value;
}"""
QUEUE = "async () => { await app.queuePrompt(0, 1); }"
FIT = """() => {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const n of app.graph.nodes) { const b = n.boundingRect; x0 = Math.min(x0, b[0]); y0 = Math.min(y0, b[1]);
    x1 = Math.max(x1, b[0] + b[2]); y1 = Math.max(y1, b[1] + b[3]); }
  if (isFinite(x0)) app.canvas.ds.fitToBounds([x0 - 20, y0 - 20, x1 - x0 + 40, y1 - y0 + 40], {zoom: 0.95});
  app.canvas.setDirty(true, true);
}"""


def chromium_path(hint: str | None = None) -> str | None:
    """SAPIENS2_CHROMIUM, else the one the host manifest names, else Debian's on PATH."""
    for candidate in (os.environ.get("SAPIENS2_CHROMIUM"), hint):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class MissingModels:
    """What the frontend says is missing (its report's text, None if it reports nothing) and the URLs its
    Download buttons fetch, in button order."""

    text: str | None
    downloads: list[str]


@dataclass
class LoadReport:
    name: str
    problems: list[str] = field(default_factory=list)
    prompt_nodes: int = 0
    screenshot: Path | None = None


class Browser:
    """One headless Chromium for many pages (Playwright's sync API allows one instance per thread)."""

    def __init__(self, chromium: str) -> None:
        self.chromium = chromium

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(
            executable_path=self.chromium, headless=True, args=CHROMIUM_ARGS
        )
        return self

    def __exit__(self, *exc) -> None:
        self.browser.close()
        self._pw.stop()


class Frontend:
    """One headless browser page on a ComfyUI server: its own Chromium, or a page of a shared ``Browser``."""

    def __init__(self, url: str, chromium: str | Browser) -> None:
        self.url = url.rstrip("/")
        self.origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(self.url))
        self._shared = chromium if isinstance(chromium, Browser) else None
        self.chromium = None if self._shared else chromium
        self.events: list[tuple[str, str]] = []
        self.downloads: list[str] = []

    def __enter__(self) -> Frontend:
        self._own = None if self._shared else Browser(self.chromium).__enter__()
        browser = (self._shared or self._own).browser
        self._context = browser.new_context(viewport={"width": 2400, "height": 1500}, accept_downloads=True)
        self.page = self._context.new_page()
        self.page.add_init_script(INIT_SCRIPT)
        # Test machines are offline: answer other hosts locally (the model dialog asks huggingface.co for file
        # sizes with HEAD), and record the downloads the page starts.
        # A Download button may open a popup that downloads: route and watch every page of the context.
        self._context.route(lambda url: not url.startswith(self.origin), self._answer_elsewhere)
        self._context.on("page", lambda p: p.on("download", lambda d: self.downloads.append(d.url)))
        self.page.on("download", lambda d: self.downloads.append(d.url))
        self.page.on("pageerror", lambda e: self.events.append(("pageerror", str(e))))
        self.page.on("console", self._console)
        self.page.goto(self.url + "/", wait_until="domcontentloaded", timeout=120_000)
        self.page.wait_for_function(READY, timeout=120_000)
        self.page.evaluate(HOOK)
        self.page.wait_for_timeout(1000)  # let start-up toasts and the restored blank workflow settle
        self.events.clear()
        return self

    def __exit__(self, *exc) -> None:
        self._context.close()
        if self._own is not None:
            self._own.__exit__(*exc)

    @staticmethod
    def _answer_elsewhere(route) -> None:
        if route.request.url.startswith(("http://", "https://")):
            route.fulfill(status=200, headers={"content-length": "1024", "content-type": "application/octet-stream"},
                          body=b"offline test stand-in")  # fmt: skip
        else:
            route.continue_()

    def _console(self, message) -> None:
        if message.type == "error":
            location = (message.location or {}).get("url", "")
            self.events.append(("console.error", f"{message.text} [{location}]"))

    def _local_problems(self) -> list[str]:
        problems = []
        for kind, text in self.events:
            if "Failed to fetch" in text or "Failed to load resource" in text:
                continue  # offline calls to other hosts; local HTTP failures surface as broken nodes instead
            if kind == "console.error" and self.origin not in text and "http" in text:
                continue  # an error reported by a script of another origin (network, telemetry)
            if "Content Security Policy" in text and "connect-src" in text:
                continue  # newer backends forbid the page to reach other hosts (file-size probes): offline-like
            problems.append(f"{kind}: {' '.join(text.split())[:300]}")
        return problems

    def load(self, workflow: dict, name: str) -> LoadReport:
        """Load a UI workflow through the frontend's own loader and check the result."""
        report = LoadReport(name)
        self.page.keyboard.press("Escape")  # close whatever a previous run left open
        self.events.clear()
        error = self.page.evaluate(LOAD, {"wf": workflow, "name": name})
        if error:
            report.problems.append(f"app.loadGraphData failed: {error[:300]}")
        self.page.wait_for_timeout(500)
        info = self.page.evaluate(INSPECT)
        for missing in info["missing"] or []:
            report.problems.append(
                f"missing node type: {missing.get('type') if isinstance(missing, dict) else missing}"
            )
        for node in info["nodes"]:
            if not node["registered"]:
                report.problems.append(
                    f"node #{node['id']} type {node['type']} is not registered in the frontend"
                )
        report.problems += [f"dialog open after loading: {text}" for text in info["dialogs"]]
        if info["overlay"]:
            report.problems.append(f"error overlay after loading: {info['overlay']}")
        if info["promptError"]:
            report.problems.append(f"app.graphToPrompt() failed: {info['promptError'][:300]}")
        else:
            prompt = info["prompt"] or {}
            report.prompt_nodes = len(prompt)
            for node in info["nodes"]:
                if not node["virtual"] and node["mode"] == 0 and str(node["id"]) not in prompt:
                    report.problems.append(
                        f"node #{node['id']} {node['type']} is missing from the API prompt"
                    )
        report.problems += self._local_problems()
        return report

    def serialized(self) -> dict[str, dict]:
        """Per node id: the widget values the frontend would save, its widget names and its input names."""
        return self.page.evaluate(SERIALIZED)

    def missing_models(self, workflow: dict, name: str) -> MissingModels:
        """Load ``workflow`` and read the frontend's missing-model report; click each file's Download and
        record what the browser starts to download (requests to other hosts are answered locally). Loads a
        second time if the first report was swallowed (see ``_close_missing_models``)."""
        for _attempt in range(2):
            self._close_missing_models()
            self.downloads.clear()
            error = self.page.evaluate(LOAD, {"wf": workflow, "name": name})
            if error:
                raise AssertionError(f"app.loadGraphData failed: {error[:300]}")
            if self._wait_for_missing_models():
                break
        else:
            return MissingModels(None, [])
        text = self.page.evaluate(MISSING_MODELS)
        buttons = self.page.locator(
            '[data-testid="error-group-missing-model"] button, .p-dialog button', has_text="Download"
        ).filter(has_not_text="all")
        for i in range(buttons.count()):
            before = len(self.downloads)
            buttons.nth(i).click()
            deadline = time.time() + 10
            while len(self.downloads) == before and time.time() < deadline:
                self.page.wait_for_timeout(100)
        self._close_missing_models()
        return MissingModels(text, list(self.downloads))

    def _wait_for_missing_models(self) -> bool:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        shown = f"() => !!({MISSING_MODELS})() || document.body.innerText.includes('View details')"
        try:
            self.page.wait_for_function(shown, timeout=30_000)
            if not self.page.evaluate(MISSING_MODELS):  # 1.4x+: a toast opens the report in a side panel
                self.page.get_by_text("View details").first.click()
                self.page.wait_for_function(f"() => !!({MISSING_MODELS})()", timeout=10_000)
        except PlaywrightTimeout:
            return False
        return True

    def _close_missing_models(self) -> None:
        """Close whatever dialog is open (a start-up one would hide the report) and wait until no report is left:
        a report still closing when the next workflow loads swallows that workflow's report (the frontend reuses
        the dialog), which made the check flaky on CI."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        self.page.keyboard.press("Escape")
        for _ in range(3):
            if not self.page.evaluate(MISSING_MODELS):
                break
            if self.page.evaluate(REPORT_IN_PANEL):
                # 1.4x+: the report is the errors tab of the properties panel, which Escape leaves open (each
                # close used to wait out 3 x 5 s, ~30 s a test on CI): close the panel itself.
                self.page.get_by_role("button", name="Toggle properties panel").first.click()
            else:
                self.page.keyboard.press("Escape")
            try:
                self.page.wait_for_function(f"() => !({MISSING_MODELS})()", timeout=5_000)
            except PlaywrightTimeout:
                continue
        self.page.wait_for_timeout(300)  # let the dialog's leave transition finish

    def set_widget(self, node_type: str, widget: str, value) -> None:
        self.page.evaluate(SET_WIDGET, {"type": node_type, "widget": widget, "value": value})

    def queue_and_wait(self, client, timeout: float = 300.0) -> dict:
        """Queue through the frontend's own Run path, then wait for the newest history entry."""
        before = set(client.get("/history"))
        self.page.evaluate(QUEUE)
        deadline = time.time() + timeout
        while time.time() < deadline:
            new = [k for k in client.get("/history") if k not in before]
            if new:
                return client.wait(new[0], timeout=max(1.0, deadline - time.time()))
            time.sleep(0.3)
        raise TimeoutError("the frontend did not queue the workflow")

    def screenshot(self, path: Path) -> Path:
        self.page.evaluate(FIT)
        self.page.wait_for_timeout(400)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path))
        return path
