"""``tfparity check``: the main job (inputs_embeds vs input_ids parity)."""

from __future__ import annotations

import argparse
import time

from .common import (
    EXIT_FAIL,
    EXIT_PASS,
    add_execution_arguments,
    add_input_arguments,
    add_model_argument,
    add_report_arguments,
    execution_options,
    input_options,
    tolerance,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="inputs_embeds vs input_ids parity (the main job)",
        description="Run the TF model with input_ids and with word embeddings gathered on "
        "the Keras side as inputs_embeds; compare every output and hidden state.",
    )
    add_model_argument(p)
    add_input_arguments(p)
    add_report_arguments(p)
    add_execution_arguments(p)
    p.set_defaults(func=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    from ..adapters.execution import with_execution
    from ..api import check_embeds, load_model
    from ..report.jsonio import write_json
    from ..report.text import render

    start = time.perf_counter()
    executions = execution_options(args)  # a bad --device fails before the model loads
    model = load_model(args.model, allow_pickle=args.allow_pickle)
    reports = []
    for execution in executions:  # one report per device
        report = check_embeds(
            with_execution(model, execution), inputs=input_options(args), tolerance=tolerance(args)
        )
        report.details.update(execution.describe())
        report.details["seconds"] = round(time.perf_counter() - start, 2)
        print(render(report, verbose=args.verbose))
        reports.append(report)
    if args.json:
        write_json(reports, args.json)
    return EXIT_PASS if all(r.passed for r in reports) else EXIT_FAIL
