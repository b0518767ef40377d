"""``tfparity backends``: one Keras 3 model on TensorFlow, JAX and PyTorch, layer by
layer, against a float64 run of the same model."""

from __future__ import annotations

import argparse

from ..compare.quantisation import MODES
from ..errors import TfparityError
from .common import (
    add_html_plot_arguments,
    add_json_argument,
    check_plot_argument,
    finish,
    given_texts,
    non_negative_int,
    tolerance_value,
)
from .naming import add_model_naming

TOP_LEVEL = ("backends", "referee")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "backends",
        help="one Keras 3 model on each Keras backend, layer by layer, float64 referee",
        description="MODEL: a Keras 3 .keras file (a model of your own; its custom layers "
        "registered by --import), keras-hub:<SPEC> (a checkpoint converted by keras-hub, "
        "also judged against Hugging Face PyTorch at float64) or module:function (a "
        "Python callable returning a built Keras 3 model). Run it on each Keras backend "
        "(TensorFlow, JAX, PyTorch), each in its own process, on the same weights, "
        "record every layer's output and judge each against a float64 run of the same "
        "model; name the first layer where a backend parts from the rest, or where every "
        "backend parts from the referee.",
    )
    add_model_naming(p, "backends")
    p.add_argument(
        "--backends",
        metavar="LIST",
        help="comma-separated: tensorflow,jax,torch (default: every one installed; one "
        "not installed is skipped with its pip command)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module that registers the model's custom layers, imported first in every "
        "backend's process (repeatable)",
    )
    group = p.add_argument_group("inputs (default: --random 2 --seq-len 8)")
    group.add_argument("--random", type=int, default=2, metavar="N", help="N seeded rows")
    group.add_argument("--seq-len", type=int, default=8, metavar="L", help="row length")
    group.add_argument("--seed", type=non_negative_int, default=0, help="seed (default 0)")
    group.add_argument("--inputs", metavar="FILE.npz", help="the inputs, one array per model input")
    group.add_argument(
        "--text",
        action="append",
        metavar="TEXT",
        help="keras-hub specs: a text to run through the checkpoint's tokenizer (repeatable)",
    )
    group.add_argument("--texts", metavar="FILE", help="keras-hub specs: one text per line")
    p.add_argument(
        "--referee-backend",
        choices=("tensorflow", "jax", "torch"),
        help="the backend that runs the float64 referee (default: tensorflow; Keras 3 "
        "computes some float64 ops at float32 on jax and torch, which are then refused)",
    )
    p.add_argument(
        "--ceiling",
        type=tolerance_value,
        help="the RMSE / RMS no float32 backend may exceed, even when every backend agrees "
        "(default 1e-4)",
    )
    p.add_argument(
        "--gradients",
        action="store_true",
        help="also judge each backend's gradients (w.r.t. every layer output and weight) of "
        "a scalar seeded by --seed against the float64 referee's, naming the first layer "
        "counted backwards",
    )
    p.add_argument(
        "--quantize",
        choices=MODES,
        help="quantise the model once with Keras's model.quantize (on TensorFlow) and check "
        "that every backend computes the same quantised model: the backends against each "
        "other at every layer, within the --ceiling, and apart from that each backend's "
        "output against the float model's float64 referee by the mode's budgets "
        "(docs/backends.md)",
    )
    p.add_argument(
        "--kl-budget",
        metavar="METRIC=VALUE,...",
        help="with --quantize (or a quantised .keras): the distribution budget on logits "
        "output, e.g. kl_mean=0.015,same_top1=0.95 (default: the mode's, docs/quantised.md)",
    )
    p.add_argument(
        "--jobs",
        type=_jobs,
        metavar="N",
        help="at most N backend processes at once (default: every one, started before the "
        "model is prepared; 1: one after another)",
    )
    add_json_argument(p)
    add_html_plot_arguments(p.add_argument_group("reports"))
    p.set_defaults(func=_run_backends)


def _jobs(value: str) -> int:
    """--jobs N: a whole number of processes, at least 1."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes a whole number of at least 1, not {value}")
    return n


def _run_backends(args: argparse.Namespace) -> int:
    from ..cross_backend import backends
    from ..report import render

    if args.random < 1 or args.seq_len < 1:
        raise TfparityError("--random and --seq-len must be at least 1.")
    check_plot_argument(args)

    asked = None if args.backends is None else [b.strip() for b in args.backends.split(",")]
    texts = given_texts(args)
    report = backends(
        args.model,
        backends=asked,
        imports=args.imports,
        random=args.random,
        seq_len=args.seq_len,
        inputs=args.inputs,
        seed=args.seed,
        referee_backend=args.referee_backend,
        ceiling=args.ceiling,
        gradients=args.gradients,
        pt=args.pt,
        texts=texts,
        quantize=args.quantize,
        kl_budget=args.kl_budget,
        jobs=args.jobs,
    )
    print(render(report))
    return finish(args, [report], TOP_LEVEL)
