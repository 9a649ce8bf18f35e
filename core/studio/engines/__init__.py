"""Engines that run a predict job: `local` (this process, `job.PredictJob`) and `ray` (frames split across Ray
actors: planned, refused with a clear message until it exists; docs/scale.md). Light on purpose (no torch, no
ray): the CLI's parser imports the names."""

from __future__ import annotations

ENGINES = ("local", "ray")
