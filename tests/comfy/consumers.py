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

# Strings that survive any minification: GLTFLoader's error messages name it, and a PLY reader must find the line
# that ends a PLY header. They locate three.js among a build's assets and tell whether the build can read PLY.
THREE_MARKER = "THREE.GLTFLoader"
PLY_MARKER = "end_header"
# ComfyUI's Load 3D / Preview 3D light rig (frontend src/extensions/core/load3d/LightingManager.ts): an ambient
# light and five directional lights, each intensity = 3 (the default light intensity) x its multiplier. The same
# in 1.27.10 (setupLights, then setLightIntensity of "Comfy.Load3D.LightIntensity", default 3), 1.49.6 and 1.58.1.
VIEWER_LIGHTS = {"ambient": 0.5, "directional": ((0, 10, 10, 0.8), (0, 10, -10, 0.5), (-10, 0, 0, 0.3),
                                                  (10, 0, 0, 0.3), (0, -10, 0, 0.2))}  # fmt: skip
VIEWER_INTENSITY = 3.0


def frontend_assets(python: Path, static: Path | None = None) -> Path | str:
    """The ``assets`` folder of a ComfyUI frontend build (its ``static`` folder, by default the one installed in
    `python`), or why there is none."""
    if static is None:
        probe = "import comfyui_frontend_package as p, os; print(os.path.dirname(p.__file__))"
        run = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            return "ComfyUI's Python has no comfyui_frontend_package"
        static = Path(run.stdout.strip()) / "static"
    assets = static / "assets"
    return assets if assets.is_dir() else f"{assets} is not a folder"


def _scripts_with(assets: Path, marker: str) -> list[Path]:
    return [
        p for p in sorted(assets.glob("*.js")) if marker in p.read_text(encoding="utf-8", errors="replace")
    ]


def frontend_three(assets: Path) -> Path | str:
    """The module of a frontend build that holds its three.js: ``vendor-three-*.js`` (1.49.6, 1.58.1: it exports
    the classes, under minified names) or the extensions chunk that inlines it (1.27.10: ``index-*.js``, which
    exports nothing), or why there is none."""
    found = _scripts_with(assets, THREE_MARKER)
    if len(found) != 1:
        return f"{len(found)} modules of {assets} hold three.js's GLTFLoader: {[p.name for p in found]}"
    return found[0]


def frontend_reads_ply(assets: Path) -> bool:
    """Whether any script of the build could read a PLY file (Load 3D of 1.27.10 takes .gltf/.glb/.obj/.fbx/.stl
    only and bundles no PLYLoader)."""
    return bool(_scripts_with(assets, PLY_MARKER))


# Stands in for every import of a chunk that inlines three.js (ComfyUI's app, vue, primevue): each imported name
# is one inert object that any call, construction, property or conversion returns, so the chunk's own top-level
# code (registering extensions, defining components) runs to its end without the app; "then" stays undefined so
# that nothing awaits it.
_INERT = """const __inert = (() => { const handler = {
  get: (t, key) => key === Symbol.toPrimitive ? () => "" : key === "then" ? undefined
    : key === Symbol.iterator ? function* () {} : inert,
  apply: () => inert, construct: () => inert, set: () => true, has: () => false, deleteProperty: () => true,
  defineProperty: () => true };
  const inert = new Proxy(function () {}, handler); return inert; })();
"""
_IMPORT = re.compile(r'^import (?:(\{[^}]*\}|[\w$]+|\* as [\w$]+) from )?"[^"]+";', re.M)
# A module with exports ends with its export list (then, at most, its source-map comment).
_EXPORTS = re.compile(r"(?:^|[;}])export\s*\{[^}]*\}\s*;?\s*(?://# sourceMappingURL=\S*\s*)?$")


def importable_three(module: Path, work: Path) -> Path:
    """The three.js module to import: `module` itself when it exports anything, else a copy of the chunk in
    `work` whose imports are inert stand-ins (_INERT) and which exports each class it declares at top level; the
    three.js code in it is the frontend's own, byte for byte."""
    text = module.read_text(encoding="utf-8")
    if _EXPORTS.search(text):
        return module

    def bind(match: re.Match) -> str:
        clause = match.group(1) or ""
        if clause.startswith("{"):
            names = [
                part.split(" as ")[-1].strip() for part in clause.strip("{} ").split(",") if part.strip()
            ]
        else:
            names = [clause.removeprefix("* as ").strip()] if clause else []
        return "const " + ", ".join(f"{name} = __inert" for name in names) + ";" if names else ""

    body = _IMPORT.sub(bind, text)
    classes = re.findall(r"^class ([\w$]+)", body, re.M)
    copy = work / f"three-{module.stem}.js"
    copy.write_text(f"{_INERT}{body}\nexport {{ {', '.join(classes)} }};\n", encoding="utf-8")
    return copy


# Finds the classes the viewer uses among a module's exports by their shape, not their (minified) export names:
# loaders and the camera by the methods their prototypes own (WebGLRenderer sets its methods per instance in its
# constructor, so by its prototype's accessors), Scene and the lights by three's own type flags on an instance
# built with no arguments (Object3D subclasses only). Where several classes match, the base class is taken.
_FIND_THREE = """
const own = (C, ...names) => names.every((n) => Object.prototype.hasOwnProperty.call(C.prototype, n));
const classes = Object.values(M).filter((C) => typeof C === "function" && C.prototype);
const object3d = classes.filter((C) => own(C, "traverse", "lookAt", "add", "updateMatrixWorld"));
const built = new Map();
for (const C of classes)
  if (object3d.some((B) => B.prototype.isPrototypeOf(C.prototype))) try { built.set(C, new C()); } catch {}
const shapes = {
  GLTFLoader: (C) => own(C, "parse", "parseAsync", "register", "setDRACOLoader"),
  PLYLoader: (C) => own(C, "parse", "setPropertyNameMapping"),
  WebGLRenderer: (C) => own(C, "coordinateSystem", "outputColorSpace"),
  PerspectiveCamera: (C) => own(C, "setFocalLength", "getEffectiveFOV", "updateProjectionMatrix"),
  Scene: (C) => built.get(C)?.isScene === true,
  AmbientLight: (C) => built.get(C)?.isAmbientLight === true,
  DirectionalLight: (C) => built.get(C)?.isDirectionalLight === true,
};
const THREE = {};
for (const [role, shape] of Object.entries(shapes)) {
  const hits = classes.filter(shape);
  const roots = hits.filter((C) => !hits.some((B) => B !== C && B.prototype.isPrototypeOf(C.prototype)));
  if (roots.length > 1) throw new Error(`${roots.length} classes have the shape of ${role}`);
  if (!roots.length && role !== "PLYLoader") throw new Error(`no class has the shape of ${role}`);
  THREE[role] = roots[0] ?? null;
}
const {GLTFLoader, PLYLoader, WebGLRenderer, Scene, PerspectiveCamera, AmbientLight, DirectionalLight} = THREE;
"""


def view_in_comfy_viewer(
    chromium: str, three: Path, files: dict[str, Path], camera: dict, work: Path
) -> dict:
    """Load each GLB/PLY with the frontend's own three.js loaders (`three`: the module frontend_three found) in
    headless Chromium (WebGL on SwiftShader), light it like ComfyUI's 3D preview and render it from `camera`
    (fov_y degrees, width, height, and the pixels to sample as [x, y] from the top-left); returns per file the
    material and the sampled RGB values, or for a PLY where the frontend has no PLYLoader ``{"loader": False}``."""
    payload = {
        name: [path.suffix[1:], base64.b64encode(path.read_bytes()).decode()] for name, path in files.items()
    }
    module = importable_three(three, work)
    lights = {**VIEWER_LIGHTS, "scale": VIEWER_INTENSITY}
    page = work / "viewer.html"
    page.write_text(
        f"""<!doctype html><html><body><pre id="out">pending</pre><script type="module">
const out = document.getElementById("out"), files = {json.dumps(payload)}, cam = {json.dumps(camera)};
const rig = {json.dumps(lights)};
try {{
  const M = await import("{module.as_uri()}");
{_FIND_THREE}
  const result = {{}};
  for (const [name, [kind, b64]] of Object.entries(files)) {{
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)).buffer;
    const scene = new Scene();
    let material = null;
    if (kind === "glb") {{
      const gltf = await new GLTFLoader().parseAsync(bytes, "");
      gltf.scene.traverse((o) => {{ if (o.isMesh) material = o.material; }});
      scene.add(gltf.scene);
    }} else if (!PLYLoader) {{
      result[name] = {{loader: false}};
      continue;
    }} else {{
      const geometry = new PLYLoader().parse(bytes), color = geometry.getAttribute("color");
      const position = geometry.getAttribute("position"), y = {{red: [], other: []}};
      for (let i = 0; color && i < position.count; i++)
        (color.getX(i) > color.getZ(i) ? y.red : y.other).push(position.getY(i));
      const mean = (a) => a.reduce((s, v) => s + v, 0) / Math.max(a.length, 1);
      result[name] = {{loader: true, colors: !!color, red: y.red.length, mean_y_red: mean(y.red),
                      mean_y_other: mean(y.other)}};
      continue;
    }}
    scene.add(new AmbientLight(0xffffff, rig.ambient * rig.scale));
    for (const [x, y, z, k] of rig.directional) {{
      const light = new DirectionalLight(0xffffff, k * rig.scale); light.position.set(x, y, z); scene.add(light);
    }}
    const renderer = new WebGLRenderer({{preserveDrawingBuffer: true}});
    if (typeof renderer.render !== "function" || typeof renderer.setSize !== "function" ||
        !(renderer.domElement instanceof HTMLCanvasElement)) throw new Error("the WebGLRenderer found makes no renderer");
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
