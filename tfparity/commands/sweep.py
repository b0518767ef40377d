"""``tfparity sweep``: per-item parity verdicts over a corpus, in bucketed batches."""

from __future__ import annotations

import argparse
import sys

from .common import (
    EXIT_FAIL,
    EXIT_PASS,
    add_execution_arguments,
    add_kl_budget_argument,
    add_tolerance_arguments,
    non_negative_int,
    one_execution,
    pt_config,
    tolerance,
)
from .naming import add_model_naming


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run checks over a corpus, item by item (sharding, resume, progress)",
        description="Run the chosen checks over every item of a corpus in length-bucketed, "
        "compiled batches, and write one verdict per item to OUT/results.jsonl (appended as "
        "it goes) and OUT/summary.json. Exit 0 when every item passed (items too long for "
        "the model are skipped and counted, or cut with --truncate; --strict fails them), 1 "
        "when any failed or the run stopped early, 2 for bad input.",
    )
    add_model_naming(p, "sweep")
    p.add_argument(
        "--texts",
        metavar="FILE",
        help="the corpus: a text file (one item per line, blank lines skipped) or JSONL "
        '({"text": ..., "id": ...} per line, id optional); default: the ~250 varied English '
        "sentences shipped in tfparity/data/corpus.txt",
    )
    p.add_argument(
        "--checks",
        metavar="LIST",
        help="comma-separated: embeds, crosscheck, positions (default: embeds, plus "
        "crosscheck when PyTorch is installed; with --generate, none but generate)",
    )
    p.add_argument(
        "--generate",
        type=int,
        metavar="N",
        help="also decode N new greedy tokens from each item (a prompt, alone, unpadded) "
        "with TF generate and PyTorch generate, each through its own KV cache, as "
        "`tfparity generate` judges them: tokens agreed, first divergent step and both "
        "margins, near-tie or defect, cache consistency. Needs a causal LM with its head, "
        "or a T5/mT5 seq2seq LM (tiny:t5/seq2seq-lm: the item feeds the encoder, the "
        "decoder's tokens are judged, and no other check runs beside it); an item must "
        "fit the model's positions with N tokens more",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        default="tfparity-sweep",
        help="output dir (default ./tfparity-sweep)",
    )
    p.add_argument("--batch-size", type=int, default=32, help="rows per batch, fixed (default 32)")
    p.add_argument(
        "--shard",
        metavar="K/N",
        default="0/1",
        help="run shard K of N (the items whose index modulo N is K); combine with merge",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted sweep in OUT, skipping items already in results.jsonl",
    )
    p.add_argument(
        "--overwrite", action="store_true", help="discard results already in OUT and start again"
    )
    add_tolerance_arguments(p)
    add_kl_budget_argument(
        p, "the cross-check's LM-head logits' and --generate's teacher-forced steps'", "items"
    )
    p.add_argument("--padding-side", choices=("right", "left"), help="default: the tokenizer's")
    p.add_argument(
        "--truncate", action="store_true", help="cut items longer than the model's maximum"
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for the positions permutations"
    )
    p.add_argument("--worst", type=int, default=10, metavar="N", help="worst items kept (10)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when any item was not checked (skipped as too long for the model); "
        "by default such items are counted in the verdict line and do not fail the sweep",
    )
    p.add_argument(
        "--progress",
        choices=("auto", "bar", "lines", "none"),
        default="auto",
        help="a bar on a terminal, periodic lines otherwise (auto)",
    )
    p.add_argument(
        "--referee",
        choices=("calibrated", "full", "lazy"),
        default="calibrated",
        help="the cross-check's float64 PyTorch pass: calibrated (default) runs it only for "
        "the items whose verdict margins calibrated on float64 rows cannot settle (the first "
        "batch, one sentinel row per batch, and items near the referee's line), full for "
        "every item; the verdicts are the same. lazy: read as calibrated (the cross-check's "
        "lazy bound needs float64 on part of each verdict, a sweep item has none)",
    )
    ray = p.add_argument_group("running on Ray (the 'ray' extra)")
    ray.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local: this process (default); ray: one Ray actor per worker, items dealt in "
        "chunks as workers free up, a lost worker's chunk rerun on another",
    )
    ray.add_argument(
        "--address",
        metavar="ADDR",
        help="join this Ray cluster (e.g. auto, or ray://head:10001); default: start a local one",
    )
    ray.add_argument("--workers", type=int, default=2, help="Ray actors (default 2)")
    ray.add_argument(
        "--gpus-per-worker",
        type=float,
        default=0.0,
        metavar="G",
        help="GPUs each actor holds through Ray's scheduling (default 0)",
    )
    ray.add_argument(
        "--cpus-per-worker",
        type=int,
        default=1,
        metavar="C",
        help="CPUs each actor holds, and its TF/PyTorch thread count (default 1)",
    )
    add_execution_arguments(p, default="graph", one_device=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..compare.bootstrap import parse_limits
    from ..errors import TfparityError
    from ..orchestration import compiles
    from ..sweep import SweepOptions, parse_shard, run_sweep

    checks = tuple(c.strip() for c in args.checks.split(",") if c.strip()) if args.checks else None
    if args.checks is not None and not checks:
        raise TfparityError("--checks is empty; give e.g. --checks embeds,crosscheck.")
    if args.worst < 0:
        raise TfparityError(f"--worst must not be negative (got {args.worst}).")
    if not compiles(args.model):  # keras-hub: eager by default, --graph/--xla refused
        args.execution_default = "eager"
    execution = one_execution(args, "a sweep")
    engine = None
    if args.engine == "ray":
        from ..sweep.ray_engine import RayOptions, import_ray

        import_ray()  # exit 2 naming the extra before anything loads
        engine = RayOptions(
            address=args.address,
            workers=args.workers,
            gpus_per_worker=args.gpus_per_worker,
            cpus_per_worker=args.cpus_per_worker,
        )
        engine.check()
    elif args.address is not None:
        raise TfparityError("--address joins a Ray cluster: give --engine ray too.")
    options = SweepOptions(
        checks=checks,
        batch_size=args.batch_size,
        shard=parse_shard(args.shard),
        resume=args.resume,
        overwrite=args.overwrite,
        tolerance=tolerance(args),
        padding_side=args.padding_side,
        truncate=args.truncate,
        seed=args.seed,
        progress=args.progress,
        worst=args.worst,
        execution=execution,
        referee=args.referee,
        engine=engine,
        generate=args.generate,
        pt_config=pt_config(args),
        signature=args.signature,
        kl_budget=tuple(parse_limits(args.kl_budget)) if args.kl_budget is not None else None,
    )
    if args.resume and args.overwrite:
        raise TfparityError(
            "--resume keeps the results in --out and --overwrite discards them: give one."
        )
    try:
        result = run_sweep(args.model, args.texts, args.out, options, pt=args.pt)
    except KeyboardInterrupt:
        # The help says: 1 when the run stopped early. Every finished item is on disk.
        print(
            f"tfparity: sweep interrupted; the items finished so far are in "
            f"{args.out}/results.jsonl: continue with --resume.",
            file=sys.stderr,
        )
        return EXIT_FAIL
    from ..sweep.summary import sweep_passed

    print(result.text(strict=args.strict))
    return EXIT_PASS if sweep_passed(result.summary, strict=args.strict) else EXIT_FAIL
