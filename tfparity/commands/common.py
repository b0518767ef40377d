"""Arguments and helpers shared by subcommands (no TF import here)."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Sequence

from ..checks import DEFAULT_REFEREE_RUNS, REFEREE_RUNS
from ..errors import TfparityError

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def frameworks_frozen(torch: bool = False) -> None:
    """Import TensorFlow, tf-keras and transformers (and torch) now, then freeze every
    object alive (``gc.freeze``): the command's process keeps them to its end, and each
    full garbage collection would otherwise rescan them all (a cross-check triggers
    several). The CLI's alone: a library must
    not freeze its caller's objects. Call it after the cheap argument checks (exit 2 stays
    fast) and before loading a model."""
    import sys

    from ..adapters.runtime.imports import import_torch, import_transformers
    from ..sweep.progress import Progress

    # On a terminal, say what the next silent seconds are (the sweep's stage line); a
    # log (CI, a pipe) keeps stderr for the one-paragraph error alone.
    say = Progress(total=0, mode="lines" if sys.stderr.isatty() else "none", label="tfparity")
    say.stage(f"starting TensorFlow{' and PyTorch' if torch else ''}, then loading the model")
    import_transformers()
    if torch:
        import_torch()
    gc.freeze()


def add_referee_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--referee",
        choices=REFEREE_RUNS,
        default=DEFAULT_REFEREE_RUNS,
        help="the cross-check's float64 PyTorch pass: lazy (default) runs it batch by "
        "batch until the batches left cannot change a verdict (an exact bound: the "
        "verdicts are full's), full on every batch (every rmse/fp64 figure over all of "
        "them)",
    )


def pt_config(args: argparse.Namespace) -> dict | None:
    """``--pt-config`` items as a dict (None: none given); exit 2 on a malformed one, or
    with --save-outputs/--load-outputs (a stored reference is the checkpoint's own)."""
    from ..adapters.reference.config import parse_items

    changes = parse_items(args.pt_config)
    stored = getattr(args, "save_outputs", None) or getattr(args, "load_outputs", None)
    if changes and stored:
        raise TfparityError(
            "--pt-config builds a live reference; --save-outputs/--load-outputs hold the "
            "checkpoint's own outputs: give one or the other."
        )
    return changes


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
    group.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for random inputs (default 0)"
    )
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


def tolerance_value(text: str) -> float:
    """argparse ``type=`` for --atol/--rtol: a finite number >= 0 (``nan`` would fail
    identical tensors, ``inf`` would pass anything; argparse names the flag)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if value != value or value in (float("inf"), float("-inf")) or value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number >= 0")
    return value


def non_negative_int(text: str) -> int:
    """argparse ``type=`` for --seed (numpy refuses negative seeds deep in a run)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is negative; give an integer >= 0")
    return value


def non_empty(text: str) -> str:
    """argparse ``type=`` for --device/--devices: an empty name is a typo, not a default."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; name a device (cpu, gpu:0, gpu, all)")
    return text


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """--json PATH: every command that writes one report file takes it the same way."""
    parser.add_argument(
        "--json", metavar="PATH", help="write the report as JSON to PATH ('-': stdout)"
    )


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    add_json_argument(parser)
    add_tolerance_arguments(parser)
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print every failing tensor's full message"
    )


def input_options(args: argparse.Namespace):
    """The InputOptions that the input arguments describe, built once per command:
    :func:`check_inputs_early` builds them (and so validates them) before any framework
    import, and the command's later call returns the same object."""
    from ..inputs import InputOptions

    settled = getattr(args, "settled_inputs", None)
    if settled is not None:
        return settled
    texts = given_texts(args)
    if texts is not None and args.random is not None:
        raise TfparityError("Give texts (--text/--texts) or --random N, not both.")
    args.settled_inputs = InputOptions(
        texts=tuple(texts) if texts is not None else None,
        random=args.random,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        seed=args.seed,
        padding_side=args.padding_side,
        truncate=args.truncate,
    )
    return args.settled_inputs


def check_inputs_early(args: argparse.Namespace) -> None:
    """Validate the input arguments of a command that takes them (see
    :func:`add_input_arguments`) now, while only numpy is imported: an empty --text or
    --batch-size 0 exits 2 in well under a second instead of after TensorFlow loads."""
    if all(hasattr(args, name) for name in ("text", "texts", "random", "batch_size")):
        input_options(args)


def given_texts(args: argparse.Namespace) -> list[str] | None:
    """``--text`` values then ``--texts`` lines, in that order; None where neither."""
    from ..inputs import read_texts_file

    if args.text is None and not args.texts:
        return None
    return list(args.text or []) + (read_texts_file(args.texts) if args.texts else [])


def add_tolerance_arguments(parser: argparse.ArgumentParser) -> None:
    """--atol/--rtol; the rule for one alone is :func:`tfparity.orchestration.tolerance_from`."""
    parser.add_argument(
        "--atol",
        type=tolerance_value,
        help="fixed absolute tolerance (default: by dtype, or the cross-check's float64 "
        "referee); given alone, rtol keeps its dtype default (float32: 1.3e-6)",
    )
    parser.add_argument(
        "--rtol",
        type=tolerance_value,
        help="fixed relative tolerance; given alone, atol keeps its dtype default (float32: 1e-5)",
    )


def tolerance(args: argparse.Namespace):
    """The fixed Tolerance that --atol/--rtol ask for (None: dtype defaults/referee),
    for the dtype that --precision computes in."""
    from ..orchestration import precision_dtype, tolerance_from

    dtype = precision_dtype(getattr(args, "precision", "fp32"))
    return tolerance_from(args.atol, args.rtol, dtype)


def add_execution_arguments(
    parser: argparse.ArgumentParser, *, default: str = "auto", one_device: bool = False
) -> None:
    """--device, --eager/--graph/--xla, --precision: how and where a check runs (any
    check can take them). Without --eager/--graph/--xla the choice is ``default``:
    ``auto`` (see ExecutionOptions.settle: eager for a few batches, graph when tracing
    pays off) or ``graph`` (the sweep: many batches of a few bucket shapes).
    ``one_device``: the command runs on one device (see :func:`one_execution`)."""
    eager_default = (
        "default: eager for fewer than 8 batches, a tf.function traced once per path from 8 on"
        if default == "auto"
        else "default: a tf.function traced once per bucket shape and path"
    )
    parser.set_defaults(execution_default=default)
    group = parser.add_argument_group("execution")
    group.add_argument(
        "--device",
        type=non_empty,
        metavar="DEVICE",
        help="cpu or gpu:N (default: TensorFlow's own placement)"
        if one_device
        else "cpu, gpu:N, gpu (every GPU) or all (CPU and every GPU); one report per device "
        "(default: TensorFlow's own placement)",
    )
    run = group.add_mutually_exclusive_group()
    run.add_argument("--eager", action="store_true", help=f"run TF eagerly ({eager_default})")
    run.add_argument("--graph", action="store_true", help="run TF as a tf.function (graph)")
    run.add_argument(
        "--xla", action="store_true", help="run compiled with tf.function(jit_compile=True)"
    )
    group.add_argument(
        "--precision",
        choices=("fp32", "fp16", "bf16"),
        default="fp32",
        help="fp32 (default), or a tf-keras mixed_float16 / mixed_bfloat16 policy",
    )


def execution_options(args: argparse.Namespace) -> list:
    """One ExecutionOptions per device that --device names (TF is imported only when a
    device spec must be resolved)."""
    from ..adapters.runtime.execution_options import ExecutionOptions, expand_devices

    chosen = args.xla or args.graph or args.eager
    default = getattr(args, "execution_default", "auto")
    options = ExecutionOptions(
        xla=args.xla,
        graph=args.graph or (not chosen and default == "graph"),
        precision=args.precision,
        auto=not chosen and default == "auto",
    )
    return expand_devices(options, args.device)


def one_execution(args: argparse.Namespace, what: str):
    """The single ExecutionOptions of a command that runs on one device (``what``)."""
    executions = execution_options(args)
    if len(executions) != 1:
        raise TfparityError(
            f"--device {args.device} names {len(executions)} devices; {what} runs on one: "
            "name one (cpu, gpu:0, ...)."
        )
    return executions[0]


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """--html, --plot (reports people look at) and --save-outputs/--load-outputs
    (golden PyTorch outputs, so CI can cross-check without torch)."""
    group = parser.add_argument_group("reports and golden outputs")
    add_html_plot_arguments(group)
    group.add_argument(
        "--save-outputs",
        metavar="PATH.npz",
        help="store PyTorch's fp32 and fp64 outputs for these inputs (golden reference)",
    )
    group.add_argument(
        "--load-outputs",
        metavar="PATH.npz",
        help="cross-check against outputs stored with --save-outputs (no PyTorch needed)",
    )


def add_html_plot_arguments(group: argparse._ActionsContainer) -> None:
    """--html and --plot: the reports people look at (every command that has a
    per-layer table takes both)."""
    group.add_argument(
        "--html",
        metavar="PATH",
        help="write a self-contained HTML report (tables and the per-layer plot)",
    )
    group.add_argument(
        "--plot",
        metavar="PATH",
        help="write the per-layer divergence plot; its extension names the format: .png, "
        ".svg or .pdf (needs matplotlib: tfparity[plot])",
    )


def check_plot_argument(args: argparse.Namespace) -> None:
    """--plot with an extension it cannot write, or without matplotlib: exit 2 before
    any model loads."""
    if args.plot:
        from ..report.plot import import_matplotlib, plot_format

        plot_format(args.plot)
        import_matplotlib()


# Arguments that name a file a command writes: checked before any model loads, so that
# a typo in a directory is not found only after a whole run.
OUTPUT_FILES = {
    "json": "--json",
    "html": "--html",
    "plot": "--plot",
    "save_outputs": "--save-outputs",
}


def check_output_paths(args: argparse.Namespace) -> None:
    """Refuse an output file that cannot be written: its directory missing or not
    writable, or the path itself a directory (``--json -`` is stdout)."""
    import os
    from pathlib import Path

    for dest, flag in OUTPUT_FILES.items():
        value = getattr(args, dest, None)
        if not value or value == "-":
            continue
        path = Path(value)
        folder = path.parent if str(path.parent) else Path(".")
        if path.is_dir():
            raise TfparityError(f"{flag} {value} is a directory; give a file path.")
        if not folder.is_dir():
            raise TfparityError(f"{flag} {value}: the directory {folder} does not exist.")
        if not os.access(folder, os.W_OK):
            raise TfparityError(f"{flag} {value}: the directory {folder} is not writable.")


def check_output_arguments(args: argparse.Namespace) -> None:
    """Usage errors of the output arguments, raised before any model loads."""
    if args.save_outputs and args.load_outputs:
        raise TfparityError("Give --save-outputs or --load-outputs, not both.")
    given = "--save-outputs" if args.save_outputs else "--load-outputs" if args.load_outputs else ""
    if given and getattr(args, "precision", "fp32") != "fp32":
        raise TfparityError(f"{given} holds one float32 PyTorch run: use it with --precision fp32.")
    check_plot_argument(args)


def golden_reference(args: argparse.Namespace, batches, pt_spec: str, decoders: bool = False):
    """The PyTorch side as a :class:`StoredReference`: read from --load-outputs, or run
    once and written to --save-outputs; None when neither is given (use the live model)."""
    from ..adapters.reference.stored import StoredReference, capture

    if args.load_outputs:
        return StoredReference.load(args.load_outputs, batches)
    if not args.save_outputs:
        return None
    from ..golden import save_reference
    from ..orchestration import reference_for

    pt_model = reference_for(pt_spec, allow_pickle=args.allow_pickle, decoders=decoders)
    reference = capture(pt_model, batches, model=pt_spec)
    save_reference(args.save_outputs, reference.golden)
    print(f"saved PyTorch's outputs for {len(batches)} batch(es) to {args.save_outputs}")
    return reference


def write_outputs(args: argparse.Namespace, reports: list) -> None:
    """Write --html and --plot for ``reports`` (the HTML says when it has no plot)."""
    if args.plot:
        from ..report.plot import write_plot

        write_plot(reports, args.plot)
    if args.html:
        from ..report.html import write_html
        from ..report.plot import INSTALL_HINT, matplotlib_available, plottable, png_bytes

        images, note = {}, None
        if matplotlib_available():
            images = {i: png_bytes([r]) for i, r in enumerate(reports) if plottable([r])}
        else:
            note = f"Plot not included: matplotlib is not installed ({INSTALL_HINT})."
        write_html(reports, args.html, images, note)


def finish(args: argparse.Namespace, reports: list, top_level: Sequence[str] = ()) -> int:
    """How a command ends once its reports are printed: --json (``top_level``: the
    details fields its contract also puts at the top of the file), then --html/--plot
    where the command takes them, then the exit code: 0 when every report passed, 1
    otherwise."""
    if args.json:
        from ..report.jsonio import write_json

        write_json(reports, args.json, top_level=top_level)
    if hasattr(args, "html"):
        write_outputs(args, reports)
    return EXIT_PASS if all(r.passed for r in reports) else EXIT_FAIL


def add_kl_budget_argument(p: argparse.ArgumentParser, logits: str, items: str) -> None:
    """``--kl-budget``, as ``crosscheck`` and ``generate`` take it: ``logits`` says whose
    distribution metrics it judges, ``items`` what the bootstrap resamples."""
    p.add_argument(
        "--kl-budget",
        metavar="METRIC=VALUE,...",
        help=f"judge {logits} distribution metrics (llama.cpp's: kl_mean, kl_median, "
        "kl_p99, kl_max, same_top1, rms_dp, ln_ppl_ratio), e.g. kl_mean=0.01,"
        f"same_top1=0.99, by a 95%% bootstrap interval over the {items}: FAIL where it "
        "lies wholly outside, INCONCLUSIVE (run more items) where it straddles "
        "(docs/quantised.md)",
    )
