"""Third-party POSE_KEYPOINT consumers for the interop tests: where comfyui_controlnet_aux is, and how to run it.

comfyui_controlnet_aux comes from its source snapshot (shared/hosts/comfyui_controlnet_aux-*.tar.gz, unpacked into
the ignored `.hosts/` of the checkout) or from ``CONTROLNET_AUX_PATH``; its requirements (opencv, scikit-image,
matplotlib, einops, …) must be installed in ComfyUI's Python. Everything that runs its code runs in that Python,
in a subprocess (consumer_check.py) or in a ComfyUI server with the pack linked next to this one.
"""

from __future__ import annotations

import base64
import json
import os
import re
import select
import subprocess
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
AUX_LINK_NAME = "comfyui_controlnet_aux"
# What controlnet_aux's pose post-processing and its renderer import (its requirements.txt, in part).
AUX_MODULES = ("cv2", "einops", "matplotlib", "skimage", "scipy", "huggingface_hub")


def controlnet_aux_path() -> Path | str:
    """The controlnet_aux checkout, or the reason the tests that need it must skip."""
    candidates: list[Path] = []
    if os.environ.get("CONTROLNET_AUX_PATH"):
        candidates.append(Path(os.environ["CONTROLNET_AUX_PATH"]))
    hosts = REPO / ".hosts" / "hosts.json"
    if hosts.is_file():  # the CI host matrix lists the unpacked snapshot
        entry = json.loads(hosts.read_text(encoding="utf-8")).get("controlnet_aux") or {}
        if entry.get("path"):
            candidates.append(Path(entry["path"]))
    candidates += sorted((REPO / ".hosts").glob("comfyui_controlnet_aux-*"), reverse=True)
    for path in candidates:
        if (path / "node_wrappers" / "pose_keypoint_postprocess.py").is_file():
            return path
    return (
        "comfyui_controlnet_aux not found: unpack shared/hosts/comfyui_controlnet_aux-*.tar.gz into .hosts/ "
        "or set CONTROLNET_AUX_PATH"
    )


def missing_requirements(python: Path) -> list[str]:
    """controlnet_aux's modules that ComfyUI's Python cannot import."""
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    run = subprocess.run(
        [str(python), "-c", probe, *AUX_MODULES], capture_output=True, text=True, timeout=120
    )
    return run.stdout.split()


def run_consumers(
    checkout: Path, python: Path, aux: Path, cases: dict[str, list[dict]], work: Path
) -> tuple[dict, dict[str, np.ndarray]]:
    """Run consumer_check.py on `cases` (name → POSE_KEYPOINT): (its report, its images by name)."""
    work.mkdir(parents=True, exist_ok=True)
    cases_path = work / "cases.json"
    cases_path.write_text(json.dumps(cases), encoding="utf-8")
    run = subprocess.run(
        [str(python), str(HERE / "consumer_check.py"), str(checkout), str(aux), str(cases_path), str(work)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if run.returncode != 0:
        raise AssertionError(f"consumer_check.py failed:\n{run.stderr[-4000:]}")
    report = json.loads(run.stdout.strip().splitlines()[-1])
    with np.load(work / "images.npz") as data:
        images = {name: data[name] for name in data.files}
    return report, images


def drawn(image: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels a renderer drew on its black canvas."""
    return np.asarray(image).reshape(*np.shape(image)[:2], -1).any(axis=-1)


def agreement(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float]:
    """IoU of the drawn pixels, mean absolute colour difference (0-255) where both drew, exact-pixel share."""
    a, b = drawn(ours), drawn(theirs)
    union, both = a | b, a & b
    colour = np.abs(ours[both].astype(np.int64) - theirs[both].astype(np.int64)).mean() if both.any() else 0.0
    return {
        "iou": float(both.sum() / max(int(union.sum()), 1)),
        "colour_error": float(colour),
        "exact": float(np.all(ours == theirs, axis=-1)[union].mean()) if union.any() else 1.0,
        "ours_pixels": int(a.sum()),
        "their_pixels": int(b.sum()),
    }


# ------------------------------------------------------------------ ComfyUI's 3D preview (the frontend's three.js)

THREE_NAMES = ("GLTFLoader", "PLYLoader", "WebGLRenderer", "Scene", "PerspectiveCamera", "AmbientLight",
               "DirectionalLight")  # fmt: skip
# ComfyUI's Load 3D / Preview 3D light rig (frontend src/extensions/core/load3d/LightingManager.ts): an ambient
# light and five directional lights, each intensity = 3 (the default light intensity) x its multiplier.
VIEWER_LIGHTS = {"ambient": 0.5, "directional": ((0, 10, 10, 0.8), (0, 10, -10, 0.5), (-10, 0, 0, 0.3),
                                                  (10, 0, 0, 0.3), (0, -10, 0, 0.2))}  # fmt: skip
VIEWER_INTENSITY = 3.0


def frontend_three(python: Path, static: Path | None = None) -> tuple[Path, dict[str, str]] | str:
    """The three.js module of a ComfyUI frontend build (its ``static`` folder, by default the one installed in
    `python`) and its export alias of each class in THREE_NAMES, or why there is none (frontends before ~1.30
    bundle three.js without named exports)."""
    if static is None:
        probe = "import comfyui_frontend_package as p, os; print(os.path.dirname(p.__file__))"
        run = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            return "ComfyUI's Python has no comfyui_frontend_package"
        static = Path(run.stdout.strip()) / "static"
    assets = static / "assets"
    for module in sorted(assets.glob("vendor-three-*.js")):
        text = module.read_text(encoding="utf-8", errors="replace")
        exports = text[text.rfind("export{") :]
        aliases = {name: alias for name, alias in re.findall(r"(\w+) as ([\w$]+)", exports)}
        if all(name in aliases for name in THREE_NAMES):
            return module, {name: aliases[name] for name in THREE_NAMES}
    return f"the frontend in {assets.parent.parent} exports no three.js module with GLTFLoader"


def view_in_comfy_viewer(
    chromium: str, three: Path, aliases: dict[str, str], files: dict[str, Path], camera: dict, work: Path
) -> dict:
    """Load each GLB/PLY with the frontend's own three.js loaders in headless Chromium (WebGL on SwiftShader),
    light it like ComfyUI's 3D preview and render it from `camera` (fov_y degrees, width, height, and the pixels
    to sample as [x, y] from the top-left); returns per file the material and the sampled RGB values."""
    payload = {
        name: [path.suffix[1:], base64.b64encode(path.read_bytes()).decode()] for name, path in files.items()
    }
    imports = ", ".join(f"{alias} as {name}" for name, alias in aliases.items())
    lights = {**VIEWER_LIGHTS, "scale": VIEWER_INTENSITY}
    page = work / "viewer.html"
    page.write_text(
        f"""<!doctype html><html><body><pre id="out">pending</pre><script type="module">
import {{{imports}}} from "{three.as_uri()}";
const out = document.getElementById("out"), files = {json.dumps(payload)}, cam = {json.dumps(camera)};
const rig = {json.dumps(lights)};
try {{
  const result = {{}};
  for (const [name, [kind, b64]] of Object.entries(files)) {{
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer;
    const scene = new Scene();
    let material = null;
    if (kind === "glb") {{
      const gltf = await new GLTFLoader().parseAsync(bytes, "");
      gltf.scene.traverse((o) => {{ if (o.isMesh) material = o.material; }});
      scene.add(gltf.scene);
    }} else {{
      const geometry = new PLYLoader().parse(bytes), color = geometry.getAttribute("color");
      const position = geometry.getAttribute("position"), y = {{red: [], other: []}};
      for (let i = 0; color && i < position.count; i++)
        (color.getX(i) > color.getZ(i) ? y.red : y.other).push(position.getY(i));
      const mean = (a) => a.reduce((s, v) => s + v, 0) / Math.max(a.length, 1);
      result[name] = {{colors: !!color, red: y.red.length, mean_y_red: mean(y.red), mean_y_other: mean(y.other)}};
      continue;
    }}
    scene.add(new AmbientLight(0xffffff, rig.ambient * rig.scale));
    for (const [x, y, z, k] of rig.directional) {{
      const light = new DirectionalLight(0xffffff, k * rig.scale); light.position.set(x, y, z); scene.add(light);
    }}
    const renderer = new WebGLRenderer({{preserveDrawingBuffer: true}});
    renderer.setSize(cam.width, cam.height);
    const camera = new PerspectiveCamera(cam.fov_y, cam.width / cam.height, 0.01, 100);
    camera.position.set(0, 0, 0); camera.lookAt(0, 0, -1);
    renderer.render(scene, camera);
    const gl = renderer.getContext(), px = new Uint8Array(cam.width * cam.height * 4);
    gl.readPixels(0, 0, cam.width, cam.height, gl.RGBA, gl.UNSIGNED_BYTE, px);
    const samples = cam.samples.map(([x, y]) => {{
      const i = ((cam.height - 1 - y) * cam.width + x) * 4; return [px[i], px[i + 1], px[i + 2]];
    }});
    result[name] = {{type: material.type, map: !!material.map, vertexColors: material.vertexColors,
                    metalness: material.metalness, samples}};
  }}
  out.textContent = JSON.stringify(result);
}} catch (e) {{ out.textContent = "ERROR " + e + "\\n" + e.stack; }}
</script></body></html>""",
        encoding="utf-8",
    )
    result = evaluate_in_chromium(
        chromium, page.as_uri(), _WAIT_FOR_OUT, timeout=180.0, profile=work / "profile"
    )
    if not isinstance(result, str) or not result.startswith("{"):
        raise AssertionError(f"the viewer page failed: {str(result)[:3000]}")
    return json.loads(result)


# The page writes its answer into <pre id="out">; wait (real time, in the page) until it is no longer "pending".
_WAIT_FOR_OUT = """new Promise((resolve) => { const poll = () => { const out = document.getElementById("out");
  if (out && out.textContent !== "pending") resolve(out.textContent); else setTimeout(poll, 100); }; poll(); })"""


def _log_tail(profile: Path) -> str:
    lines = (profile / "chromium.log").read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if "dbus" not in line)[-3000:]


def evaluate_in_chromium(chromium: str, url: str, expression: str, timeout: float, profile: Path) -> object:
    """Open `url` in headless Chromium and return the value of `expression` (a promise is awaited), over the
    DevTools protocol on a pipe: no port, no virtual time (which runs ahead while a page waits on a decoder).
    `profile`: a fresh user-data folder, so nothing is shared with other Chromium runs on the machine."""
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()
    args = [chromium, "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--use-angle=swiftshader",
            "--enable-unsafe-swiftshader", "--allow-file-access-from-files", "--disable-background-networking",
            "--no-first-run", f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]  # fmt: skip
    # Chromium reads commands on fd 3 and writes answers on fd 4: bash (dash takes single-digit fds only) puts the
    # pipe ends there, then execs it.
    shell = f'exec "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}'
    profile.mkdir(parents=True, exist_ok=True)
    log = open(profile / "chromium.log", "wb")  # noqa: SIM115 - closed in the finally below
    proc = subprocess.Popen(
        ["bash", "-c", shell, "bash", *args], pass_fds=(to_chrome_r, from_chrome_w),
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    deadline, buffer, counter = time.time() + timeout, b"", 0

    def call(method: str, session: str | None = None, **params) -> dict:
        nonlocal buffer, counter
        counter += 1
        message = {"id": counter, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        try:
            os.write(to_chrome_w, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(f"Chromium is not running (at {method}):\n{_log_tail(profile)}") from None
        while True:
            while b"\0" not in buffer:
                left = deadline - time.time()
                if left <= 0 or not select.select([from_chrome_r], [], [], left)[0]:
                    raise TimeoutError(f"Chromium did not answer {method} within {timeout:.0f} s")
                chunk = os.read(from_chrome_r, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"Chromium closed the pipe during {method}:\n{_log_tail(profile)}")
                buffer += chunk
            raw, buffer = buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == counter:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    try:
        target = call("Target.createTarget", url=url)["targetId"]
        session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        while True:  # the first contexts may be the blank page's, replaced while the URL loads
            try:
                value = call(
                    "Runtime.evaluate", session, expression=expression, awaitPromise=True, returnByValue=True
                )
                break
            except RuntimeError as exc:
                if "context" not in str(exc) or time.time() > deadline:
                    raise
                time.sleep(0.2)
        if "exceptionDetails" in value:
            raise RuntimeError(f"the page raised: {value['exceptionDetails']}")
        return value["result"].get("value")
    finally:
        log.close()
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
