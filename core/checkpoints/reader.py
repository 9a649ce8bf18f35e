"""Read safetensors files without mapping them whole into memory.

We parse the header ourselves and read each tensor with `readinto` straight into its destination, so loading a
model needs no second full copy in host RAM (an mmap would keep every touched page resident until the file is
closed).  Every offset is checked against the file size first, so a truncated download fails with a clear message
instead of a crash half-way through.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import torch

from .errors import CheckpointError

SAFETENSORS_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
if hasattr(torch, "float8_e4m3fn"):
    SAFETENSORS_DTYPES.update({"F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2})

_MAX_HEADER_BYTES = 100 * 1024 * 1024


def pickle_refusal(path: Path) -> CheckpointError:
    """The error for a pickled checkpoint, with the way out each front-end really has.

    Only Python has `allow_pickle=True`; the CLI and ComfyUI load safetensors only, so their advice is to use the
    official file or to convert this one once (a pickle is read with `torch.load(weights_only=True)` for that)."""
    target = path.with_suffix(".safetensors")
    one_liner = (
        'python -c "import torch; from safetensors.torch import save_file; '
        f"sd = torch.load('{path}', map_location='cpu', weights_only=True); sd = sd.get('state_dict', sd); "
        f"save_file({{k: v.contiguous() for k, v in sd.items()}}, '{target}')\""
    )
    return CheckpointError(
        f"{path.name} is a PyTorch pickle (.pth/.bin/.pt), not safetensors; pickled checkpoints can run arbitrary "
        "code when loaded, so they are refused",
        hints={
            "python": "use the official .safetensors file (https://huggingface.co/facebook), or, if you trust this "
            "file, load_model(path, allow_pickle=True) (read with torch.load(weights_only=True)), or convert it "
            "once with sapiens2_studio.core.checkpoints.convert_to_safetensors(path, out)",
            "cli": f"use the official .safetensors file (sapiens2 download), or, if you trust this file, convert "
            f"it once: sapiens2 convert {path} {target}",
            "comfyui": "use the official .safetensors file, or, if you trust this file, convert it once with "
            f"ComfyUI's Python: {one_liner}; then put the .safetensors file into models/sapiens2",
        },
    )


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    end: int


def sniff_format(path: Path) -> str:
    """'safetensors', 'pickle-zip' (torch.save), 'pickle' (legacy), or 'unknown', from the first bytes."""
    with open(path, "rb") as handle:
        head = handle.read(16)
    if head.startswith(b"PK\x03\x04"):
        return "pickle-zip"
    if head[:1] == b"\x80" and len(head) > 1 and head[1] in range(2, 6):
        return "pickle"
    if len(head) >= 9:
        (length,) = struct.unpack("<Q", head[:8])
        if 2 <= length <= _MAX_HEADER_BYTES and head[8:9] == b"{":
            return "safetensors"
    return "unknown"


class SafetensorsReader:
    """Header-parsed view of a .safetensors file; tensors are read on demand."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise CheckpointError(f"checkpoint not found: {self.path}")
        self.file_size = self.path.stat().st_size
        kind = sniff_format(self.path)
        if kind.startswith("pickle"):
            raise pickle_refusal(self.path)
        if kind != "safetensors":
            raise CheckpointError(
                f"{self.path.name} is not a safetensors file (size {self.file_size} bytes, unrecognised header). "
                "It may be corrupt or an HTML error page saved by a failed download; download it again."
            )
        self.metadata, self.entries = self._parse_header()

    def _parse_header(self) -> tuple[dict, dict[str, TensorEntry]]:
        with open(self.path, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            raw = handle.read(length)
        if len(raw) != length:
            raise CheckpointError(f"{self.path.name} is truncated inside its header; download it again.")
        try:
            header = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(
                f"{self.path.name} has a corrupt safetensors header ({exc}); download it again."
            ) from None
        if not isinstance(header, dict):
            raise CheckpointError(f"{self.path.name} has a malformed safetensors header; download it again.")
        metadata = header.pop("__metadata__", None) or {}
        data_start = 8 + length
        entries: dict[str, TensorEntry] = {}
        needed = data_start
        for name, info in header.items():
            try:
                dtype = SAFETENSORS_DTYPES[info["dtype"]]
                shape = tuple(int(s) for s in info["shape"])
                begin, end = (int(o) for o in info["data_offsets"])
            except (KeyError, TypeError, ValueError):
                raise CheckpointError(
                    f"{self.path.name}: tensor {name!r} has an unsupported or malformed header entry {info!r}"
                ) from None
            numel = 1
            for s in shape:
                numel *= s
            itemsize = torch.empty((), dtype=dtype).element_size()
            if end - begin != numel * itemsize or begin < 0:
                raise CheckpointError(
                    f"{self.path.name}: tensor {name!r} declares {end - begin} bytes for shape {shape} "
                    f"({numel * itemsize} expected); the file is corrupt"
                )
            entries[name] = TensorEntry(name, dtype, shape, data_start + begin, data_start + end)
            needed = max(needed, data_start + end)
        if needed > self.file_size:
            raise CheckpointError(
                f"{self.path.name} is truncated: its header needs {needed:,} bytes but the file has "
                f"{self.file_size:,} ({100 * self.file_size / needed:.1f}%). The download was probably interrupted; "
                "delete it and download it again."
            )
        return metadata, entries

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: entry.shape for name, entry in self.entries.items()}

    def read_into(self, name: str, destination: torch.Tensor, handle) -> None:
        """Fill `destination` (any device/dtype, same shape) with tensor `name`, using one tensor of scratch at most."""
        entry = self.entries[name]
        direct = (
            destination.device.type == "cpu"
            and destination.dtype == entry.dtype
            and destination.is_contiguous()
        )
        target = destination if direct else torch.empty(entry.shape, dtype=entry.dtype)
        if target.numel():
            handle.seek(entry.start)
            view = memoryview(target.view(-1).view(torch.uint8).numpy())
            if handle.readinto(view) != entry.end - entry.start:
                raise CheckpointError(
                    f"{self.path.name}: short read of {name!r}; the file is truncated or changing"
                )
        if not direct:
            destination.copy_(target)

    def read(self, name: str) -> torch.Tensor:
        entry = self.entries[name]
        out = torch.empty(entry.shape, dtype=entry.dtype)
        with open(self.path, "rb") as handle:
            self.read_into(name, out, handle)
        return out
