"""What the benchmarks of scripts/bench.py share: the interpreter and ``tfparity``
command lines, timers, a corpus of a given size, a JSON-lines reader."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

PY = sys.executable
TFPARITY = [PY, "-m", "tfparity"]


def timed(fn: Callable[[], object], repeats: int = 1) -> float:
    """Median wall time of ``repeats`` runs after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def corpus_file(texts: list[str], n: int, directory: Path) -> Path:
    """``n`` items: the repo corpus, repeated with a varying suffix after the first round."""
    path = directory / f"corpus{n}.txt"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            base = texts[i % len(texts)]
            rnd = i // len(texts)
            f.write((base if rnd == 0 else f"{base} (take {rnd}, line {i})") + "\n")
    return path


def timed_once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def json_line(line: str) -> dict:
    import json

    return json.loads(line)
