"""`sapiens2 export usd BUNDLE_OR_SEQUENCE OUT.usd[a|c|z]`: a capture bundle (one frame) or a sequence index as one
USD stage — the pointmap mesh, each person's 308-joint skeleton, the camera (docs/formats.md §6). Needs the `usd`
extra (usd-core). The work is `core.formats.usd.export_usd`; this module only translates the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HELP = "a capture bundle or sequence as a USD stage (mesh, skeletons, camera)"


_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")  # = core.formats.usd.USD_SUFFIXES (tests check they agree)


def _usd_path(text: str) -> Path:
    if Path(text).suffix.lower() not in _SUFFIXES:
        raise argparse.ArgumentTypeError(f"OUT must end in {', '.join(_SUFFIXES)}, got {Path(text).name!r}")
    return Path(text)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of `sapiens2 export usd`."""
    p.add_argument(
        "source", metavar="BUNDLE_OR_SEQUENCE", help="a bundle <name>.json or a <name>.sequence.json"
    )
    p.add_argument(
        "out",
        metavar="OUT",
        type=_usd_path,
        help="the stage to write: .usda (text), .usdc or .usd (binary), .usdz (one package); a sequence's "
        "meshes go beside a .usd/.usda/.usdc as OUT_frames/ (inside a .usdz)",
    )
    p.add_argument("--fps", type=_positive, help="frame rate of the stage (default: the sequence's)")
    p.add_argument(
        "--max-edge-ratio",
        type=_positive,
        default=0.05,
        help="drop mesh triangles whose depth range exceeds this fraction of their depth (default 0.05, as the "
        "GLB/PLY export)",
    )


def run(args: argparse.Namespace) -> int:
    from ..core.formats.usd import export_usd

    out = args.out
    summary = export_usd(args.source, out, fps=args.fps, max_edge_ratio=args.max_edge_ratio)
    print(summary.path)
    clips = f", meshes in {out.stem}_frames/" if summary.clip_files else ""
    print(
        f"sapiens2 export usd: {summary.frames} frame(s) {summary.start}-{summary.end} at {summary.fps:g} fps, "
        f"{summary.people} person(s), up to {summary.vertices} mesh vertices{clips}",
        file=sys.stderr,
    )
    return 0


def beside_problem(fmt: str | None, remote: bool) -> str | None:
    """`predict --usd`: why the stages could not be written (usd-core missing, or an --out URL, whose bundles are
    published remotely as frames complete, not beside this process), said before any model loads; None if fine."""
    if fmt is None:
        return None
    if remote:
        return (
            "--usd writes next to local bundles; with an --out URL run 'sapiens2 export usd' on the published "
            "bundle or sequence instead"
        )
    from ..core.formats.usd import UsdExportError, require_pxr

    try:
        require_pxr()
    except UsdExportError as exc:
        return f"--usd: {exc}"
    return None


def write_beside(results: list[dict], fmt: str) -> tuple[list[Path], list[str]]:
    """`predict --usd`: each finished input's stage `<name>.<fmt>` beside its bundle JSON or sequence index (a
    sequence's meshes in `<name>_frames/`), by `core.formats.usd.export_usd`. Returns (written, errors)."""
    from ..core.errors import Sapiens2Error
    from ..core.formats.usd import export_usd

    written, errors = [], []
    for result in results:
        source = Path(result["path"])
        if not result["exists"]:
            errors.append(
                f"{result['name']}: no USD stage, its {result['kind']} result is not complete (once it is, "
                "run 'sapiens2 export usd' on it)"
            )
            continue
        stem = source.name.removesuffix(".json").removesuffix(".sequence")
        try:
            summary = export_usd(source, source.with_name(f"{stem}.{fmt}"))
        except Sapiens2Error as exc:
            errors.append(f"{result['name']}: USD: {exc}")
            continue
        written.append(Path(summary.path))
    return written, errors
