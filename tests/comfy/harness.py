"""A real, headless ComfyUI server for integration tests, and a small stdlib HTTP client for it.

Which ComfyUI (checkout + venv), frontend and third-party packs comes from ``hosts.py`` (the matrix set up in
``.hosts/``; see docs/testing.md).  The server gets a fresh base directory (custom_nodes, models, input, output,
user) with this repository linked into ``custom_nodes`` (plus any other pack, e.g. comfyui_controlnet_aux) and a
models folder of tiny synthetic checkpoints.  It runs offline (``HF_HUB_OFFLINE=1``), like CI.
"""

from __future__ import annotations

import contextlib
import json
import mimetypes
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / "workflows"
API_WORKFLOWS = WORKFLOWS / "api"
PACK_LINK_NAME = "sapiens2_studio"
# Checkpoint file names the example workflows use; tests write tiny synthetic files under these names.
WORKFLOW_CHECKPOINTS = {
    "sapiens2_1b_pose.safetensors": "pose",
    "sapiens2_1b_seg.safetensors": "seg",
    "sapiens2_1b_normal.safetensors": "normal",
    "sapiens2_1b_pointmap.safetensors": "pointmap",
    "sapiens2_1b_matting.safetensors": "matting",
}
EXAMPLE_IMAGE = "sapiens2_example.png"
EXAMPLE_VIDEO = "sapiens2_example_clip.mp4"  # the video workflows' input (LoadVideo lists the input folder)
EXAMPLE_FPS = 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_models(models_dir: Path) -> Path:
    """models/sapiens2 with tiny official-layout checkpoints under the names the workflows use."""
    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    folder = models_dir / "sapiens2"
    for name, task in WORKFLOW_CHECKPOINTS.items():
        if not (folder / name).exists():
            write_synthetic_checkpoint(folder / name, task=task)
    return folder


def write_example_image(path: Path, width: int = 96, height: int = 128) -> Path:
    """A small deterministic RGB picture (a figure on a gradient) for workflow runs."""
    import numpy as np
    from PIL import Image

    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.stack([xx / width, yy / height, 0.5 + 0 * xx], -1)
    body = ((xx - width / 2) ** 2 / (width * 0.18) ** 2 + (yy - height * 0.6) ** 2 / (height * 0.35) ** 2) < 1
    head = ((xx - width / 2) ** 2 + (yy - height * 0.2) ** 2) < (width * 0.12) ** 2
    img[body | head] = (0.8, 0.6, 0.5)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray((img * 255).astype("uint8")).save(path)
    return path


def write_example_video(path: Path, frames: int = 8, width: int = 96, height: int = 128) -> Path:
    """A short H.264 clip (EXAMPLE_FPS) of the example figure walking right and waving, for the video workflows."""
    import av
    import numpy as np

    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=EXAMPLE_FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            cx = width * (0.4 + 0.2 * i / max(1, frames - 1))
            img = np.stack([xx / width, yy / height, 0.5 + 0 * xx], -1)
            body = (
                (xx - cx) ** 2 / (width * 0.18) ** 2 + (yy - height * 0.6) ** 2 / (height * 0.35) ** 2
            ) < 1
            head = ((xx - cx) ** 2 + (yy - height * 0.2) ** 2) < (width * 0.12) ** 2
            swing = 8 * np.sin(2 * np.pi * 3.0 * i / EXAMPLE_FPS)
            arm = (np.abs(yy - (height * 0.42 + swing * (xx - cx) / (width * 0.3))) < 3) & (
                np.abs(xx - cx) < width * 0.3
            )
            img[body | head | arm] = (0.8, 0.6, 0.5)
            frame = av.VideoFrame.from_ndarray((img * 255).astype("uint8"), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


@dataclass
class ComfyServer:
    """One ComfyUI process on 127.0.0.1 with this pack (and ``packs``) linked in; stop() ends it by its PID.

    ``front_end_root`` serves another frontend build (``--front-end-root``) instead of the backend's pinned one."""

    checkout: Path
    python: Path
    base: Path
    port: int
    front_end_root: Path | None = None
    packs: tuple[Path, ...] = ()
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.base / "comfyui.log"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def start(self, models_dir: Path, timeout: float = 240.0) -> ComfyServer:
        for sub in ("custom_nodes", "input", "output", "temp", "user"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        for source, name in ((REPO, PACK_LINK_NAME), *((p, p.name) for p in self.packs)):
            link = self.base / "custom_nodes" / name
            if not link.exists():
                link.symlink_to(source, target_is_directory=True)
        models = self.base / "models"
        if not models.exists():
            models.symlink_to(models_dir, target_is_directory=True)
        cmd = [
            str(self.python), "main.py", "--cpu", "--listen", "127.0.0.1", "--port", str(self.port),
            "--base-directory", str(self.base), "--database-url", f"sqlite:///{self.base}/user/comfyui.db",
            "--disable-auto-launch", "--disable-api-nodes",
        ]  # fmt: skip
        if self.front_end_root is not None:
            cmd += ["--front-end-root", str(self.front_end_root)]
        # Offline like CI: a download attempt fails at once and the same way on every machine.
        env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                cmd,
                cwd=self.checkout,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"ComfyUI exited during start-up (code {self.process.returncode}):\n{self.log()[-4000:]}"
                )
            try:
                Client(self.url).get("/system_stats", timeout=2)
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"ComfyUI did not answer within {timeout:.0f} s:\n{self.log()[-4000:]}")

    def import_failures(self, pack: str = PACK_LINK_NAME) -> list[str]:
        return [line for line in self.log().splitlines() if "IMPORT FAILED" in line and pack in line]

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@contextlib.contextmanager
def started_server(host) -> Iterator[ComfyServer]:
    """A server of `host` (a hosts.Host: checkout and Python) on a free port, over a temporary base folder with
    the test models linked in; stopped on exit. For scripts (the workflow builder, benchmarks); the tests use
    the session fixtures of conftest.py."""
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models"
        write_models(models)
        server = ComfyServer(host.checkout, host.python, Path(tmp) / "base", free_port())
        server.start(models)
        try:
            yield server
        finally:
            server.stop()


class Client:
    """Just enough of ComfyUI's HTTP API: JSON GET/POST, upload, queue a prompt and wait for its history."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.client_id = uuid.uuid4().hex

    def get(self, path: str, timeout: float = 30):
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def get_bytes(self, path: str, timeout: float = 30) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return r.read()

    def post(self, path: str, payload: dict, timeout: float = 30) -> tuple[int, dict]:
        req = urllib.request.Request(
            self.url + path, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                body = r.read()
                return r.status, json.loads(body) if body else {}
        except urllib.error.HTTPError as err:
            body = err.read()
            try:
                return err.code, json.loads(body)
            except ValueError:
                return err.code, {"raw": body.decode("utf-8", "replace")}

    def upload_image(self, path: Path, name: str | None = None) -> dict:
        boundary = uuid.uuid4().hex
        name = name or path.name
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        body = b"".join(
            [
                f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="{name}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n".encode(),
                path.read_bytes(),
                f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="overwrite"\r\n\r\ntrue\r\n'.encode(),
                f"--{boundary}--\r\n".encode(),
            ]
        )
        req = urllib.request.Request(
            self.url + "/upload/image",
            data=body,
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def queue(self, prompt: dict) -> tuple[int, dict]:
        return self.post("/prompt", {"prompt": prompt, "client_id": self.client_id})

    def wait(self, prompt_id: str, timeout: float = 300.0) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            entry = self.get(f"/history/{prompt_id}").get(prompt_id)
            status = (entry or {}).get("status", {})
            if status.get("completed") is not None and status.get("status_str") in ("success", "error"):
                return entry
            time.sleep(0.25)
        raise TimeoutError(f"prompt {prompt_id} did not finish within {timeout:.0f} s")

    def run(self, prompt: dict, timeout: float = 300.0) -> dict:
        """Queue and wait; raises with the server's answer when the prompt is refused."""
        status, body = self.queue(prompt)
        if status != 200 or body.get("node_errors"):
            raise AssertionError(f"prompt refused (HTTP {status}): {json.dumps(body)[:3000]}")
        return self.wait(body["prompt_id"], timeout)


def execution_error(entry: dict) -> dict | None:
    for name, data in entry.get("status", {}).get("messages", []):
        if name == "execution_error":
            return data
    return None


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def two_person_clip(frames: int = 30, width: int = 160, height: int = 112):
    """A clip of two figures walking towards each other and crossing (A ahead of B, a little lower), with
    swinging arms: (list of uint8 H×W×3 frames, per-frame boxes [[x1, y1, x2, y2], …]). Deterministic."""
    import numpy as np

    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    background = np.stack([xx / width, yy / height, 0.4 + 0 * xx], -1)
    images, boxes = [], []
    for i in range(frames):
        t = i / max(1, frames - 1)
        img = background.copy()
        frame_boxes = []
        for cx, cy, colour in (
            (20 + 120 * t, height * 0.52, (0.85, 0.6, 0.5)),
            (140 - 120 * t, height * 0.48, (0.4, 0.7, 0.9)),
        ):
            swing = 6.0 * np.sin(2 * np.pi * 2.5 * i / 24.0)  # 2.5 Hz arm swing at 24 fps
            body = ((xx - cx) / 9) ** 2 + ((yy - cy) / 28) ** 2 < 1
            head = (xx - cx) ** 2 + (yy - (cy - 34)) ** 2 < 7**2
            arm = (np.abs(xx - (cx + swing * (yy - cy + 20) / 30)) < 2.5) & (yy > cy - 20) & (yy < cy + 10)
            img[body | head | arm] = colour
            frame_boxes.append([round(cx - 16, 1), round(cy - 44, 1), round(cx + 16, 1), round(cy + 30, 1)])
        images.append((img * 255).astype(np.uint8))
        boxes.append(frame_boxes)
    return images, boxes


def write_clip_frames(folder: Path, name: str, images) -> list[Path]:
    """Numbered PNG frames `<name>_0001.png`… (what the CLI reads as one sequence)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, image in enumerate(images):
        path = folder / f"{name}_{i + 1:04d}.png"
        Image.fromarray(image).save(path)
        paths.append(path)
    return paths
