"""Helpers shared by the benchmark scripts (not collected by pytest)."""

from __future__ import annotations

import importlib.util
import json
import platform
import statistics
import time
from pathlib import Path

import torch


def environment() -> dict:
    info = {
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn, device: torch.device, *, warmup: int, iters: int) -> list[float]:
    """Wall-clock seconds of each timed call (after warm-up), device-synchronised."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def median(values: list[float]) -> float:
    return statistics.median(values)


def randomize_(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Fill a (possibly meta-built then materialised) model with well-scaled random weights, in place."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.ndim == 1 and not name.endswith("bias"):
                param.fill_(1.0)
            elif name.endswith("bias"):
                param.zero_()
            else:
                fan_in = param[0].numel() if param.ndim > 1 else 1
                values = torch.randn(param.shape, generator=gen) / fan_in**0.5
                param.copy_(values.to(param.dtype))
    return model


def load_official_backbone_class(checkout: Path):
    """The reference `Sapiens2` class from a sapiens2 checkout (standalone file, torch only). Never vendored."""
    path = Path(checkout) / "sapiens" / "backbones" / "standalone" / "sapiens2.py"
    if not path.is_file():
        raise SystemExit(
            f"--official: {path} not found (give the root of a facebookresearch/sapiens2 checkout)"
        )
    spec = importlib.util.spec_from_file_location("official_sapiens2_standalone", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Sapiens2


def emit(rows: list[dict], out: Path | None) -> None:
    text = json.dumps({"environment": environment(), "rows": rows}, indent=1)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    print(text)
