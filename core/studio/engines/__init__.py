"""Engines that run a predict job: `local` (this process, `job.PredictJob`) and `ray` (work units spread over Ray
actors, `ray_engine.py`; the units themselves are engine-neutral, `units.py`); `dispatch.py` picks one, and is what
the CLI and the Python API call (`run_job`). Light on purpose (no torch, no ray): the CLI's parser and the job's
validation import these names. Layering: the engines sit above `job.py`, which never imports them."""

from __future__ import annotations

ENGINES = ("local", "ray")
INSTALL_HINTS = {
    "cli": "install it with: pip install 'sapiens2-studio[ray]' (or drop --engine ray)",
    "python": "install it with pip install 'sapiens2-studio[ray]', or use engine='local'",
}
