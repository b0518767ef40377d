"""``tfparity sweep``: per-item parity verdicts over a corpus, in bucketed batches."""

from __future__ import annotations

import argparse
import sys

from .common import (
    EXIT_FAIL,
    EXIT_PASS,
    add_model_argument,
    non_negative_int,
    tolerance,
    tolerance_value,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run checks over a corpus, item by item (sharding, resume, progress)",
        description="Run the chosen checks over every item of a corpus in length-bucketed, "
        "compiled batches, and write one verdict per item to OUT/results.jsonl (appended as "
        "it goes) and OUT/summary.json. Exit 0 when every item passed (items too long for "
        "the model are skipped and counted, or cut with --truncate), 1 when any failed or "
        "the run stopped early, 2 for bad input.",
    )
    add_model_argument(p)
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
        "crosscheck when PyTorch is installed)",
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
    p.add_argument(
        "--atol",
        type=tolerance_value,
        help="fixed absolute tolerance (default: by dtype / referee)",
    )
    p.add_argument("--rtol", type=tolerance_value, help="fixed relative tolerance")
    p.add_argument("--padding-side", choices=("right", "left"), help="default: the tokenizer's")
    p.add_argument(
        "--truncate", action="store_true", help="cut items longer than the model's maximum"
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for the positions permutations"
    )
    p.add_argument("--worst", type=int, default=10, metavar="N", help="worst items kept (10)")
    p.add_argument(
        "--progress",
        choices=("auto", "bar", "lines", "none"),
        default="auto",
        help="a bar on a terminal, periodic lines otherwise (auto)",
    )
    p.add_argument("--xla", action="store_true", help="compile the TF passes with XLA")
    p.add_argument("--max-items", type=int, help=argparse.SUPPRESS)  # a simulated kill
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import TfparityError
    from ..sweep import SweepOptions, parse_shard, run_sweep

    checks = tuple(c.strip() for c in args.checks.split(",") if c.strip()) if args.checks else None
    if args.checks is not None and not checks:
        raise TfparityError("--checks is empty; give e.g. --checks embeds,crosscheck.")
    if args.worst < 0:
        raise TfparityError(f"--worst must not be negative (got {args.worst}).")
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
        max_items=args.max_items,
        worst=args.worst,
        xla=args.xla,
    )
    if args.resume and args.overwrite:
        raise TfparityError(
            "--resume keeps the results in --out and --overwrite discards them: give one."
        )
    try:
        result = run_sweep(args.model, args.texts, args.out, options)
    except KeyboardInterrupt:
        # The help says: 1 when the run stopped early. Every finished item is on disk.
        print(
            f"tfparity: sweep interrupted; the items finished so far are in "
            f"{args.out}/results.jsonl: continue with --resume.",
            file=sys.stderr,
        )
        return EXIT_FAIL
    print(render_summary(result.summary, str(result.out)))
    return EXIT_PASS if result.passed and result.summary["complete"] else EXIT_FAIL


def render_summary(summary: dict, out: str) -> str:
    """A few lines for the terminal; the full figures are in summary.json."""
    run = summary.get("run", {})
    lines = [
        f"tfparity sweep · {summary['model']}",
        f"  corpus: {summary['corpus']['path']} ({summary['corpus']['items']} items)",
        f"  items: {summary['items']}  passed: {summary['passed']}  failed: {summary['failed']}"
        f"  skipped: {summary['skipped']}  complete: {summary['complete']}",
    ]
    if "merged_from" in run:
        lines.append(
            f"  merged from {len(run['merged_from'])} shard outputs ({', '.join(run['shards'])}); "
            f"their runs took {run['seconds']} s, traces {run['traces']}"
        )
    elif "seconds" in run:
        lines.append(
            f"  this run: {run.get('items_this_run', '-')} items in {run['seconds']} s "
            f"({run.get('items_per_second')} items/s, tracing included; loading "
            f"{run.get('load_seconds')} s), traces {run.get('traces')}"
        )
    lines.append("")
    lines.append(
        f"{'check':<11}{'passed':>8}{'failed':>8}{'n/a':>6}{'p50':>11}{'p99':>11}"
        f"{'max':>11}{'top-1':>9}"
    )
    for name, c in summary["per_check"].items():
        d = c["max_abs_diff"]
        top1 = "n/a" if c["top1_agreement"] is None else f"{100 * c['top1_agreement']:.1f}%"
        lines.append(
            f"{name:<11}{c['passed']:>8}{c['failed']:>8}{c['not_applicable']:>6}"
            f"{_g(d['p50']):>11}{_g(d['p99']):>11}{_g(d['max']):>11}{top1:>9}"
        )
    notes = {c["top1_note"] for c in summary["per_check"].values() if c["top1_note"]}
    lines += [f"note: top-1: {n}" for n in sorted(notes)]
    # passed is None for a skipped item (too long): it is counted as skipped, not failed
    bad = [w for w in summary["worst_items"] if w["passed"] is False][:5]
    if bad:
        lines.append("")
        lines.append("failed items (worst first):")
        for w in bad:
            diffs = ", ".join(f"{k} {_g(v)}" for k, v in w["max_abs_diff"].items())
            lines.append(f"  #{w['index']} [{w['id']}] {diffs}: {w['text'][:70]}")
    if summary["skipped"]:
        lines.append(
            f"note: {summary['skipped']} items skipped as too long for the model "
            "(see 'skipped' in results.jsonl; --truncate cuts them)"
        )
    verdict = "PASS" if summary["failed"] == 0 and summary["complete"] else "FAIL"
    lines.append("")
    lines.append(
        f"{verdict} sweep: {summary['passed']}/{summary['items']} items passed; see {out}/"
    )
    return "\n".join(lines)


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"
