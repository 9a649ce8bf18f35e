"""The CLI's JSON event stream (docs/cli.md, "Progress stream") as progress the UI shows. No ``bpy`` here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

EXIT_MEANINGS = {
    0: "finished",
    1: "failed",
    2: "wrong command line",
    4: "checkpoint missing or unusable",
    5: "out of memory",
    130: "stopped",
    143: "stopped",
}


def parse_line(line: str) -> dict[str, Any] | None:
    """One event, or None for a line that is not one (an engine too old for `--progress json`, a stray print)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("event"), str) else None


def log_line(event: dict[str, Any]) -> str | None:
    """One event as a line of a log (background mode, a farm job's output); None for those a log skips."""
    kind = event.get("event")
    if kind == "frame":
        total = event.get("total")
        return f"Sapiens2: {event.get('done')}{f'/{total}' if total else ''} frames — {event.get('name')}"
    if kind == "model_loaded":
        return (
            f"Sapiens2: {event.get('task')} model loaded ({event.get('checkpoint')}, {event.get('device')})"
        )
    if kind == "warning":
        return f"Sapiens2: warning: {event.get('message')}"
    return None


@dataclass
class RunProgress:
    """Everything the events said so far: counts, the current frame, warnings, and how the run ended."""

    total: int | None = None
    done: int = 0
    current: str = ""
    out: str = ""
    run_id: str = ""
    models: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    started: bool = False
    finished: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        kind = event.get("event")
        if kind == "start":
            self.started = True
            self.total = event.get("total")
            self.out = str(event.get("out") or "")
            self.run_id = str(event.get("run_id") or "")
        elif kind == "model_loaded":
            self.models.append(f"{event.get('task')} ({event.get('checkpoint')}, {event.get('device')})")
        elif kind == "frame":
            self.done = int(event.get("done") or self.done + 1)
            self.current = str(event.get("name") or "")
            self.frames.append(event)
        elif kind == "warning":
            self.warnings.append(str(event.get("message") or ""))
        elif kind == "finished":
            self.finished = event
        elif kind == "error":
            self.error = event

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0

    def status_text(self) -> str:
        if self.error is not None:
            return f"Sapiens2: {self.error.get('kind')}: {self.error.get('message')}"
        if self.finished is not None:
            return f"Sapiens2: {self.finished.get('written')} written, {self.finished.get('kept')} kept"
        if not self.started:
            return "Sapiens2: starting the engine…"
        if self.done == 0:
            return "Sapiens2: loading models…"
        total = f"/{self.total}" if self.total else ""
        return f"Sapiens2: {self.done}{total} frames — {self.current}"

    def results(self) -> list[str]:
        """The bundle files to import: each input's frame JSON or sequence index that exists."""
        if self.finished is None:
            return []
        return [r["path"] for r in self.finished.get("results") or [] if r.get("exists")]
