"""Host memory while loading: peak RSS of `load_model` relative to the checkpoint's file size.

Builds a real .safetensors file of a released size from its architecture (synthetic values; default 0.4B
pretrain, fp32 ≈ 1.6 GB), then loads it in a fresh process and reports (peak RSS − RSS before loading) / file size.
Goal: ≤ 1.1 (no second full copy in host RAM).  `--first-result` adds the time to first result (load + one
1024×768 forward) and, on CUDA, the peak GPU memory.

  python benchmarks/bench_load.py --size 0.4b --task pretrain --dtype fp32 --workdir /tmp/sapiens2-bench
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import json, sys, time, torch
import sapiens2_studio.core as core
def field(name):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(name))
def rss_kib():
    return field("VmRSS")
def hwm_kib():
    return field("VmHWM")
before = rss_kib()
t = time.perf_counter()
model = core.load_model(sys.argv[1], device=sys.argv[2], dtype=sys.argv[3])
seconds = time.perf_counter() - t
peak = hwm_kib()  # VmHWM: unlike ru_maxrss it is not inherited from the parent across exec
result = {"rss_before_kib": before, "peak_rss_kib": peak, "rss_after_kib": rss_kib(),
          "load_seconds": seconds, "parameters": model.spec.num_parameters}
if sys.argv[4] == "1":  # time to first result: load + one 1024x768 forward
    x = torch.zeros(1, 3, 1024, 768, device=model.device, dtype=model.dtype)
    with torch.inference_mode():
        model(x)
    if model.device.type == "cuda":
        torch.cuda.synchronize()
        result["peak_gpu_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    result["time_to_first_result_s"] = time.perf_counter() - t
print(json.dumps(result))
"""


def write_checkpoint(path: Path, size: str, task: str, dtype: str) -> None:
    import torch
    from safetensors.torch import save_file
    from sapiens2_studio.core.arch.presets import preset_config
    from sapiens2_studio.core.testing.synthetic import state_dict_for

    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    save_file(state_dict_for(preset_config(size, task), dtype=torch_dtype), str(path))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="0.4b")
    parser.add_argument("--task", default="pretrain")
    parser.add_argument("--file-dtype", default="fp32", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--dtype", default="fp32", help="dtype to load into")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/sapiens2-bench"))
    parser.add_argument("--first-result", action="store_true", help="also time load + one 1024x768 forward")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"synthetic_{args.size}_{args.task}_{args.file_dtype}.safetensors"
    if not path.exists():
        # A separate process, so the writer's memory never counts against the loader.
        subprocess.run(
            [sys.executable, __file__, "--write-only", str(path), args.size, args.task, args.file_dtype],
            check=True,
        )
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), args.device, args.dtype, "1" if args.first_result else "0"],
        check=True,
        capture_output=True,
        text=True,
    )
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    file_bytes = path.stat().st_size
    result.update(
        size=args.size,
        task=args.task,
        file_dtype=args.file_dtype,
        load_dtype=args.dtype,
        file_bytes=file_bytes,
        peak_over_file=(result["peak_rss_kib"] - result["rss_before_kib"]) * 1024 / file_bytes,
    )
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--write-only":
        write_checkpoint(Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        main()
