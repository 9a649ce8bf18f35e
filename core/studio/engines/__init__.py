"""Engines that run a predict job: `local` (this process, `job.PredictJob`) and `ray` (`ray_engine.py`, frames
split across Ray actors). Light on purpose (no torch, no ray): the CLI's parser imports the names."""

from __future__ import annotations

ENGINES = ("local", "ray")
