"""End-to-end images/s vs model-only images/s, same device and model (JSON on stdout).

Why: pre- and post-processing (resize, pad, pose crops, heatmap decode, resize back at full resolution) must not
starve the model. The goal on GPU is end-to-end ≥ 0.9 × model-only. Three numbers per task:

- `model_only`: `model(x)` on an already normalised 1024×768 batch on the device (what the network costs);
- `end_to_end`: `core.pipeline` predictor on uint8 images of `--image-size` (pre-processing, model,
  post-processing back to the original resolution), results on the CPU;
- `with_outputs` (optional, `--outputs`): the CLI path, plus writing the capture bundle and PNG previews.

Models are synthetic (official key layout, seeded random weights): `--preset tiny` (embed 32, depth 2) or
`--preset 0.1b` (the 0.1B backbone: embed 768, depth 12, head_dim 64; all head widths 64 to stay CPU-sized), or pass real checkpoints with
`--checkpoint TASK=PATH`.

    python benchmarks/bench_pipeline.py --device cpu --preset tiny --tasks seg,normal,pose --iters 3
    python benchmarks/bench_pipeline.py --device cuda --checkpoint seg=~/.cache/sapiens2/seg/sapiens2_1b_seg.safetensors
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from sapiens2_studio.cli import engine
from sapiens2_studio.cli.outputs import write_frame_outputs
from sapiens2_studio.cli.predict import LoadedModel
from sapiens2_studio.core import load_model
from sapiens2_studio.core.testing.synthetic import synthetic_state_dict

PRESETS = {
    "tiny": {},
    "0.1b": {"embed_dim": 768, "depth": 12, "head_dim": 64, "head_width": 64},
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(fn, iters: int, warmup: int, device: torch.device) -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / iters


def _load(task: str, preset: str, checkpoint: str | None, device: str, dtype: str) -> LoadedModel:
    if checkpoint:
        path = Path(checkpoint).expanduser()
        model = load_model(path, device=device, dtype=dtype, task=task)
        name = path.name
    else:
        model = load_model(
            synthetic_state_dict(task, **PRESETS[preset]), device=device, dtype=dtype, task=task
        )
        name = f"synthetic-{preset}-{task}"
    return LoadedModel(
        task, model, Path(name), {"task": task, "size": model.spec.size, "checkpoint": name, "sha256": None}
    )


def bench_task(loaded: LoadedModel, images: list[np.ndarray], args: argparse.Namespace) -> dict:
    model = loaded.model
    device = torch.device(model.device) if not isinstance(model.device, torch.device) else model.device
    batch = len(images)
    # pose: one person per image (whole-image box), so the model also sees `batch` crops of 1024x768
    x = torch.randn(batch, 3, 1024, 768, device=device, dtype=model.dtype)

    def model_only() -> None:
        with torch.inference_mode():
            model(x)

    models = {loaded.task: loaded}
    options = engine.RunOptions(flip_test=False, with_previews=True)
    boxes = [None] * batch

    def end_to_end() -> None:
        with torch.inference_mode():
            engine.run_models(models, images, boxes, options)

    t_model = _timed(model_only, args.iters, args.warmup, device)
    t_e2e = _timed(end_to_end, args.iters, args.warmup, device)
    row = {
        "task": loaded.task,
        "size": model.spec.size,
        "params": model.spec.num_parameters,
        "batch": batch,
        "model_only_img_s": batch / t_model,
        "end_to_end_img_s": batch / t_e2e,
        "ratio": t_model / t_e2e,
    }
    if args.outputs:
        tmp = Path(tempfile.mkdtemp(prefix="bench_out_"))

        def with_outputs() -> None:
            with torch.inference_mode():
                frames = engine.predict_frames(models, images, boxes, ["bench.png"] * batch, options)
            for i, (frame, image) in enumerate(zip(frames, images)):
                write_frame_outputs(tmp, f"img{i}", frame, image)

        t_out = _timed(with_outputs, args.iters, args.warmup, device)
        row["with_outputs_img_s"] = batch / t_out
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tasks", default="seg,normal,pointmap,pose")
    parser.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--checkpoint", action="append", default=[], metavar="TASK=PATH")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--image-size", default="1080x1920", help="HxW of the synthetic input images")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--outputs", action="store_true", help="also time writing bundles + previews")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    h, w = (int(v) for v in args.image_size.lower().split("x"))
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(args.batch)]
    overrides = dict(item.split("=", 1) for item in args.checkpoint)
    rows = []
    for task in [t.strip() for t in args.tasks.split(",") if t.strip()]:
        loaded = _load(task, args.preset, overrides.get(task), args.device, args.dtype)
        rows.append(bench_task(loaded, images, args))
        print(json.dumps(rows[-1]), file=sys.stderr)
    result = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else platform.processor() or "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "preset": args.preset if not overrides else "checkpoints",
        "image_size_hw": [h, w],
        "iters": args.iters,
        "results": rows,
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
