"""``tfparity generate``: greedy generation, TF against PyTorch, step by step."""

from __future__ import annotations

import argparse
import time

from ..compare.quantisation import MODES
from .common import (
    add_input_arguments,
    add_json_argument,
    add_kl_budget_argument,
    finish,
    frameworks_frozen,
    input_options,
    pt_config,
)
from .naming import add_model_naming


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="greedy generation, TF vs PyTorch: tokens, first divergent step, KV cache",
        description="Decode N new tokens greedily from the same prompts with HF TF generate "
        "and PyTorch generate, each through its own KV cache. Per prompt: the tokens "
        "agreed, the first divergent step and both sides' top-1 minus top-2 margins there; "
        "per step (both sides fed PyTorch's tokens) the largest logit difference, the top-5 "
        "overlap and the float64 referee's verdict, a near-tie flip told from a defect. On "
        "the TF side each cached step is compared with a recomputation without cache, and "
        "generation started from gathered inputs_embeds with the ids path. Where tokens "
        "part by a defect, the cross-check of the teacher-forced sequence names the layer. "
        "A T5/mT5 loads as its seq2seq LM: the prompt feeds the encoder, the decoder's "
        "tokens are judged, and a defect is localised in the encoder when it is there. "
        "An ONNX causal LM exported with its KV cache (past_key_values.* inputs, present.* "
        "outputs) generates on ONNX Runtime on that cache, against --pt (docs/onnx.md).",
    )
    add_model_naming(p, "generate")
    p.add_argument(
        "--new-tokens",
        type=int,
        default=32,
        metavar="N",
        help="greedy steps per prompt (default 32)",
    )
    p.add_argument(
        "--no-embeds",
        action="store_true",
        help="skip the generation started from gathered inputs_embeds",
    )
    add_kl_budget_argument(p, "the teacher-forced steps'", "prompts")
    p.add_argument(
        "--quantize",
        choices=MODES,
        help="generate with a Keras-quantised copy of the keras-hub causal LM "
        "(model.quantize), judged by the mode's distribution budget over the prompts "
        "(--kl-budget overrides it), its tokens reported (docs/generate.md)",
    )
    add_input_arguments(p)
    add_json_argument(p)
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="every prompt's step table, not the first failing one's",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import generate
    from ..checks.generation.check import GenerationOptions
    from ..report.generation import render_generation

    GenerationOptions.from_arguments(  # exit 2 before any framework import
        new_tokens=args.new_tokens,
        embeds=not args.no_embeds,
        kl_budget=args.kl_budget,
        quantize=args.quantize,
        backend=args.backend,
    )
    inputs = input_options(args)
    changes = pt_config(args)
    frameworks_frozen(torch=True)
    start = time.perf_counter()
    report = generate(
        args.model,
        pt=args.pt,
        new_tokens=args.new_tokens,
        inputs=inputs,
        embeds=not args.no_embeds,
        allow_pickle=args.allow_pickle,
        pt_config=changes,
        kl_budget=args.kl_budget,
        quantize=args.quantize,
        backend=args.backend,
    )
    print(render_generation(report, verbose=args.verbose))
    print(f"\ngenerate wall time: {time.perf_counter() - start:.1f} s")
    return finish(args, [report])
