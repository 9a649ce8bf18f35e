"""float32 → float16 as the bundle writer casts a channel: numpy's cast vs the torch converter core/studio hands in.

Why: core/formats/casting.py takes its fast float16 converter from the caller (the engine passes
`core/studio/runtime/half_cast.torch_half`) instead of using torch whenever the process happened to import it; this shows
what each choice costs per channel and per written layer, side by side in one run, and that the bits agree.

    python benchmarks/bench_half_cast.py [--repeat 7] [--sizes 1080x1920,2160x3840] [--old PATH_TO_OLD_CASTING]

`--old`: a copy of an older casting.py with a one-argument `as_pixel_type(values, dtype)` (e.g.
`git show 152e32e:core/formats/casting.py > /tmp/old_casting.py`), measured as a third column.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np


def best_ms(fn, repeat: int) -> float:
    """Median CPU milliseconds of `fn()` (process time: the writer's cost, not the wall)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return 1000 * statistics.median(times)


def measure(normals: np.ndarray, repeat: int, old: Any, workdir: Path) -> dict[str, float]:
    """One frame size: a channel cast each way, then a 3-channel half layer written each way (same bytes)."""
    from sapiens2_studio.core.formats import casting
    from sapiens2_studio.core.formats.exr import write_exr_bands
    from sapiens2_studio.core.studio.runtime.half_cast import torch_half

    half = np.dtype(np.float16)
    height, width, _ = normals.shape
    channel = normals[..., 0]  # a strided channel view, as the writer gets them
    numpy_bits = channel.astype(np.float16).view(np.uint16)
    assert np.array_equal(torch_half(channel).view(np.uint16), numpy_bits)
    row = {
        "channel numpy (no converter)": best_ms(partial(channel.astype, np.float16), repeat),
        "channel torch_half (engine)": best_ms(
            partial(casting.as_pixel_type, channel, half, torch_half), repeat
        ),
    }
    if old is not None:
        assert np.array_equal(old.as_pixel_type(channel, half).view(np.uint16), numpy_bits)
        row["channel old (torch if imported)"] = best_ms(partial(old.as_pixel_type, channel, half), repeat)
    layout = [(f"N.{a}", np.float16) for a in "XYZ"]

    def write(path: Path, converter: Any) -> None:
        bands = (
            {f"N.{a}": normals[y : y + 64, :, i] for i, a in enumerate("XYZ")} for y in range(0, height, 64)
        )
        write_exr_bands(path, layout, height, width, bands, half=converter)

    for label, converter in (("numpy", None), ("torch_half", torch_half)):
        row[f"N layer zip write, {label}"] = best_ms(
            partial(write, workdir / f"{label}.exr", converter), repeat
        )
    assert (workdir / "numpy.exr").read_bytes() == (workdir / "torch_half.exr").read_bytes()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", default="1080x1920,2160x3840")
    parser.add_argument("--old", default=None)
    args = parser.parse_args(argv)
    old = None
    if args.old:
        spec = importlib.util.spec_from_file_location("old_casting", args.old)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
    rng = np.random.default_rng(0)
    result = {}
    workdir = Path(tempfile.mkdtemp(prefix="s2_bench_half_"))
    for size in args.sizes.split(","):
        height, width = (int(v) for v in size.lower().split("x"))
        normals = rng.normal(size=(height, width, 3)).astype(np.float32)
        row = measure(normals, args.repeat, old, workdir)
        result[size] = {k: round(v, 2) for k, v in row.items()}
        print(size, json.dumps(result[size]), file=sys.stderr)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
