"""``tfparity merge``: combine sweep shards into one results.jsonl and summary.json."""

from __future__ import annotations

import argparse

from .common import EXIT_FAIL, EXIT_PASS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge",
        help="combine sweep shard outputs (--shard K/N) into one summary",
        description="Combine the output directories of `tfparity sweep --shard K/N` runs "
        "(same model, checks and corpus) into OUT: the union of their results.jsonl and the "
        "summary an unsharded run would have written. Exit 0 when every shard is there and "
        "every item passed, 1 otherwise, 2 for bad input.",
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="sweep output directories")
    p.add_argument("--out", metavar="DIR", required=True, help="where to write the merged output")
    p.add_argument("--worst", type=int, default=10, metavar="N", help="worst items kept (10)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..report.sweep import render_summary
    from ..sweep.merge import merge_dirs
    from ..sweep.summary import sweep_passed

    summary = merge_dirs(args.dirs, args.out, worst=args.worst)
    print(render_summary(summary, args.out))
    return EXIT_PASS if sweep_passed(summary) else EXIT_FAIL
