"""Engines that run a predict job: `local` (this process, `job.PredictJob`) and `ray` (work units spread over Ray
actors, `ray_engine.py`; the units themselves are engine-neutral, `units.py`). Light on purpose (no torch, no
ray): the CLI's parser imports the names."""

from __future__ import annotations

ENGINES = ("local", "ray")
