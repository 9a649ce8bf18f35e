"""Blender test set-up (outer process): build the extension zip and write test bundles with the project's writer.

The checks themselves run in ``bpy_checks/`` in a fresh Python per module (see ``test_blender_addon.py``): the
bpy wheel is imported only there, so torch (imported by the project's tests) and Blender never share a process,
and a bpy exit hang is caught by a timeout instead of freezing the suite.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def load_rig_truth():
    """``rig_truth.py`` and the add-on's bpy-free ``parse`` package, both by file path."""
    import importlib

    parse_dir = REPO / "blender_addon" / "parse"
    name = "sapiens2_blender_rig_parse"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, parse_dir / "__init__.py",
                                                      submodule_search_locations=[str(parse_dir)])  # fmt: skip
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    mods = ("rig_keypoints", "rig_skeleton", "rig_measure")
    parse = {m: importlib.import_module(f"{name}.{m}") for m in mods}
    parse["names"] = json.loads((REPO / "core" / "data" / "keypoints308.json").read_text(encoding="utf-8"))[
        "keypoint_names"
    ]
    spec = importlib.util.spec_from_file_location("sapiens2_blender_rig_truth", HERE / "rig_truth.py")
    truth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(truth)
    return truth, parse


def load_synthetic_capture():
    """``synthetic_capture.py`` by file path (tests are not a package and the repo is never put on sys.path)."""
    spec = importlib.util.spec_from_file_location(
        "sapiens2_blender_synthetic_capture", HERE / "synthetic_capture.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MANIFEST = Path(os.environ.get("SAPIENS2_HOSTS_FILE") or REPO / ".hosts" / "hosts.json")


def blender_hosts() -> list[tuple[str, str | None]]:
    """(id, python) per Blender to check: SAPIENS2_BLENDER_PYTHON alone, else every bpy venv of the host
    manifest that ``scripts/ci_matrix.py`` wrote (narrowed by SAPIENS2_BLENDER_HOSTS=4.2.23,5.3.0), else this
    Python (``None``)."""
    single = os.environ.get("SAPIENS2_BLENDER_PYTHON")
    if single:
        return [("bpy", single)]
    listed = json.loads(MANIFEST.read_text(encoding="utf-8")).get("blender", []) if MANIFEST.is_file() else []
    wanted = {v.strip() for v in os.environ.get("SAPIENS2_BLENDER_HOSTS", "").split(",") if v.strip()}
    chosen = [(f"bpy-{h['version']}", h["python"]) for h in listed if not wanted or h["version"] in wanted]
    return chosen or [("bpy", None)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "blender_python" in metafunc.fixturenames:
        found = blender_hosts()
        metafunc.parametrize("blender_python", [p for _, p in found], ids=[i for i, _ in found],
                             indirect=True, scope="session")  # fmt: skip


@pytest.fixture(scope="session")
def blender_python(request) -> str:
    """Python that runs the bpy checks: a bpy venv of the matrix, SAPIENS2_BLENDER_PYTHON, or this one."""
    return request.param or sys.executable


def bpy_skip_reason(other: str | None) -> str | None:
    if other and other != sys.executable:
        probe = subprocess.run(
            [other, "-c", "import importlib.util as u; raise SystemExit(u.find_spec('bpy') is None)"],
            check=False,
        )
        return None if probe.returncode == 0 else f"{other} cannot import bpy"
    if sys.version_info[:2] != (3, 11):
        return (
            f"bpy 4.5/5.0 wheels need Python 3.11, this is {sys.version_info.major}.{sys.version_info.minor}"
        )
    if importlib.util.find_spec("bpy") is None:
        return "bpy is not importable: pip install 'sapiens2-studio[blender-test]' (bpy==4.5.15, Python 3.11)"
    return None


def _write_bad_bundles(folder: Path, sc) -> None:
    """Broken variants of the tiny bundle, each with one thing wrong."""
    good = json.loads((folder / "tiny.json").read_text(encoding="utf-8"))
    sc.write_tiny(folder, "noexr")
    (folder / "noexr.exr").unlink()
    (folder / "corrupt.json").write_text(
        (folder / "tiny.json").read_text(encoding="utf-8")[:500], encoding="utf-8"
    )
    sc.write_tiny(folder, "newer")
    newer = json.loads((folder / "newer.json").read_text(encoding="utf-8"))
    newer["version"] = "2.0"
    (folder / "newer.json").write_text(json.dumps(newer), encoding="utf-8")
    (folder / "minor.json").write_text(
        json.dumps({**good, "version": "1.7", "name": "minor"}), encoding="utf-8"
    )
    (folder / "notcapture.json").write_text(
        json.dumps({"format": "gltf", "version": "2.0"}), encoding="utf-8"
    )
    (folder / "traversal.json").write_text(json.dumps({**good, "exr": "../tiny.exr"}), encoding="utf-8")
    badrow = json.loads(json.dumps(good))
    badrow["exr"] = "tiny.exr"
    badrow["people"][0]["keypoints_3d"][3] = [1.0, 2.0]
    (folder / "badrow.json").write_text(json.dumps(badrow), encoding="utf-8")
    sc.write_tiny(folder, "badexr")
    (folder / "badexr.exr").write_bytes(b"not an exr at all" * 10)
    sc.write_figure_sequence(folder, "brokenseq", 48, 64, 3)
    (folder / "brokenseq_0002.exr").unlink()


def _write_clip(path: Path, frames: int) -> None:
    """A tiny video (PyAV, from the test extra) for the movie-plate check; skipped there when av is missing."""
    try:
        import av
    except ImportError:
        return
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=12)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        for i in range(frames):
            image = np.full((32, 32, 3), 40 * i, dtype=np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())


def _expected_tiny(sc) -> dict[str, np.ndarray]:
    """What the tiny bundle must import as: the source arrays at the precision the writer stores them."""
    from sapiens2_studio.core.formats.exr import srgb_to_linear

    a = sc.tiny_arrays()
    return {
        "points": a["points"],
        "normals": a["normals"].astype(np.float16).astype(np.float32),
        "color": srgb_to_linear(a["image"].astype(np.float32) / 255.0).astype(np.float16).astype(np.float32),
        "albedo": srgb_to_linear(a["albedo"]).astype(np.float16).astype(np.float32),
        "seg": a["seg"],
        "mask": a["mask"].astype(np.float16).astype(np.float32),
    }


@pytest.fixture(scope="session")
def blender_env(blender_python, tmp_path_factory) -> dict[str, str]:
    """Environment for the bpy subprocesses: extension zip, bundle folder, isolated Blender user resources."""
    reason = bpy_skip_reason(blender_python)
    if reason:
        if os.environ.get("SAPIENS2_REQUIRE_HOSTS", "") not in ("", "0") and blender_python != sys.executable:
            pytest.fail(f"required Blender host missing: {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("blender")
    dist = root / "dist"
    # Built with the Python that has bpy: the build uses the wheel's own extension CLI.
    build = subprocess.run(
        [blender_python, str(REPO / "scripts" / "build_blender_extension.py"), "--output-dir", str(dist)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, f"extension build failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    zips = sorted(dist.glob("sapiens2_capture-*.zip"))
    assert len(zips) == 1, f"expected one extension zip, found {zips}"
    bundles = root / "bundles"
    bundles.mkdir()
    sc = load_synthetic_capture()
    sc.write_tiny(bundles, "tiny")
    for compression in ("zips", "none"):  # the other bundle compressions users can choose
        sc.write_tiny(bundles, f"tiny_{compression}", compression)
    sc.write_figure(bundles, "figure", 768, 1024)
    sc.write_figure_sequence(bundles, "walk", 96, 128, 6, fps=12.0)
    sc.write_tracked_sequence(bundles, "tracked", 48, 64)
    sc.write_sphere(bundles, "sphere")
    sc.write_sphere(bundles, "sphere_v10", legacy=True)
    sc.write_matte(bundles, "matte")
    sc.write_task_layers(bundles, "garment")
    _write_bad_bundles(bundles, sc)
    truth, parse = load_rig_truth()
    truth.write_truth_bundles(bundles, parse)
    _write_clip(bundles / "walkclip.mp4", frames=6)
    np.savez(bundles / "expected_tiny.npz", **_expected_tiny(sc))
    user = root / "blender_user"
    user.mkdir()
    env = dict(os.environ)
    env.update(
        {
            "SAPIENS2_EXTENSION_ZIP": str(zips[0]),
            "SAPIENS2_BLENDER_BUNDLES": str(bundles),
            "BLENDER_USER_RESOURCES": str(user),
            "OMP_NUM_THREADS": "2",
            "SAPIENS2_BLENDER_PYTHON": blender_python,
        }
    )
    return env
