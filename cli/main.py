"""`sapiens2` command line: predict | finalize | check | download | convert | info — argument parsing and printing; the work is
core.studio's.

Every deliberate error (a `Sapiens2Error`: bad input, missing checkpoint, offline, wrong task) prints one line
with the CLI's advice and exits non-zero; anything else is a bug: its traceback is printed with where to report it.
`--debug` shows the traceback of deliberate errors too. Heavy imports (torch, the models) happen inside the
commands so that `sapiens2 --help` is instant.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback
from collections.abc import Sequence

from ..core.errors import BUG_REPORT_URL, Sapiens2Error
from .arguments import UsageError, build_parser

EXIT_ERROR = 1
EXIT_USAGE = 2


def cmd_download(args: argparse.Namespace) -> int:
    from ..core.checkpoints import hub

    ref = hub.checkpoint_ref(args.task, args.size, args.checkpoint_dir)
    print(f"downloading {ref.filename} from {ref.page} …", file=sys.stderr)
    path = hub.download_checkpoint(args.task, args.size, args.checkpoint_dir, force=args.force)
    print(path)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from pathlib import Path

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    main_thread = threading.current_thread() is threading.main_thread()
    # A scheduler's cancel ends the run the way Ctrl-C does: the frame being committed finishes (the engine holds
    # both signals during a commit), the folder's lock is released, a sequence stays marked partial.
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        return _command(args)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _command(args: argparse.Namespace) -> int:
    try:
        if args.command == "predict":
            from .predict import run_predict

            return run_predict(args)
        if args.command == "finalize":
            from .finalize import run_finalize

            return run_finalize(args)
        if args.command == "check":
            from .check import run_check

            return run_check(args)
        if args.command == "download":
            return cmd_download(args)
        if args.command == "convert":
            return cmd_convert(args)
        return cmd_info(args)
    except KeyboardInterrupt:
        print("sapiens2: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("sapiens2: terminated", file=sys.stderr)
        return 143
    except Sapiens2Error as exc:
        if args.debug:
            raise
        print(f"sapiens2 {args.command}: error: {exc.text('cli')}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR
    except Exception:
        traceback.print_exc()
        print(
            f"sapiens2 {args.command}: internal error: this is a bug in sapiens2-studio, not in your input. Please "
            f"report it with the traceback above at {BUG_REPORT_URL}",
            file=sys.stderr,
        )
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
