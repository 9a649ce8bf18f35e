"""Scale-out on one machine: the Ray engine with 1 and 2 workers against the local engine (issue #12).

Two ratios, measured side by side in one run on the same synthetic official-layout checkpoints (`--preset tiny`:
embed 32, depth 2; `--preset 0.1b`: the 0.1B backbone with 64-wide heads) and the same frames:

- `ray_2_vs_1`: frames/s with 2 workers (each a half share of the CPUs) against 1 worker (all of them). On a
  2-core machine this says how well two processes share the cores against one process using both; on a GPU node
  each worker holds its own GPU and the ratio is the one that matters (≈ N for N GPUs when decode and storage
  keep up).
- `ray_vs_local`: per-frame cost on the Ray path with 1 worker against the local engine with the same threads
  — the overhead of units, actor calls and the driver's finalize. Start-up (Ray, actors, model loads) is a fixed
  cost, so per-frame cost is the slope between two job lengths: (T(2N) − T(N)) / N, and the fixed cost is
  T(N) − N · slope.

Ray is started once for the whole benchmark (`ray.init`), as a cluster would be; each job starts its own actors.
Variants run interleaved, `--repeat` times, medians reported; the load average goes into the JSON, because a
busy machine moves every figure.

    python benchmarks/bench_scale.py --preset tiny --frames 8 --repeat 2
    python benchmarks/bench_scale.py --preset 0.1b --frames 4 --repeat 1 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # benchmarks are scripts: reuse the pipeline benchmark's inputs and checkpoints

from bench_pipeline import PRESETS, checkpoints, load_average, write_frames  # noqa: E402


def run(args: argparse.Namespace, frames: Path, out: Path, engine: str, workers: int | None) -> float:
    """Wall seconds of one predict job (output folder fresh)."""
    from sapiens2_studio.core.studio import JobSpec, run_job
    from sapiens2_studio.core.studio.runtime.host import Host

    shutil.rmtree(out, ignore_errors=True)
    spec = JobSpec(
        inputs=[str(frames)],
        out=str(out),
        tasks=tuple(args.tasks),
        checkpoints=args.paths,
        device="cpu",
        flip_test=False,
        engine=engine,
        workers=workers,
    )
    start = time.perf_counter()
    report = run_job(spec, host=Host(on_note=None))
    seconds = time.perf_counter() - start
    if report.failures:
        raise SystemExit(f"the job failed: {report.failures}")
    return seconds


def variants(cpus: int) -> dict[str, tuple[str, int | None, int]]:
    """name → (engine, workers, torch threads in this process for the local engine)."""
    return {
        "local": ("local", None, cpus),
        "ray_1": ("ray", 1, cpus),
        "ray_2": ("ray", 2, cpus),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--frames", type=int, default=8, help="N: jobs of N and 2N frames")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--tasks", default="pose,normal")
    parser.add_argument("--image-size", default="256x192", help="HxW of the frames")
    parser.add_argument(
        "--input",
        default="sequence",
        choices=("sequence", "images"),
        help="a numbered sequence (chunks + the driver's finalize) or single images (no temporal pass)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.tasks = args.tasks.split(",")
    args.checkpoint = []
    height, width = (int(v) for v in args.image_size.split("x"))

    import ray

    cpus = os.cpu_count() or 1
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    try:
        args.paths = checkpoints(args, workdir)
        lengths = {n: workdir / f"frames_{n}" for n in (args.frames, 2 * args.frames)}
        for n, folder in lengths.items():
            for path in write_frames(folder, n, height, width):
                if args.input == "images":  # no number at the end of the name: single images, not a sequence
                    path.rename(path.with_name(f"{path.stem}_still{path.suffix}"))
        load_start = load_average()
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.repeat):
            for name, (engine, workers, threads) in variants(cpus).items():
                for n, folder in lengths.items():
                    torch.set_num_threads(threads)
                    seconds = run(args, folder, workdir / "out", engine, workers)
                    times.setdefault((name, n), []).append(seconds)
                    print(f"{name:8s} {n:3d} frames  {seconds:7.2f} s", file=sys.stderr)
        result = summarize(times, args.frames)
        result["environment"] = {
            "date": time.strftime("%Y-%m-%d %H:%M"),
            "cpus": cpus,
            "torch": torch.__version__,
            "ray": ray.__version__,
            "preset": args.preset,
            "input": args.input,
            "tasks": args.tasks,
            "image_size_hw": [height, width],
            "frames": [args.frames, 2 * args.frames],
            "repeat": args.repeat,
            "load_average_start": load_start,
            "load_average_end": load_average(),
        }
    finally:
        ray.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


def summarize(times: dict[tuple[str, int], list[float]], n: int) -> dict[str, Any]:
    """Medians per variant, per-frame slope and fixed cost; the ratios from the unrounded slopes."""
    rows: dict[str, Any] = {}
    slope: dict[str, float] = {}
    for name in sorted({key[0] for key in times}):
        short, long = statistics.median(times[(name, n)]), statistics.median(times[(name, 2 * n)])
        slope[name] = max((long - short) / n, 1e-9)
        rows[name] = {
            "job_s": {str(n): round(short, 2), str(2 * n): round(long, 2)},
            "per_frame_s": round(slope[name], 3),
            "frames_per_s": round(1 / slope[name], 4),
            "fixed_s": round(short - n * slope[name], 2),
        }
    ratios = {
        "ray_2_vs_1": round(slope["ray_1"] / slope["ray_2"], 3),  # throughput ratio
        "ray_vs_local": round(slope["ray_1"] / slope["local"], 3),  # per-frame cost ratio
    }
    return {"variants": rows, "ratios": ratios}


if __name__ == "__main__":
    raise SystemExit(main())
