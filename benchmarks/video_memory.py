"""Peak memory of a long clip through Sapiens2 Pose (smooth) and Save Capture Bundle (smooth) in a real ComfyUI.

Why: a clip is a batch, and the host already holds the whole batch as one IMAGE tensor; the pack must add only a
bounded amount on top (a chunk of model work, a window of capture frames, small per-frame pose results), not a
copy of the clip or of its dense results.  Each frame count gets a fresh server (tiny official-layout
checkpoints, CPU).  The host's own batch comes from the core node EmptyImage; the run first holds it alone
(EmptyImage -> GetImageSize -> PreviewAny: the host's peak), then, with the batch cached, runs EmptyImage -> Pose ->
Save Capture Bundle.  The pack's overhead is the second peak minus the first; it must not grow with the clip.

    .venv/bin/python benchmarks/video_memory.py [--frames 100 1000] [--size 320x180] [--host 0.3.64]

Prints one JSON object: per frame count the host's batch (MiB), the host's peak RSS, the peak with the pack,
the overhead, the run time, and the frames and progress steps the bundle reported; with two frame counts or more,
how the peak grew from the first to the last against the bound of issue 29 (the last clip's own batch plus
SMALL_CONSTANT_MIB; exit status 1 beyond it). Results and conditions: docs/performance.md ("Video in ComfyUI").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
SMALL_CONSTANT_MIB = 64.0  # allocator slack and per-frame pose results of a long clip (a few KB a frame)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(
        f"sapiens2_bench_{name}", REPO / "tests" / "comfy" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc status")


def _prompts(frames: int, width: int, height: int) -> tuple[dict, dict]:
    source = {"class_type": "EmptyImage", "inputs": {"width": width, "height": height, "batch_size": frames,
                                                     "color": 0x806040}}  # fmt: skip
    size = {"class_type": "GetImageSize", "inputs": {"image": ["1", 0]}}
    host_only = {"1": source, "2": size, "9": {"class_type": "PreviewAny", "inputs": {"source": ["2", 2]}}}
    loader = {"class_type": "Sapiens2ModelLoader", "inputs": {"checkpoint": "sapiens2_1b_pose.safetensors",
              "download_task": "pose", "download_size": "1b", "dtype": "auto", "attention": "auto",
              "compile": False}}  # fmt: skip
    pose = {"class_type": "Sapiens2Pose", "inputs": {"model": ["3", 0], "image": ["1", 0], "flip_test": False,
            "keypoint_format": "openpose (1/0 confidence, feet: core + controlnet_aux)", "neck_mode": "auto", "score_threshold": 0.0,
            "chunk_size": 4, "when_nobody_found": "whole image", "smooth": True, "fps": 24.0}}  # fmt: skip
    bundle = {"class_type": "Sapiens2SaveCaptureBundle", "inputs": {"image": ["1", 0], "pose": ["4", 1],
              "filename_prefix": "bench/clip", "fps": 24.0, "exr_compression": "zip", "smooth": True}}  # fmt: skip
    return host_only, {"1": source, "3": loader, "4": pose, "5": bundle}


def measure(harness, host, frames: int, width: int, height: int) -> dict:
    host_only, with_pack = _prompts(frames, width, height)
    with harness.started_server(host) as server:
        client = harness.Client(server.url)
        pid = server.process.pid
        entry = client.run(host_only, timeout=3600)
        assert harness.execution_error(entry) is None, harness.execution_error(entry)
        host_peak = _peak_rss(pid)
        start = time.perf_counter()
        entry = client.run(with_pack, timeout=3600)
        seconds = time.perf_counter() - start
        error = harness.execution_error(entry)
        assert error is None, error
        pack_peak = _peak_rss(pid)
        text = next(out["text"][0] for out in entry["outputs"].values() if "text" in out)
        written = sorted((server.base / "output" / "bench").rglob("*.exr"))
    batch = frames * width * height * 3 * 4
    return {
        "frames": frames,
        "size": f"{width}x{height}",
        "host_batch_mib": round(batch / MIB, 1),
        "host_peak_mib": round(host_peak / MIB, 1),
        "with_pack_peak_mib": round(pack_peak / MIB, 1),
        "pack_overhead_mib": round((pack_peak - host_peak) / MIB, 1),
        "seconds": round(seconds, 1),
        "exr_files": len(written),
        "bundle": text,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--size", default="320x180", help="WxH of the frames (the host's batch is float32)")
    parser.add_argument(
        "--host", default=None, help="a host version of .hosts/hosts.json (default: the oldest)"
    )
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    harness, hosts = _load("harness"), _load("hosts")
    matrix = hosts.load_matrix()
    if not matrix.hosts:
        print(matrix.reason, file=sys.stderr)
        return 2
    host = next((h for h in matrix.hosts if args.host in (None, h.version)), matrix.hosts[0])
    runs = []
    for n in args.frames:
        runs.append(measure(harness, host, n, width, height))
        # each run as it ends (a long one may be cut short)
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    report = {"host": host.version, "runs": runs}
    bounded = True
    if len(runs) > 1:
        first, last = runs[0], runs[-1]
        report["overhead_growth_mib"] = round(last["pack_overhead_mib"] - first["pack_overhead_mib"], 1)
        report["host_batch_growth_mib"] = round(last["host_batch_mib"] - first["host_batch_mib"], 1)
        report["peak_growth_mib"] = round(last["with_pack_peak_mib"] - first["with_pack_peak_mib"], 1)
        # issue 29: from the short clip to the long one the peak grows by less than the host's own frame batch
        # (of the long clip) plus a small constant, i.e. the pack holds no copy of the clip or of its results
        limit = last["host_batch_mib"] + SMALL_CONSTANT_MIB
        bounded = report["peak_growth_mib"] <= limit
        report["bound"] = {"peak_growth_limit_mib": round(limit, 1), "within": bounded}
    print(json.dumps(report, indent=2))
    return 0 if bounded else 1


if __name__ == "__main__":
    raise SystemExit(main())
