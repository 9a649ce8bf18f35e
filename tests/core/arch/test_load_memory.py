"""Loading streams tensors into their final storage: peak host RSS stays ≤ 1.1× the file size."""

from __future__ import annotations

import json
import subprocess
import sys

import torch
from safetensors.torch import save_file
from sapiens2_studio.core.arch.presets import preset_config
from sapiens2_studio.core.testing.synthetic import state_dict_for

PROBE = r"""
import json, sys
import torch, sapiens2_studio.core as core
from sapiens2_studio.core.testing.synthetic import synthetic_state_dict
core.load_model(synthetic_state_dict("pretrain"))  # warm torch's lazy initialisation outside the measurement
def field(name):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(name))
def rss():
    return field("VmRSS")
def hwm():  # peak RSS of this process image (ru_maxrss would include the parent's peak from before exec)
    return field("VmHWM")
before = rss()
model = core.load_model(sys.argv[1])
print(json.dumps({"before": before, "peak": hwm()}))
"""


def test_peak_rss_while_loading_0_1b(tmp_path):
    path = tmp_path / "sapiens2_0.1b_pretrain.safetensors"
    save_file(state_dict_for(preset_config("0.1b"), dtype=torch.float32), str(path))
    out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    ratio = (result["peak"] - result["before"]) * 1024 / path.stat().st_size
    assert 0.9 < ratio <= 1.1, f"peak RSS while loading is {ratio:.2f}x the file size"
