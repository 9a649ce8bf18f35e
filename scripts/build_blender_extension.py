"""Build the installable Blender extension zip from ``blender_addon/``.

    python scripts/build_blender_extension.py                      # dist/sapiens2_capture-<version>.zip
    python scripts/build_blender_extension.py --with-openexr       # + the openexr wheel, one zip per platform

The default zip reads EXR through the OpenImageIO that ships with Blender, so it is platform independent.
``--with-openexr`` downloads the ``openexr`` wheels (``pip download``, build time only) for every platform and
Python that Blender 4.2-5.x uses and builds one zip per platform, so no pip is ever needed inside Blender.
The zip is built by Blender's own extension CLI (``blender_ext.py``), taken from the ``bpy`` wheel when it is
installed, or by ``blender --command extension build`` with ``--blender``.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ADDON = REPO / "blender_addon"
OPENEXR_VERSION = "3.5.3"
# Blender platform -> pip platform tags. Blender 4.2-5.0 use Python 3.11, 5.1+ Python 3.13.
PLATFORMS = {
    "linux-x64": ["manylinux_2_28_x86_64", "manylinux_2_17_x86_64"],
    "windows-x64": ["win_amd64"],
    "macos-arm64": ["macosx_11_0_arm64"],
    "macos-x64": ["macosx_10_15_x86_64"],
}
PYTHON_VERSIONS = ("3.11", "3.13")


def find_blender_ext_cli() -> Path | None:
    """``blender_ext.py`` inside the installed ``bpy`` wheel (no import of bpy needed)."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
        if found:
            return found[-1]
    return None


def copy_sources(target: Path) -> None:
    shutil.copytree(ADDON, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "wheels"))


def download_wheels(target: Path) -> tuple[list[str], list[str]]:
    """openexr wheels into ``target/wheels``; returns (manifest wheel paths, platforms that got one)."""
    wheels_dir = target / "wheels"
    wheels_dir.mkdir()
    platforms = []
    for blender_platform, tags in PLATFORMS.items():
        got = False
        for python in PYTHON_VERSIONS:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                f"openexr=={OPENEXR_VERSION}",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                python,
                "-d",
                str(wheels_dir),
                "--quiet",
            ]
            for tag in tags:
                cmd += ["--platform", tag]
            got |= subprocess.run(cmd, check=False).returncode == 0
        if got:
            platforms.append(blender_platform)
        else:
            print(f"warning: no openexr {OPENEXR_VERSION} wheel for {blender_platform}", file=sys.stderr)
    wheels = sorted(f"./wheels/{p.name}" for p in wheels_dir.glob("*.whl"))
    return wheels, platforms


def write_manifest_wheels(manifest: Path, wheels: list[str], platforms: list[str]) -> None:
    """Add ``wheels`` and ``platforms`` to the build copy's manifest (before its first table)."""
    text = manifest.read_text(encoding="utf-8")
    wheel_lines = "wheels = [\n" + "".join(f'  "{w}",\n' for w in wheels) + "]\n"
    platform_line = "platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]\n"
    first_table = re.search(r"^\[", text, flags=re.MULTILINE)
    cut = first_table.start() if first_table else len(text)
    manifest.write_text(text[:cut] + platform_line + wheel_lines + "\n" + text[cut:], encoding="utf-8")


def build(output_dir: Path, with_openexr: bool = False, blender: str | None = None) -> list[Path]:
    """Build the zip(s) into ``output_dir`` and return their paths."""
    output_dir = output_dir.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sapiens2_ext_") as tmp:
        source = Path(tmp) / "sapiens2_capture"
        copy_sources(source)
        split = []
        if with_openexr:
            wheels, platforms = download_wheels(source)
            write_manifest_wheels(source / "blender_manifest.toml", wheels, platforms)
            split = ["--split-platforms"]
        before = set(output_dir.glob("*.zip"))
        if blender:
            cmd = [blender, "--factory-startup", "--command", "extension", "build"]
        else:
            cli = find_blender_ext_cli()
            if cli is None:
                raise SystemExit(
                    "Cannot find Blender's extension CLI: pip install bpy, or pass --blender /path/to/blender"
                )
            cmd = [sys.executable, str(cli), "build"]
        cmd += ["--source-dir", str(source), "--output-dir", str(output_dir), *split]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    built = sorted(set(output_dir.glob("*.zip")) - before) or sorted(
        output_dir.glob("sapiens2_capture-*.zip")
    )
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=REPO / "dist")
    parser.add_argument(
        "--with-openexr", action="store_true", help="bundle the openexr wheel, one zip per platform"
    )
    parser.add_argument("--blender", help="build with this Blender binary instead of the bpy wheel's CLI")
    args = parser.parse_args(argv)
    for path in build(args.output_dir, args.with_openexr, args.blender):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
