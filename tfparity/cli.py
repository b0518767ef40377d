"""The ``tfparity`` command: parse arguments, run checks, render, exit 0/1/2.

Imports of TensorFlow and torch happen inside the command functions, so ``--help``
and argument errors stay fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from ._version import __version__
from .commands.common import EXIT_USAGE, check_inputs_early, check_output_paths
from .commands.naming import settle_model_naming
from .errors import TfparityError


class _Formatter(argparse.HelpFormatter):
    """argparse's, without breaking names at their hyphens (``deberta-v2``, ``masked-lm``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message to one paragraph."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"tfparity: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tfparity",
        description="Check numerical parity of TensorFlow/Keras transformer models.",
        epilog="Exit codes: 0 all checks passed, 1 a parity check failed, 2 bad usage or input.",
    )
    parser.add_argument("--version", action="version", version=f"tfparity {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks and TensorFlow/transformers logs"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"tfparity.commands.{name}").register(sub)
    return parser


# Each subcommand lives in tfparity/commands/<name>.py and exposes register(sub).
COMMANDS = (
    "check",
    "crosscheck",
    "devices",
    "modes",
    "diagnose",
    "embeddings",
    "positions",
    "generate",
    "gradients",
    "sweep",
    "backends",
    "runtimes",
    "merge",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.debug:
        os.environ["TFPARITY_DEBUG"] = "1"
    try:
        settle_model_naming(args)  # MODEL/--tf/--pt and the options a command refuses
        check_output_paths(args)
        check_inputs_early(args)  # what the arguments alone decide: before any import
        if getattr(args, "json", None) == "-":
            from .report.jsonio import json_on_stdout

            with json_on_stdout():  # stdout holds the JSON only; the text goes to stderr
                return args.func(args)
        return args.func(args)
    except TfparityError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"tfparity: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tfparity: interrupted", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # an unexpected failure is still not a PASS
        if args.debug:
            traceback.print_exc()
        text = " ".join(str(exc).split())[:500]
        print(
            f"tfparity: error: {type(exc).__name__}: {text} (run with --debug for the "
            "traceback; please report it)",
            file=sys.stderr,
        )
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
