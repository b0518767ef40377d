"""``tfparity embeddings``: tying of input/output embeddings, round trips, inversion risk."""

from __future__ import annotations

import argparse

from .common import (
    add_input_arguments,
    add_json_argument,
    finish,
    frameworks_frozen,
    input_options,
)
from .naming import add_model_naming

TOP_LEVEL = ("tied", "head_transform", "roundtrip", "noise")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "embeddings",
        help="embedding tying, LM-head transform, round-trip decoding and inversion risk",
        description="Report whether the LM head's output matrix is the input embedding "
        "variable itself, what the head does before it, how well tokens are recovered from "
        "their embeddings (dot, cosine, LM head), and under how much Gaussian noise.",
    )
    add_model_naming(p, "embeddings")
    add_input_arguments(p)
    p.add_argument(
        "--noise-scales",
        metavar="S,S,...",
        help="noise norms relative to the embedding norm (default 0,0.25,0.5,1,2,4,8)",
    )
    add_json_argument(p)
    p.set_defaults(func=_run_embeddings)


def _run_embeddings(args: argparse.Namespace) -> int:
    from ..api import load_model
    from ..checks.tying import TyingOptions, check_tying
    from ..inputs import make_batches
    from ..report.sections import render_embeddings

    # exit 2 before any framework import; an empty --noise-scales keeps the default
    options = TyingOptions.from_arguments(noise_scales=args.noise_scales or None, seed=args.seed)
    frameworks_frozen()
    model = load_model(args.model, allow_pickle=args.allow_pickle)
    # with its LM head where the checkpoint holds one (exit 2 where the side has none)
    model = model.with_lm_head(allow_pickle=args.allow_pickle)
    batches = make_batches(model, input_options(args))
    report = check_tying(model, batches, options)
    print(render_embeddings(report))
    return finish(args, [report], TOP_LEVEL)
