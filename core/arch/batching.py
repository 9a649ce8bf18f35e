"""Pick a batch size that fits the device: measure one image's activation peak, divide the free memory by it."""

from __future__ import annotations

import torch

from .model import Sapiens2Model


def auto_batch_size(
    model: Sapiens2Model,
    height: int = 1024,
    width: int = 768,
    *,
    max_batch: int = 32,
    headroom: float = 0.85,
    cpu_batch: int = 1,
) -> int:
    """Largest batch (≤ max_batch) whose activations fit in `headroom` of the free CUDA memory.

    On CUDA one probe forward at batch 1 measures the peak activation memory; on other devices `cpu_batch` is
    returned (batching gains little on CPU and costs memory).
    """
    device = model.device
    if device.type != "cuda":
        return cpu_batch
    torch.cuda.synchronize(device)
    free, _ = torch.cuda.mem_get_info(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    probe = torch.zeros(1, 3, height, width, device=device, dtype=model.dtype)
    with torch.inference_mode():
        model(probe)
    per_image = max(torch.cuda.max_memory_allocated(device) - start, 1)
    del probe
    torch.cuda.empty_cache()
    return int(max(1, min(max_batch, (free * headroom) // per_image)))
