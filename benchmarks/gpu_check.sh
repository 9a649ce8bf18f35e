#!/usr/bin/env bash
# One prepared GPU run (≤ 10 minutes on an H200) for docs/performance.md.  Needs a CUDA torch, this repo
# installed (`pip install -e .`), and optionally a sapiens2 checkout for the side-by-side (OFFICIAL=/path).
# Results land in ${OUT:-.bench}/gpu_*.json; copy the tables into docs/performance.md with the date and GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.bench}
PEAK=${PEAK_TFLOPS:-790}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu_info.txt"
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())" | tee -a "$OUT/gpu_info.txt"
SBS=()
[ -n "${OFFICIAL:-}" ] && SBS=(--official "$OFFICIAL")
# Throughput and MFU per size and batch (bf16, fused attention), backbone only.
timeout 200 python benchmarks/bench_model.py --sizes 0.4b,0.8b,1b,5b --batches 1,8,16 --dtype bf16 \
    --peak-tflops "$PEAK" --warmup 3 --iters 10 --out "$OUT/gpu_backbone.json"
# Side by side with the official implementation at batch 8 (same weights, same inputs).
timeout 120 python benchmarks/bench_model.py --sizes 0.4b,1b,5b --batches 8 --dtype bf16 --peak-tflops "$PEAK" \
    --warmup 2 --iters 5 "${SBS[@]}" --out "$OUT/gpu_side_by_side.json"
# Full task models (heads included) at batch 8, and 1B-4K at 4096x3072.
timeout 90 python benchmarks/bench_model.py --sizes 0.4b,1b --tasks pose,seg,normal,pointmap --batches 8 \
    --dtype bf16 --warmup 2 --iters 5 --out "$OUT/gpu_tasks.json"
timeout 60 python benchmarks/bench_load.py --size 1b --task pose --file-dtype bf16 --dtype bf16 --device cuda --first-result --workdir /tmp/s2bench --out "$OUT/gpu_ttfr.json"
timeout 50 python benchmarks/bench_model.py --sizes 1b-4k --batches 1 --height 4096 --width 3072 --dtype bf16 \
    --peak-tflops "$PEAK" --warmup 1 --iters 3 --out "$OUT/gpu_4k.json"
# End to end on the engine (decode → four 0.1B-backbone task models in bf16 → capture bundles), 1080p frames, synthetic
# weights: per-stage milliseconds (sequential, profiled) and the overlapped job against the bare forwards.
timeout 45 python benchmarks/bench_pipeline.py stages --device cuda --preset 0.1b --frames 4 --repeat 1 \
    --workdir /tmp/s2bench_e2e --out "$OUT/gpu_e2e_stages.json" >/dev/null
timeout 35 python benchmarks/bench_pipeline.py throughput --device cuda --preset 0.1b --frames 8 --repeat 2 \
    --writers-n 8 --workdir /tmp/s2bench_e2e --out "$OUT/gpu_e2e_throughput.json" >/dev/null
