"""``tfparity positions``: explicit position_ids and permutation equivariance."""

from __future__ import annotations

import argparse

from .common import (
    add_input_arguments,
    add_report_arguments,
    finish,
    frameworks_frozen,
    input_options,
    tolerance,
)
from .naming import add_model_naming

TOP_LEVEL = ("scenarios", "equivariant", "explicit_positions_match")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "positions",
        help="explicit position_ids and permutation equivariance (s1..s4 scenarios)",
        description="Run with explicit position_ids: s1 baseline, s2 positions permuted, "
        "s3 tokens permuted, s4 both; compare every pair after un-permuting. An absolute-"
        "position encoder must give s1 == s4. Also checks position_ids = default positions "
        "equals passing none.",
    )
    add_model_naming(p, "positions")
    add_input_arguments(p)
    p.add_argument(
        "--permutations", type=int, default=10, metavar="N", help="random permutations (default 10)"
    )
    add_report_arguments(p)
    p.set_defaults(func=_run_positions)


def _run_positions(args: argparse.Namespace) -> int:
    from ..api import load_model
    from ..checks.positions import PositionsOptions, check_positions
    from ..inputs import make_batches
    from ..report.sections import render_positions

    options = PositionsOptions.from_arguments(
        permutations=args.permutations, seed=args.seed, tolerance=tolerance(args)
    )  # exit 2 before any framework import
    frameworks_frozen()
    model = load_model(args.model, allow_pickle=args.allow_pickle, head=args.head)
    batches = make_batches(model, input_options(args))
    report = check_positions(model, batches, options)
    print(render_positions(report))
    return finish(args, [report], TOP_LEVEL)
