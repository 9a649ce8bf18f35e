"""ONNX Runtime vs PyTorch on this CPU, side by side in one run, threads equal (docs/deploy.md).

    python benchmarks/onnx_runtime.py --size 0.1b --runs 3 --threads 2

Random weights in the official layout (`core.testing.synthetic.state_dict_for`), the pretrain backbone at
1024x768: export time, file size, peak memory (RSS high-water mark before and after the export), rel-L2 of ORT vs
PyTorch fp32 (and, with --fp64, of both vs the float64 model), and seconds per image for both.

    python benchmarks/onnx_runtime.py --size 0.4b --export-only --threads 2     # export cost of a 0.4B model
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="0.1b")
    parser.add_argument("--task", default="pretrain")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--export-only", action="store_true", help="measure export time and peak memory only")
    parser.add_argument(
        "--rope", choices=("bf16", "fp32"), default="bf16", help="RoPE dtype (bf16: the released models)"
    )
    parser.add_argument(
        "--fp64",
        action="store_true",
        help="also PyTorch float64: how far each fp32 runtime is from the exact model",
    )
    args = parser.parse_args()

    from sapiens2_studio.core.arch.presets import preset_config
    from sapiens2_studio.core.checkpoints.loader import load_model
    from sapiens2_studio.core.onnx import OnnxModel, export_onnx
    from sapiens2_studio.core.testing.synthetic import state_dict_for

    torch.set_num_threads(args.threads)
    weights = state_dict_for(preset_config(args.size, args.task))
    model = load_model(weights, device="cpu", dtype=torch.float32, rope_dtype=args.rope)
    del weights
    result: dict = {"size": args.size, "task": args.task, "rope": args.rope, "threads": args.threads}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        report = export_onnx(model, path)
        result.update(
            export_seconds=round(report.seconds, 1),
            file_mb=round(report.size_bytes / 1e6, 1),
            peak_rss_mb_before_export=round(before),
            peak_rss_mb_after_export=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        )
        if not args.export_only:
            onnx_model = OnnxModel(path, device="cpu", threads=args.threads)
            x = torch.randn(1, 3, 1024, 768)
            with torch.inference_mode():
                ref = model(x)
                out = onnx_model(x)
                result["rel_l2_ort_vs_torch"] = _rel(out, ref)
                if args.fp64:
                    exact = model.to(torch.float64)(x.double())
                    model.to(torch.float32)
                    result["rel_l2_torch_vs_fp64"] = _rel(ref, exact)
                    result["rel_l2_ort_vs_fp64"] = _rel(out, exact)
                times = {"torch": [], "onnxruntime": []}
                for _ in range(args.runs):
                    for name, fn in (("torch", model), ("onnxruntime", onnx_model)):
                        start = time.perf_counter()
                        fn(x)
                        times[name].append(time.perf_counter() - start)
            result["provider"] = onnx_model.provider
            if args.runs:  # --runs 0: parity only
                best = {k: float(np.median(v)) for k, v in times.items()}
                result.update(
                    seconds_per_image={k: round(v, 3) for k, v in best.items()},
                    ort_speedup=round(best["torch"] / best["onnxruntime"], 2),
                )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
