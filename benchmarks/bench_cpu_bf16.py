"""bf16 against fp32 on the CPU, same weights and input, interleaved: seconds per image and the relative L2 error.

Why: CPUs with native bf16 (AVX512-BF16, AMX) run bf16 matrix products faster; whether `dtype="auto"` should pick
bf16 there (core/studio/runtime/execution.py `resolve_dtype`) is decided from these numbers, not assumed. The input is the
demo photo at 1024×768, normalised as the pipeline does; the output compared is the backbone's feature map
(or a task head's output with --task).

    python benchmarks/bench_cpu_bf16.py --size 0.4b --repeat 3 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []
    )
    return sorted(f for f in flags if "bf16" in f or f.startswith("amx") or f == "avx512f")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="0.4b")
    parser.add_argument("--task", default="pretrain")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from bench_model import build
    from bench_pipeline import demo_frame
    from sapiens2_studio.core.pipeline.images import prepare_image
    from sapiens2_studio.core.pipeline.preprocess import normalize, preprocess_seg

    device = torch.device("cpu")
    fp32 = build(args.size, args.task, device, torch.float32)
    bf16 = build(args.size, args.task, device, torch.float32)
    bf16.load_state_dict(fp32.state_dict())
    bf16 = bf16.to(torch.bfloat16)
    prepared = prepare_image(demo_frame(1024, 768))
    x = normalize(preprocess_seg(prepared.pixels, quantize=True))[None]

    def first(out: object) -> torch.Tensor:
        while isinstance(out, (tuple, list)):
            out = out[0]
        return out.to(torch.float32)  # type: ignore[union-attr]

    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    loads = []
    outputs: dict[str, torch.Tensor] = {}
    with torch.inference_mode():
        for model, dtype in ((fp32, torch.float32), (bf16, torch.bfloat16)):  # warm-up (oneDNN primitives)
            model(x.to(dtype))
        for _ in range(args.repeat):
            for name, model, dtype in (("fp32", fp32, torch.float32), ("bf16", bf16, torch.bfloat16)):
                start = time.perf_counter()
                outputs[name] = first(model(x.to(dtype)))
                times[name].append(time.perf_counter() - start)
            loads.append([round(v, 2) for v in os.getloadavg()])
    ref, got = outputs["fp32"].double(), outputs["bf16"].double()
    rel_l2 = float((got - ref).norm() / ref.norm())
    cosine = float(torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0))
    result = {
        "size": args.size,
        "task": args.task,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu_flags": cpu_flags(),
        "load_average": loads,
        "seconds": times,
        "median_s": {k: statistics.median(v) for k, v in times.items()},
        "speedup_bf16": statistics.median(times["fp32"]) / statistics.median(times["bf16"]),
        "speedup_each_repeat": [a / b for a, b in zip(times["fp32"], times["bf16"])],
        "relative_l2": rel_l2,
        "cosine": cosine,
        "max_abs_error": float((got - ref).abs().max()),
        "output_shape": list(ref.shape),
        "finite": bool(np.isfinite(got.numpy()).all()),
    }
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
