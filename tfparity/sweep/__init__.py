"""Corpus sweeps: per-item parity verdicts over a corpus of any size, in length-bucketed
compiled batches, streamed to ``results.jsonl``, with sharding, resume and merge."""

from .corpus import DEFAULT_CORPUS, Shard, parse_shard
from .merge import merge_dirs
from .options import SweepOptions
from .runner import SweepResult, run_sweep
from .summary import summarise

__all__ = [
    "DEFAULT_CORPUS",
    "Shard",
    "SweepOptions",
    "SweepResult",
    "merge_dirs",
    "parse_shard",
    "run_sweep",
    "summarise",
]
