"""``tfparity diagnose``: say what a user's inputs_embeds tensor is, and how to fix it."""

from __future__ import annotations

import argparse

from .common import EXIT_FAIL, EXIT_PASS, add_model_argument, add_report_arguments, tolerance

TOP_LEVEL = ("verdict", "candidates", "recovered_ids_match", "fix")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diagnose",
        help="identify what a saved inputs_embeds tensor is (e.g. hidden_states[0])",
        description="Compare EMBEDS with every stage the model's embedding layer computes "
        "from IDS (word, +position, +token type, after LayerNorm, scaled), recover the ids "
        "the embeddings encode, compare the outputs, and say how to fix the pipeline. "
        "Exit 0 only for raw word embeddings of IDS whose outputs match.",
    )
    add_model_argument(p)
    p.add_argument("--ids", required=True, metavar="IDS.npy", help="input ids [batch, seq]")
    p.add_argument(
        "--embeds", required=True, metavar="EMBEDS.npy", help="embeddings [batch, seq, hidden]"
    )
    p.add_argument("--attention-mask", metavar="MASK.npy", help="[batch, seq], 1 = real token")
    p.add_argument("--token-type-ids", metavar="TYPES.npy", help="[batch, seq]")
    p.add_argument("--position-ids", metavar="POSITIONS.npy", help="[batch, seq]")
    add_report_arguments(p)
    p.set_defaults(func=_run_diagnose)


def _run_diagnose(args: argparse.Namespace) -> int:
    from ..api import load_model
    from ..checks.diagnose import DiagnoseOptions, check_diagnose, read_inputs
    from ..report.jsonio import write_json
    from ..report.sections import render_diagnose

    inputs = read_inputs(  # bad files fail before the model loads
        args.ids,
        args.embeds,
        attention_mask=args.attention_mask,
        token_type_ids=args.token_type_ids,
        position_ids=args.position_ids,
    )
    model = load_model(args.model, allow_pickle=args.allow_pickle)
    report = check_diagnose(model, inputs, DiagnoseOptions(tolerance=tolerance(args)))
    print(render_diagnose(report))
    if args.json:
        write_json([report], args.json, top_level=TOP_LEVEL)
    return EXIT_PASS if report.passed else EXIT_FAIL
