"""The ``tfparity`` command: parse arguments, run checks, render, exit 0/1/2.

Imports of TensorFlow and torch happen inside the command functions, so ``--help``
and argument errors stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

from ._version import __version__
from .errors import TfparityError

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on usage errors already; keep its message to one paragraph."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"tfparity: error: {message}\n")


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="?",
        default="minilm",
        metavar="MODEL",
        help="a directory with config.json and weights, a cached Hugging Face "
        "id, 'minilm' (default: a real pretrained BERT), or 'tiny:<arch>' "
        "(bert, roberta, gpt2, albert, distilbert, electra, xlnet, t5)",
    )
    parser.add_argument(
        "--allow-pickle",
        action="store_true",
        help="allow loading pickled PyTorch checkpoints (pytorch_model.bin) "
        "with torch.load(weights_only=True)",
    )


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("inputs (default: a few built-in sentences)")
    group.add_argument("--text", action="append", metavar="TEXT", help="a text to run (repeatable)")
    group.add_argument("--texts", metavar="FILE", help="a file with one text per line")
    group.add_argument(
        "--random",
        type=int,
        metavar="N",
        help="N seeded random sequences of mixed lengths instead of texts",
    )
    group.add_argument(
        "--seq-len", type=int, default=32, metavar="L", help="longest random sequence (default 32)"
    )
    group.add_argument("--batch-size", type=int, default=8, help="sequences per batch (default 8)")
    group.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    group.add_argument(
        "--padding-side",
        choices=("right", "left"),
        help="where padding goes (default: the tokenizer's)",
    )
    group.add_argument(
        "--truncate",
        action="store_true",
        help="cut texts longer than the model's maximum instead of failing",
    )


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the report as JSON to PATH")
    parser.add_argument("--atol", type=float, help="absolute tolerance (default: by dtype)")
    parser.add_argument("--rtol", type=float, help="relative tolerance (default: by dtype)")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print every failing tensor's full message"
    )


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
    for register in _COMMANDS:
        register(sub)
    return parser


def _register_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="inputs_embeds vs input_ids parity (the main job)",
        description="Run the TF model with input_ids and with word embeddings gathered on "
        "the Keras side as inputs_embeds; compare every output and hidden state.",
    )
    add_model_argument(p)
    add_input_arguments(p)
    add_report_arguments(p)
    p.set_defaults(func=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    from .api import check_embeds, load_model
    from .report.jsonio import write_json
    from .report.text import render

    start = time.perf_counter()
    model = load_model(args.model, allow_pickle=args.allow_pickle)
    report = check_embeds(model, inputs=input_options(args), tolerance=_tolerance(args))
    report.details["seconds"] = round(time.perf_counter() - start, 2)
    print(render(report, verbose=args.verbose))
    if args.json:
        write_json([report], args.json)
    return EXIT_PASS if report.passed else EXIT_FAIL


def input_options(args: argparse.Namespace):
    """The InputOptions that the input arguments describe."""
    from .inputs import InputOptions, read_texts_file

    texts: list[str] | None = None
    if args.text is not None or args.texts:
        texts = list(args.text or []) + (read_texts_file(args.texts) if args.texts else [])
    if texts is not None and args.random is not None:
        raise TfparityError("Give texts (--text/--texts) or --random N, not both.")
    return InputOptions(
        texts=tuple(texts) if texts is not None else None,
        random=args.random,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        seed=args.seed,
        padding_side=args.padding_side,
        truncate=args.truncate,
    )


def _tolerance(args: argparse.Namespace):
    if args.atol is None and args.rtol is None:
        return None
    from .compare import Tolerance

    if (args.atol or 0) < 0 or (args.rtol or 0) < 0:
        raise TfparityError("--atol and --rtol must not be negative.")
    return Tolerance(atol=args.atol or 0.0, rtol=args.rtol or 0.0)


_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_register_check]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.debug:
        os.environ["TFPARITY_DEBUG"] = "1"
    try:
        return args.func(args)
    except TfparityError as exc:
        if args.debug:
            raise
        print(f"tfparity: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("tfparity: interrupted", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # an unexpected failure is still not a PASS
        if args.debug:
            raise
        text = " ".join(str(exc).split())[:500]
        print(
            f"tfparity: error: {type(exc).__name__}: {text} (run with --debug for the "
            "traceback; please report it)",
            file=sys.stderr,
        )
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
