"""Model throughput: img/s, achieved TFLOP/s, MFU, peak memory — per size, task, batch and dtype — and an
optional side-by-side against the official implementation on the same inputs and weights.

Examples:
  python benchmarks/bench_model.py --sizes 0.1b --batches 1 --device cpu --dtype fp32 --official /path/to/sapiens2
  python benchmarks/bench_model.py --sizes 0.4b,0.8b,1b,5b --batches 1,8,16 --device cuda --dtype bf16 \
      --peak-tflops 790 --out .bench/model.json
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ helpers only (not the package)
from common import emit, load_official_backbone_class, median, randomize_, synchronize, time_call
from sapiens2_studio.core.arch import Sapiens2Model
from sapiens2_studio.core.arch.presets import backbone_flops, preset_config
from sapiens2_studio.core.arch.rope import rope_periods
from sapiens2_studio.core.checkpoints.loader import resolve_dtype


def build(size: str, task: str, device: torch.device, dtype: torch.dtype) -> Sapiens2Model:
    model = Sapiens2Model(preset_config(size, task), device="meta", dtype=dtype)
    model.materialize_(device)
    model.backbone.rope_embed.periods.copy_(rope_periods(model.cfg.backbone.head_dim, device=device))
    return randomize_(model).eval().requires_grad_(False)


def attention_kernels(model: Sapiens2Model, batch: int, height: int, width: int, device, dtype) -> dict:
    """Which fused SDPA kernels accept this model's attention shapes (flash, cuDNN, memory-efficient, math)."""
    from sapiens2_studio.core.arch.attention import attend
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cfg = model.cfg.backbone
    tokens = (height // cfg.patch_size) * (width // cfg.patch_size) + cfg.num_prefix_tokens
    q = torch.randn(batch, cfg.num_heads, tokens, cfg.head_dim, device=device, dtype=dtype)
    result = {}
    for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            continue
        try:
            with sdpa_kernel(backend), torch.inference_mode():
                attend(q, q, q)
            result[name.lower()] = "ok"
        except RuntimeError as exc:
            result[name.lower()] = f"no: {str(exc).splitlines()[0][:80]}"
    return result


def bench_one(args, size: str, task: str, batch: int, device, dtype) -> dict:
    model = build(size, task, device, dtype)
    if args.pad_head_dim:
        model.set_attention("sdpa", pad_head_dim_to=args.pad_head_dim)
    height, width = args.height, args.width
    x = torch.randn(batch, 3, height, width, device=device, dtype=dtype)
    runner = torch.compile(model, dynamic=False) if args.compile else model
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def call():
        with torch.inference_mode():
            return runner(x)

    times = time_call(call, device, warmup=args.warmup, iters=args.iters)
    seconds = median(times)
    flops = backbone_flops(model.cfg.backbone, height, width) * batch
    row = {
        "impl": "sapiens2-studio",
        "size": size,
        "task": task,
        "batch": batch,
        "dtype": str(dtype).replace("torch.", ""),
        "device": device.type,
        "input": f"{height}x{width}",
        "seconds_per_batch": seconds,
        "img_per_s": batch / seconds,
        "backbone_tflops_per_img": flops / batch / 1e12,
        "achieved_backbone_tflop_s": flops / seconds / 1e12,
    }
    if args.peak_tflops:
        row["mfu"] = row["achieved_backbone_tflop_s"] / args.peak_tflops
    if device.type == "cuda":
        row["peak_gpu_mem_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        row["sdpa_kernels"] = attention_kernels(model, batch, height, width, device, dtype)
    if args.official and task == "pretrain":
        row.update(side_by_side(args, model, x, seconds, device))
    return row


def side_by_side(args, model: Sapiens2Model, x: torch.Tensor, our_seconds: float, device) -> dict:
    """Same weights and inputs through the official class; interleaved timing so load changes hit both."""
    official_cls = load_official_backbone_class(Path(args.official))
    size = model.cfg.backbone.size_name
    arch = "sapiens2_1b" if size == "1b-4k" else f"sapiens2_{size}"
    with torch.device("meta"):
        official = official_cls(
            arch=arch,
            img_size=(args.height, args.width),
            use_tokenizer=size == "1b-4k",
            out_type="featmap",
        )
    official.load_state_dict(
        {k[len("backbone.") :]: v for k, v in model.state_dict().items()}, strict=True, assign=True
    )
    official.eval().requires_grad_(False)

    def ours():
        with torch.inference_mode():
            return model(x)

    def theirs():
        with torch.inference_mode():
            return official(x)[0]

    with torch.inference_mode():
        a, b = ours().float(), theirs().float()
    rel = ((a - b).abs().max() / b.abs().max()).item()
    ours_t, theirs_t = [], []
    for _ in range(args.iters):  # interleave so background load hits both equally
        ours_t += time_call(ours, device, warmup=0, iters=1)
        theirs_t += time_call(theirs, device, warmup=0, iters=1)
    synchronize(device)
    return {
        "official_seconds_per_batch": median(theirs_t),
        "ours_seconds_interleaved": median(ours_t),
        "time_ratio_ours_over_official": median(ours_t) / median(theirs_t),
        "speedup_vs_official": median(theirs_t) / median(ours_t),
        "max_rel_diff_vs_official": rel,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="0.1b")
    parser.add_argument("--tasks", default="pretrain")
    parser.add_argument("--batches", default="1")
    parser.add_argument("--dtype", default="auto", help="auto (bf16 on CUDA, fp32 on CPU), fp32, bf16, fp16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--height", type=int, default=1024)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument(
        "--peak-tflops", type=float, default=0.0, help="device peak for MFU (H200 bf16: ~790)"
    )
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--pad-head-dim", type=int, default=0, help="pad head_dim to a multiple of N (5B: 8)")
    parser.add_argument(
        "--official", help="root of a facebookresearch/sapiens2 checkout for a side-by-side run"
    )
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = resolve_dtype(args.dtype, device)
    rows = []
    for size in args.sizes.split(","):
        for task in args.tasks.split(","):
            for batch in (int(b) for b in args.batches.split(",")):
                try:
                    row = bench_one(args, size, task, batch, device, dtype)
                except torch.OutOfMemoryError:
                    row = {"size": size, "task": task, "batch": batch, "error": "out of memory"}
                    torch.cuda.empty_cache()
                print(
                    {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, file=sys.stderr
                )
                rows.append(row)
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    emit(rows, args.out)


if __name__ == "__main__":
    main()
