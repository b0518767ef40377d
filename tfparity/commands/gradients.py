"""``tfparity gradients``: gradients through inputs_embeds, and TF's against PyTorch's."""

from __future__ import annotations

import argparse
import time

from .common import (
    add_input_arguments,
    add_report_arguments,
    finish,
    frameworks_frozen,
    input_options,
    pt_config,
    tolerance,
)
from .naming import add_model_naming


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "gradients",
        help="gradients through inputs_embeds (ids vs embeds) and TF vs PyTorch",
        description="Differentiate a seeded scalar (the head's loss on seeded labels, or a "
        "seeded projection of a base model's last hidden state) with respect to "
        "inputs_embeds, every hidden state and every weight. Compare the input_ids path "
        "with the inputs_embeds path fed the Keras-side gather (the word-embedding "
        "matrix's gradient must match), and TF with PyTorch (float64 referee). The first "
        "divergent layer is found walking backwards from the hidden states' gradients.",
    )
    add_model_naming(p, "gradients")
    p.add_argument(
        "--no-pt", action="store_true", help="skip PyTorch: the ids-vs-embeds comparison only"
    )
    p.add_argument(
        "--frozen",
        metavar="PATTERN",
        action="append",
        default=[],
        help="a PyTorch weight the port freezes on purpose (a glob or substring of the "
        "names the report prints; repeatable): left out of the TF-vs-PyTorch comparison "
        "and listed. Without it, a weight PyTorch differentiates and TF does not fails",
    )
    add_input_arguments(p)
    add_report_arguments(p)
    p.set_defaults(func=_run_gradients)


def _run_gradients(args: argparse.Namespace) -> int:
    from ..api import gradients
    from ..checks.gradients.check import GradientsOptions
    from ..errors import TfparityError
    from ..report.gradients import render_gradients

    if args.no_pt and args.pt:
        raise TfparityError("Give --pt or --no-pt, not both.")
    changes = pt_config(args)
    GradientsOptions.from_arguments(  # exit 2 before any framework import
        seed=args.seed,
        frozen=args.frozen,
        with_reference=not args.no_pt,
        pt_config=changes,
        backend=args.backend,
    )
    inputs = input_options(args)
    frameworks_frozen(torch=not args.no_pt)
    start = time.perf_counter()
    reports = gradients(
        args.model,
        pt=False if args.no_pt else args.pt,
        inputs=inputs,
        tolerance=tolerance(args),
        seed=args.seed,
        allow_pickle=args.allow_pickle,
        head=args.head,
        pt_config=changes,
        frozen=args.frozen,
        backend=args.backend,
    )
    for report in reports:
        print(render_gradients(report, verbose=args.verbose))
        print()
    print(f"gradients wall time: {time.perf_counter() - start:.1f} s")
    return finish(args, reports)
