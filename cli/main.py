"""`sapiens2` command line: predict | finalize | check | download | convert | info | export | selftest — argument parsing and printing; the work is
core.studio's.

Every deliberate error (a `Sapiens2Error`: bad input, missing checkpoint, offline, wrong task) prints one line
with the CLI's advice and exits non-zero; anything else is a bug: its traceback is printed with where to report it.
`--debug` shows the traceback of deliberate errors too. Heavy imports (torch, the models) happen inside the
commands so that `sapiens2 --help` is instant.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import signal
import sys
import threading
import traceback
from collections.abc import Sequence

from ..core.errors import BUG_REPORT_URL, Sapiens2Error
from .arguments import UsageError, build_parser
from .progress import Events

# Exit statuses, the same for every command and stable (docs/cli.md "Exit status"): scripts and the Blender add-on
# branch on them. 3 is `check`'s "a check warns".
EXIT_OK = 0
EXIT_ERROR = 1  # an expected error (the message says what to fix), some inputs failed, or a bug (traceback)
EXIT_USAGE = 2  # the command line is wrong
EXIT_CHECKPOINT = (
    4  # a checkpoint is missing (download needed / not allowed / offline) or not the model it must be
)
EXIT_OUT_OF_MEMORY = 5  # even one image per forward pass does not fit the device
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT)
EXIT_TERMINATED = 143  # SIGTERM (a scheduler's cancel; SIGBREAK on Windows)


def cmd_download(args: argparse.Namespace) -> int:
    from ..core import catalogue
    from ..core.checkpoints import hub

    size = args.size or catalogue.default_size(args.task)  # each task's own default, as predict uses
    ref = hub.checkpoint_ref(args.task, size, args.checkpoint_dir)
    if args.force or not hub.local_checkpoint_path(args.task, size, args.checkpoint_dir).is_file():
        print(f"downloading {ref.filename} from {ref.page} …", file=sys.stderr)
    try:
        path = hub.download_checkpoint(args.task, size, args.checkpoint_dir, force=args.force)
    except hub.HubError as exc:  # the library's hint names predict's --checkpoint, not a download flag
        install = (
            'install it with pip install "sapiens2-studio[hub]" and '
            if "needs the optional 'huggingface_hub'" in exc.message
            else ""
        )
        exc.hints["cli"] = (
            f"{install}run this again when the Hub is reachable (it resumes), or save the file there by hand; "
            "predict and check find it without a download"
        )
        raise
    print(path)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .arguments import load_task_plugins

    load_task_plugins(args)  # a plug-in task's checkpoint is described once its task is trusted

    if args.checkpoint is None:
        from .engine_info import run_install_info

        return run_install_info(args)

    from ..core import load_model

    path = Path(args.checkpoint)
    model = load_model(path, device="meta")
    size = path.stat().st_size
    print(f"{path.name}: {size / 1e9:.2f} GB" if size >= 1e8 else f"{path.name}: {size / 1e6:.2f} MB")
    print(model.spec.describe())
    if args.sha256:
        from ..core.checkpoints.hub import sha256_file

        print(f"  sha256: {sha256_file(path)}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    from ..core.checkpoints import convert_to_safetensors

    print(convert_to_safetensors(args.source, args.destination))
    return 0


class Terminated(BaseException):
    """SIGTERM (a job scheduler cancelling the run), raised where Python checks signals, like Ctrl-C."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _wants_json(argv: Sequence[str]) -> bool:
    argv = list(argv)
    return "--progress=json" in argv or any(
        a == "--progress" and b == "json" for a, b in itertools.pairwise(argv)
    )


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """argparse's own errors exit 2 with a message on stderr; a `--progress json` caller also gets them as an
    `error` event, so it never has to scrape stderr."""
    raw = sys.argv[1:] if argv is None else list(argv)
    if not _wants_json(raw):
        return parser.parse_args(argv)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return parser.parse_args(argv)
    except SystemExit as exc:
        text = captured.getvalue()
        sys.stderr.write(text)
        if exc.code not in (0, None):
            lines = [line for line in text.splitlines() if line.strip()]
            message = lines[-1].split(": error: ", 1)[-1] if lines else "invalid command line"
            Events(sys.stdout).emit(
                "error",
                kind="usage",
                message=message,
                hint="see sapiens2 predict --help",
                exit_code=EXIT_USAGE,
            )
        raise


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    # `--progress json`: the events own stdout; anything else printed there (a library's print) goes to stderr
    events = Events(sys.stdout if getattr(args, "progress", None) == "json" else None)
    main_thread = threading.current_thread() is threading.main_thread()
    # A scheduler's cancel ends the run the way Ctrl-C does: the frame being committed finishes (the engine holds
    # both signals during a commit), the folder's lock is released, a sequence stays marked partial. Windows has
    # no SIGTERM to send: a caller's CTRL_BREAK_EVENT (SIGBREAK) means the same there.
    stops = [signal.SIGTERM] + ([signal.SIGBREAK] if hasattr(signal, "SIGBREAK") else [])
    previous = {s: signal.signal(s, _terminate) for s in stops} if main_thread else {}
    try:
        with contextlib.redirect_stdout(sys.stderr) if events.enabled else contextlib.nullcontext():
            return _command(args, events)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _exit_code(exc: Sapiens2Error) -> tuple[int, str]:
    """(exit status, the error event's `kind`) of an expected error."""
    from ..core.checkpoints.errors import CheckpointError
    from ..core.checkpoints.hub import HubError
    from ..core.studio.errors import OutOfMemoryError

    if isinstance(exc, UsageError):
        return EXIT_USAGE, "usage"
    if isinstance(exc, (HubError, CheckpointError)):
        return EXIT_CHECKPOINT, "checkpoint"
    if isinstance(exc, OutOfMemoryError):
        return EXIT_OUT_OF_MEMORY, "out_of_memory"
    return EXIT_ERROR, "error"


def _command(args: argparse.Namespace, events: Events | None = None) -> int:
    events = events or Events(None)
    try:
        if args.command == "predict":
            from .predict import run_predict

            return run_predict(args, events)
        if args.command == "finalize":
            from .finalize import run_finalize

            return run_finalize(args)
        if args.command == "check":
            from .check import run_check

            return run_check(args)
        if args.command == "export":
            from .export import run_export

            return run_export(args)
        if args.command == "selftest":
            from .selftest import run_selftest

            return run_selftest(args)
        if args.command == "download":
            return cmd_download(args)
        if args.command == "convert":
            return cmd_convert(args)
        return cmd_info(args)
    except KeyboardInterrupt:
        print("sapiens2: interrupted", file=sys.stderr)
        events.emit(
            "error", kind="interrupted", message="interrupted", hint=_RESUME, exit_code=EXIT_INTERRUPTED
        )
        return EXIT_INTERRUPTED
    except Terminated:
        print("sapiens2: terminated", file=sys.stderr)
        events.emit("error", kind="terminated", message="terminated", hint=_RESUME, exit_code=EXIT_TERMINATED)
        return EXIT_TERMINATED
    except Sapiens2Error as exc:
        code, kind = _exit_code(exc)
        events.emit("error", kind=kind, message=exc.message, hint=exc.hints.get("cli", ""), exit_code=code)
        if args.debug:
            raise
        print(f"sapiens2 {args.command}: error: {exc.text('cli')}", file=sys.stderr)
        return code
    except Exception as exc:
        traceback.print_exc()
        print(
            f"sapiens2 {args.command}: internal error: this is a bug in sapiens2-studio, not in your input. Please "
            f"report it with the traceback above at {BUG_REPORT_URL}",
            file=sys.stderr,
        )
        events.emit(
            "error",
            kind="internal",
            message=f"internal error ({type(exc).__name__}: {exc})",
            hint=f"this is a bug in sapiens2-studio; please report it with the traceback at {BUG_REPORT_URL}",
            exit_code=EXIT_ERROR,
        )
        return EXIT_ERROR


_RESUME = "the frames committed so far are kept (a sequence stays marked partial); run again with --skip-existing to finish"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
