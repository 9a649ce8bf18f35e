"""Where a frame's time goes on the real engine (`core.studio.jobs.job`, what `sapiens2 predict` runs): JSON on stdout.

Why: the models are fast where it matters; everything around them (decode, pre/post-processing, pose decode,
capture, EXR/PNG/JSON writing) must not leave the accelerator idle. Four measurements, each on synthetic
official-layout checkpoints (`--preset tiny`: embed 32, depth 2; `--preset 0.1b`: the 0.1B backbone with 64-wide
heads, CPU-sized) or real ones (`--checkpoint TASK=PATH`), on 1080p frames made from the demo photo:

- `stages`: per-stage core-milliseconds (CPU time of every thread) and wall-milliseconds per frame, from the run
  record of a sequential run of N frames (the engine's timing seam, `core/timing.py`; `stage_profile.py` names
  the stages and fails when an expected one is missing); with and without previews.
  `host_ms` sums the stages that stay on the host when the models run on a GPU; `all_but_forward_ms` is
  everything except the model forwards (on a CPU-only machine the device stages cost host cores too).
- `writers`: frames/s of the same job with `writers` = 0 (sequential), 1 and 2, interleaved and repeated.
- `throughput`: end-to-end frames/s of the job against model-only frames/s (the same models called on
  normalised batches of the shapes the job fed them), interleaved and repeated; the goal is ratio ≥ 0.9.
- `large`: peak RSS (VmHWM) of one large photo (default 9000×6000) through the job, in a fresh process.
- `ab`: the host-side cost of the job (no previews: CPU and wall seconds per frame, nobody listening to the
  stages) of this tree (or `--after PATH`) against another checkout (`--before PATH`, e.g. a `git worktree` or
  `git archive` of an earlier commit),
  in back-to-back alternating fresh processes on the same frames and checkpoints; ratio after / before.

    python benchmarks/bench_pipeline.py stages --frames 4 --repeat 3
    python benchmarks/bench_pipeline.py writers --frames 6 --repeat 3
    python benchmarks/bench_pipeline.py throughput --preset 0.1b --frames 2 --repeat 2
    python benchmarks/bench_pipeline.py large --image-size 6000x9000
    python benchmarks/bench_pipeline.py ab --before /tmp/before --frames 3 --repeat 4
    python benchmarks/bench_pipeline.py stages --device cuda --checkpoint pose=... (real weights on a GPU)

Always note the load average (`uptime`, recorded in the JSON): numbers from a shared machine are noisy, which is
why variants run interleaved in one process and medians are reported.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))  # benchmarks are scripts, not a package: the profiler sits beside this file

from stage_profile import HOST_STAGES, expected_stages, per_frame, require_stages  # noqa: E402

PRESETS: dict[str, dict[str, int]] = {
    "tiny": {},
    "0.1b": {"embed_dim": 768, "depth": 12, "head_dim": 64, "head_width": 64},
}
RELEASED = ("0.4b", "0.8b", "1b")  # full released architectures (heads included), synthetic weights: GPU runs
DEFAULT_TASKS = "pose,seg,normal,pointmap"


def load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def environment(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else None,
        "preset": args.preset,
        "dtype": args.dtype,
        "image_size_hw": args.image_size,
        "exr_compression": args.exr_compression or "zip (default)",
        "load_average_start": load_average(),
    }


# ------------------------------------------------------------------------------------------------ inputs


def demo_frame(height: int, width: int, shift: int = 0) -> np.ndarray:
    """The demo photo (a person, 768×768) scaled to the frame height and placed on a soft gradient: an image that
    compresses and decodes like a photo (random noise would not)."""
    from PIL import Image

    photo = Image.open(REPO / "assets" / "demo" / "astronaut.jpg").convert("RGB")
    side = min(height, width)
    photo = photo.resize((side, side), Image.Resampling.BICUBIC)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    canvas = np.stack([90 + 40 * xx / width, 110 + 30 * yy / height, 140 - 30 * xx / width], axis=-1).astype(
        np.uint8
    )
    left = max(0, (width - side) // 2 + shift)
    left = min(left, width - side)
    canvas[:side, left : left + side] = np.asarray(photo)
    return canvas


def write_frames(folder: Path, count: int, height: int, width: int, fmt: str = "png") -> list[Path]:
    """Numbered frames `frame_0001.png …` (a sequence, as a user's export of a video would be)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"frame_{i + 1:04d}.{fmt}"
        if not path.exists():
            Image.fromarray(demo_frame(height, width, shift=8 * i)).save(path)
        paths.append(path)
    return paths


def checkpoints(args: argparse.Namespace, workdir: Path) -> dict[str, Path]:
    from sapiens2_studio.core.testing.synthetic import write_synthetic_checkpoint

    given = dict(item.split("=", 1) for item in args.checkpoint)
    out: dict[str, Path] = {}
    for task in args.tasks:
        if task in given:
            out[task] = Path(given[task]).expanduser()
            continue
        path = workdir / f"synthetic_{args.preset}_{task}.safetensors"
        if not path.exists():
            if args.preset in RELEASED:
                from safetensors.torch import save_file
                from sapiens2_studio.core.arch.presets import preset_config
                from sapiens2_studio.core.testing.synthetic import state_dict_for

                save_file(state_dict_for(preset_config(args.preset, task)), str(path))
            else:
                write_synthetic_checkpoint(path, task=task, **PRESETS[args.preset])
        out[task] = path
    return out


_CACHE: Any = None  # one ModelCache for every job of this process: each model loads once (see run_job)


def model_cache() -> Any:
    global _CACHE
    if _CACHE is None:
        from sapiens2_studio.core.studio import ModelCache  # the public path: ab runs it on older trees too

        _CACHE = ModelCache()
    return _CACHE


def run_job(args: argparse.Namespace, frames: Path, out: Path, host: Any = None, **options: Any) -> Any:
    """The job's report (`report.stages`: the run record's stage totals); see `run_predict_job`."""
    return run_predict_job(args, frames, out, host, **options).report


def run_predict_job(
    args: argparse.Namespace, frames: Path, out: Path, host: Any = None, **options: Any
) -> Any:
    """The job `sapiens2 predict` runs (engines.dispatch.run_prepared), with the process's shared model cache
    (`PredictJob.cache`: a repeated job loads no model again); returns the PredictJob after its run."""
    from sapiens2_studio.core.studio import JobSpec, PredictJob
    from sapiens2_studio.core.studio.engines.dispatch import run_prepared

    if args.exr_compression is not None:  # older engines (the 'before' column) have no such option
        if "exr_compression" not in JobSpec.__dataclass_fields__:
            raise SystemExit("this engine has no exr_compression option")
        options["exr_compression"] = args.exr_compression
    spec = JobSpec(
        inputs=[str(frames)],
        out=str(out),
        tasks=tuple(args.tasks),
        checkpoints=args.paths,
        device=args.device,
        dtype=args.dtype,
        flip_test=True,
        **options,
    )
    job = PredictJob(spec, host=host)
    job.cache = model_cache()
    report = run_prepared(job)
    if report.failures:
        raise SystemExit(f"the job failed: {report.failures}")
    return job


def job_options(writers: int, previews: bool) -> dict[str, Any]:
    """JobSpec options; `writers` only where this version of the engine has it (the benchmark also runs on
    versions before the option existed, for the 'before' column)."""
    from sapiens2_studio.core.studio import JobSpec

    options: dict[str, Any] = {"previews": previews}
    if "writers" in JobSpec.__dataclass_fields__:
        options["writers"] = writers
    elif writers:
        raise SystemExit("this engine has no writers option")
    return options


@contextlib.contextmanager
def direct_io(on: bool) -> Any:
    """The EXR writer's direct (page-cache bypassing) writes (core/formats/direct_io.py) on, or off for the A/B;
    engines before them have no such module and are left as they are."""
    try:
        module = importlib.import_module("sapiens2_studio.core.formats.direct_io")
    except ImportError:
        yield
        return
    if hasattr(module, "ENABLED"):  # engines that read the switch once, at import
        saved = module.ENABLED
        module.ENABLED = saved and on
        try:
            yield
        finally:
            module.ENABLED = saved
        return
    saved_switch = os.environ.get("SAPIENS2_DIRECT_IO")
    if not on:
        os.environ["SAPIENS2_DIRECT_IO"] = "0"
    try:
        yield
    finally:
        if saved_switch is None:
            os.environ.pop("SAPIENS2_DIRECT_IO", None)
        else:
            os.environ["SAPIENS2_DIRECT_IO"] = saved_switch


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# ------------------------------------------------------------------------------------------------ stages


def summarize(rows: dict[str, dict[str, float]]) -> dict[str, float]:
    cpu = {k: v["cpu_ms"] for k, v in rows.items()}
    forward = sum(v for k, v in cpu.items() if k.endswith(".forward"))
    return {
        "total_cpu_ms": sum(cpu.values()),
        "forward_cpu_ms": forward,
        "all_but_forward_cpu_ms": sum(cpu.values()) - forward,
        "host_cpu_ms": sum(v for k, v in cpu.items() if k in HOST_STAGES),
        "total_wall_ms": sum(v["wall_ms"] for v in rows.values()),
    }


def bench_stages(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Every run writes into a new folder, as a video job writes new files (overwriting a folder's earlier files
    reuses their pages and is cheaper on some machines, docs/performance.md). `--direct-io-ab` adds the
    no-previews job with the EXR written through the page cache (direct I/O off), interleaved. The stages come
    from each job's run record; a stage the benchmark expects and the job did not report stops it."""
    from sapiens2_studio.core.studio import Host

    frames = workdir / f"frames_{args.image_size[0]}x{args.image_size[1]}"
    write_frames(frames, args.frames, *args.image_size)
    variants = [("previews", True, True), ("no_previews", False, True)]
    if args.direct_io_ab:
        variants.append(("no_previews_buffered_exr", False, False))
    runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name, _, _ in variants}
    loads: list[list[float]] = []
    run_job(args, frames, workdir / "warmup", **job_options(0, True))  # load models, warm caches
    for repeat in range(args.repeat):
        for name, previews, direct in variants:  # interleaved, so background load hits both
            # on an accelerator, stage boundaries wait for it: its work is charged to the stage that launched it
            host = Host(args.device, sync_stages=True, on_note=None)
            with direct_io(direct):
                report = run_job(
                    args, frames, workdir / f"out_{name}_{repeat}", host, **job_options(0, previews)
                )
            synchronize(args.device)
            if not args.checkpoint:  # real checkpoints may see no person: pose.decode etc. need not run
                require_stages(report.stages, expected_stages(args.tasks, previews=previews, sequence=True))
            runs[name].append(per_frame(report.stages, args.frames))
            loads.append(load_average())
    result: dict[str, Any] = {}
    for name, repeats in runs.items():
        labels = sorted({label for r in repeats for label in r})
        median = {
            label: {
                key: statistics.median(r.get(label, {}).get(key, 0.0) for r in repeats)
                for key in ("cpu_ms", "wall_ms", "calls")
            }
            for label in labels
        }
        result[name] = {
            "stages": median,
            "summary": summarize(median),
            "summary_each_repeat": [summarize(r) for r in repeats],
        }
    sizes = output_sizes(workdir / "out_no_previews_0")
    return {
        "frames": args.frames,
        "repeat": args.repeat,
        "load_average": loads,
        "bytes_per_frame": sizes,
        **result,
    }


def output_sizes(folder: Path) -> dict[str, float]:
    """Mean bytes per frame of each kind of output file (EXR, bundle JSON, keypoint JSON, previews)."""
    sizes: dict[str, list[int]] = {}
    for path in folder.rglob("*"):
        if not path.is_file() or path.name.endswith(".sequence.json"):
            continue
        kind = ".".join(path.name.split(".")[1:])
        sizes.setdefault(kind, []).append(path.stat().st_size)
    return {kind: statistics.mean(v) for kind, v in sorted(sizes.items())}


# ------------------------------------------------------------------------------------------------ writers


def bench_writers(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    frames = workdir / f"frames_{args.image_size[0]}x{args.image_size[1]}"
    write_frames(frames, args.frames, *args.image_size)
    counts = [int(v) for v in args.writers.split(",")]
    times: dict[int, list[float]] = {n: [] for n in counts}
    cpu: dict[int, list[float]] = {n: [] for n in counts}
    loads = []
    run_job(args, frames, workdir / "warmup", **job_options(0, args.previews))
    for r in range(args.repeat):
        for n in counts[r % len(counts) :] + counts[: r % len(counts)]:  # rotated: drifting load hits all
            start, start_cpu = time.perf_counter(), time.process_time()
            run_job(args, frames, workdir / f"out_w{n}", **job_options(n, args.previews))
            synchronize(args.device)
            times[n].append(time.perf_counter() - start)
            cpu[n].append(time.process_time() - start_cpu)
            loads.append(load_average())
    fps = {n: args.frames / statistics.median(t) for n, t in times.items()}
    base = counts[0]
    return {
        "frames": args.frames,
        "previews": args.previews,
        "load_average": loads,
        "seconds": {str(n): t for n, t in times.items()},
        "cpu_seconds": {str(n): t for n, t in cpu.items()},
        "frames_per_s": {str(n): v for n, v in fps.items()},
        "ratio_to_first": {str(n): fps[n] / fps[base] for n in counts},
        "ratio_to_first_each_repeat": {
            str(n): [b / t for b, t in zip(times[base], times[n])] for n in counts
        },
    }


# ------------------------------------------------------------------------------------------------ throughput


def bench_throughput(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """End-to-end (the job: decode … bundle) vs model-only (the same forwards on ready batches), interleaved. The
    batch shapes are recorded by forward pre-hooks on the loaded modules (torch's public hook, nothing wrapped)."""
    frames = workdir / f"frames_{args.image_size[0]}x{args.image_size[1]}"
    write_frames(frames, args.frames, *args.image_size)
    shapes: dict[str, list[tuple[int, ...]]] = {}
    modules: dict[str, Any] = {}
    loaded_job = run_predict_job(args, frames, workdir / "load", **job_options(0, False))  # loads the models
    hooks = []
    for loaded in loaded_job.models.values():
        module = loaded.model

        def record(mod: Any, inputs: tuple[Any, ...], task: str = loaded.task) -> None:
            shapes.setdefault(task, []).append(tuple(inputs[0].shape))
            modules[task] = mod

        hooks.append(module.register_forward_pre_hook(record))
    e2e, model_only, loads = [], [], []
    try:
        run_job(args, frames, workdir / "warmup", **job_options(args.writers_n, args.previews))
    finally:
        for hook in hooks:
            hook.remove()
    recorded = dict(shapes)
    batches = {
        task: [
            torch.randn(shape, device=modules[task].device).to(modules[task].dtype)
            for shape in recorded[task]
        ]
        for task in recorded
    }

    def forwards_only() -> None:
        with torch.inference_mode():
            for task, inputs in batches.items():
                for x in inputs:
                    modules[task](x)
        synchronize(args.device)

    for _ in range(args.repeat):
        start = time.perf_counter()
        forwards_only()  # the forwards of the warm-up job = args.frames frames
        model_only.append(time.perf_counter() - start)
        start = time.perf_counter()
        run_job(args, frames, workdir / "out_e2e", **job_options(args.writers_n, args.previews))
        synchronize(args.device)
        e2e.append(time.perf_counter() - start)
        loads.append(load_average())
    e2e_fps = args.frames / statistics.median(e2e)
    model_fps = args.frames / statistics.median(model_only)
    return {
        "frames": args.frames,
        "writers": args.writers_n,
        "previews": args.previews,
        "forward_batches_per_run": {t: [list(s) for s in v] for t, v in recorded.items()},
        "load_average": loads,
        "model_only_s": model_only,
        "end_to_end_s": e2e,
        "model_only_frames_per_s": model_fps,
        "end_to_end_frames_per_s": e2e_fps,
        "ratio": e2e_fps / model_fps,
        "ratio_each_repeat": [m / e for m, e in zip(model_only, e2e)],
    }


# ------------------------------------------------------------------------------------------------ large


LARGE_PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import bench_pipeline as b
args = b.parse(sys.argv[2:])
workdir = b.Path(args.workdir)
args.paths = b.checkpoints(args, workdir)
def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) * 1024
image = b.Path(args.large_image)
start, start_cpu = time.perf_counter(), time.process_time()
before = hwm()
b.run_job(args, image, workdir / "out_large", **b.job_options(args.writers_n, args.previews))
print(json.dumps({"peak_rss_bytes": hwm(), "rss_before_job_bytes": before,
                  "seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - start_cpu}))
"""


def bench_large(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from PIL import Image

    height, width = args.image_size
    image = workdir / f"large_{height}x{width}.jpg"
    if not image.exists():
        Image.fromarray(demo_frame(height, width)).save(image, quality=90)
    rows = []
    for previews in (False, True) if args.previews else (False,):
        argv = [a for a in sys.argv[1:] if a != "--previews"] + (["--previews"] if previews else [])
        argv += ["--large-image", str(image), "--workdir", str(workdir)]
        proc = subprocess.run(
            [sys.executable, "-c", LARGE_PROBE, str(HERE), *argv], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-4000:])
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row.update(previews=previews, load_average=load_average())
        rows.append(row)
    return {"image": str(image), "image_size_hw": [height, width], "runs": rows}


# ------------------------------------------------------------------------------------------------ ab


AB_PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import bench_pipeline as b
import sapiens2_studio
args = b.parse(sys.argv[2:])
workdir = b.Path(args.workdir)
args.paths = b.checkpoints(args, workdir)
frames = workdir / f"frames_{args.image_size[0]}x{args.image_size[1]}"
tag = args.ab_tag
b.run_job(args, frames, workdir / f"warmup_{tag}", **b.job_options(0, False))
rows = []
for i in range(args.ab_jobs):
    start, start_cpu = time.perf_counter(), time.process_time()
    b.run_job(args, frames, workdir / f"out_{tag}_{i}", **b.job_options(0, False))
    rows.append({"wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - start_cpu})
print(json.dumps({"package": sapiens2_studio.__file__, "jobs": rows}))
"""


TREE_OPTIONS = ("--before", "--after", "--workdir")  # the driver's own options, not passed to the probes


def _tree_path(workdir: Path, name: str, tree: Path) -> Path:
    """A folder whose `sapiens2_studio` links to `tree`, for PYTHONPATH (it comes before the editable install)."""
    folder = workdir / f"path_{name}"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "sapiens2_studio"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(tree.resolve(), target_is_directory=True)
    return folder


def _bundle_files(folder: Path) -> dict[str, bytes]:
    """Every file's bytes, JSON without its run record: the tests' own comparison (tests/studio_runs.py)."""
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from studio_runs import output_bytes
    finally:
        sys.path.remove(str(REPO / "tests"))
    return output_bytes(folder)


def bench_ab(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """This tree against `--before`, back to back in alternating fresh processes (each: a warm-up job, then
    `--ab-jobs` timed jobs of `--frames` frames, previews off, nobody listening); medians of the per-frame job
    costs over every timed job of every round. Also compares the two trees' bundles (JSON without the run
    record, every other byte)."""
    if not args.before:
        raise SystemExit("ab needs --before PATH (a checkout of the version to compare against)")
    frames = workdir / f"frames_{args.image_size[0]}x{args.image_size[1]}"
    write_frames(frames, args.frames, *args.image_size)
    trees = {"before": Path(args.before), "after": Path(args.after) if args.after else REPO}
    paths = {name: _tree_path(workdir, name, tree) for name, tree in trees.items()}
    given = sys.argv[1:]
    argv = [
        a
        for i, a in enumerate(given)
        if not a.startswith(TREE_OPTIONS) and (i == 0 or given[i - 1] not in TREE_OPTIONS)
    ]
    argv[argv.index("ab")] = "stages"  # parse() needs a mode; the probe only reads the options
    jobs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    packages: dict[str, str] = {}
    loads = []
    for r in range(args.repeat):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for name in order:
            env = {**os.environ, "PYTHONPATH": str(paths[name])}
            probe_args = [*argv, "--workdir", str(workdir), "--ab-tag", f"{name}{r}"]
            proc = subprocess.run(
                [sys.executable, "-c", AB_PROBE, str(HERE), *probe_args],
                capture_output=True,
                text=True,
                check=False,
                env=env,
            )
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-4000:])
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            packages[name] = row["package"]
            jobs[name] += row["jobs"]
            loads.append(load_average())
    per_frame_ms = {
        name: {
            key: 1000.0 * statistics.median(j[key] for j in rows) / args.frames for key in ("cpu_s", "wall_s")
        }
        for name, rows in jobs.items()
    }
    before, after = _bundle_files(workdir / "out_before0_0"), _bundle_files(workdir / "out_after0_0")
    differing = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return {
        "frames": args.frames,
        "jobs_per_process": args.ab_jobs,
        "rounds": args.repeat,
        "packages": packages,
        "load_average": loads,
        "per_frame_ms": per_frame_ms,
        "ratio_after_before": {
            key: per_frame_ms["after"][key] / per_frame_ms["before"][key] for key in ("cpu_s", "wall_s")
        },
        "jobs": jobs,
        "outputs_compared": len(before),
        "outputs_differing": differing,
    }


# ------------------------------------------------------------------------------------------------ main


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=("stages", "writers", "throughput", "large", "ab"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS) + list(RELEASED))
    parser.add_argument("--checkpoint", action="append", default=[], metavar="TASK=PATH")
    parser.add_argument("--image-size", default=None, help="HxW (default 1080x1920; large: 6000x9000)")
    parser.add_argument("--frames", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--writers", default="0,1,2", help="writers mode: the writer counts to compare")
    parser.add_argument("--writers-n", type=int, default=0, help="throughput/large: the job's writers option")
    parser.add_argument("--previews", action="store_true", help="writers/throughput/large: previews on")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    parser.add_argument(
        "--exr-compression", default=None, help="the bundles' EXR compression (default: the engine's, zip)"
    )
    parser.add_argument(
        "--workdir", default=None, help="checkpoints, frames and outputs (default: a temp dir)"
    )
    parser.add_argument("--large-image", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--direct-io-ab",
        action="store_true",
        help="stages: also run the job with the EXRs written through the page cache (A/B, interleaved)",
    )
    parser.add_argument("--before", default=None, help="ab: the checkout to compare this tree against")
    parser.add_argument(
        "--after", default=None, help="ab: the checkout measured as 'after' (default: this one)"
    )
    parser.add_argument("--ab-jobs", type=int, default=3, help="ab: timed jobs per process")
    parser.add_argument("--ab-tag", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    default_size = "6000x9000" if args.mode == "large" else "1080x1920"
    args.image_size = tuple(int(v) for v in (args.image_size or default_size).lower().split("x"))
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="s2_bench_pipeline_"))
    workdir.mkdir(parents=True, exist_ok=True)
    args.paths = checkpoints(args, workdir)
    result = {"mode": args.mode, "environment": environment(args)}
    bench = {
        "stages": bench_stages,
        "writers": bench_writers,
        "throughput": bench_throughput,
        "large": bench_large,
        "ab": bench_ab,
    }
    result.update(bench[args.mode](args, workdir))
    result["environment"]["load_average_end"] = load_average()
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
