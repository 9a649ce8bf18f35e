"""One prediction as the CLI's command line (`sapiens2 predict … --progress json`). No ``bpy`` here: the operator
fills a `PredictRequest` from the panel and the preferences, the tests read back the same command."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

TASKS = ("pose", "seg", "normal", "albedo", "pointmap", "matting")


@dataclass(frozen=True)
class PredictRequest:
    inputs: Sequence[str]
    out: str
    tasks: Sequence[str]
    size: str = ""  # "": each task's own default (0.4b; matting 1b)
    device: str = "auto"
    checkpoint_dir: str = ""
    download: bool = False
    flip_test: bool = True
    skip_existing: bool = False
    previews: bool = False
    smooth: bool = False

    def validate(self) -> None:
        """The mistakes a user can make in the panel, in its words (the CLI checks everything else)."""
        if not self.tasks:
            raise ValueError("choose at least one task")
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown:
            raise ValueError(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}")
        if not self.inputs:
            raise ValueError("no input chosen")
        if not self.out:
            raise ValueError("no output folder")

    def argv(self) -> list[str]:
        """The arguments after the engine's command, ending with `--progress json`."""
        self.validate()
        args = ["predict", *self.inputs, "--out", self.out, "--tasks", ",".join(self.tasks)]
        if self.size:
            args += ["--size", self.size]
        if self.checkpoint_dir:
            args += ["--checkpoint-dir", self.checkpoint_dir]
        if not self.download:
            args.append("--no-download")
        args += ["--device", self.device or "auto"]
        if not self.flip_test:
            args.append("--no-flip-test")
        if self.skip_existing:
            args.append("--skip-existing")
        if not self.previews:
            args.append("--no-previews")
        if self.smooth:
            args.append("--smooth")
        return [*args, "--progress", "json"]
