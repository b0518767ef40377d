"""The summary of a sweep, computed from its result lines alone (numpy only).

Sweep and merge both call :func:`summarise` on result lines, so shards merged give
exactly the summary of an unsharded run: every figure is a count, a percentile of the
per-item max abs diffs or an order-free selection (ties broken by item index), never
a float sum that depends on the order lines arrive in. Run facts that do depend on
how the sweep was run (time, traces, shard) live under ``run``, apart.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..compare.bootstrap import FAIL, parse_limits
from .distribution import DISTRIBUTION, DistributionTally, budget_verdict, statistics
from .generate import GENERATE
from .generation_summary import GenerationTally

WORST = 10


@dataclass
class _CheckTally:
    passed: int = 0
    failed: int = 0
    not_applicable: int = 0
    diffs: list[float] = field(default_factory=list)
    agree: int = 0
    tokens: int = 0
    top1_rows: int = 0


def summarise(
    lines: Iterable[dict],
    meta: dict[str, Any],
    *,
    expected_items: int | None = None,
    worst: int = WORST,
) -> dict:
    """Items are ``passed`` (every check passed or did not apply), ``failed`` or
    ``skipped`` (too long for the model without ``--truncate``: not run, not failed).

    ``meta``: the run's manifest (model, checks, corpus, top1 notes);
    ``expected_items``: how many items make it complete (default: the whole corpus).

    Duplicate lines for one index (not written by tfparity, but possible after copying
    files by hand) count once: the first one.
    """
    checks: list[str] = list(meta["checks"])
    tally = {c: _CheckTally() for c in checks}
    generation = GenerationTally() if GENERATE in checks else None
    spreads = {c: DistributionTally() for c in checks}
    seen: set[int] = set()
    items = passed = skipped = 0
    heap: list[tuple] = []
    for line in lines:
        index = int(line["index"])
        if index in seen:
            continue
        seen.add(index)
        items += 1
        passed += line.get("passed") is True
        skipped += line.get("passed") is None
        for name, result in line.get("checks", {}).items():
            if name in tally:
                _count(tally[name], result)
                spreads[name].add(index, result)
            if name == GENERATE and generation is not None:
                generation.add(result)
        entry = (_badness(line), -index, index)
        if len(heap) < worst:
            heapq.heappush(heap, (entry, line))
        elif entry > heap[0][0]:
            heapq.heapreplace(heap, (entry, line))
    worst_lines = [line for _, line in sorted(heap, key=lambda e: e[0], reverse=True)]
    top1_notes = meta.get("top1_note") or {}
    out = {
        "model": meta["model"],
        "checks": checks,
        "corpus": meta["corpus"],
        "complete": items
        == (meta["corpus"]["items"] if expected_items is None else expected_items),
        "items": items,
        "passed": passed,
        "failed": items - passed - skipped,
        "skipped": skipped,
        "per_check": {name: _check_summary(t, top1_notes.get(name)) for name, t in tally.items()},
        "worst_items": [_worst_entry(line) for line in worst_lines],
    }
    if generation is not None:
        out["generation"] = generation.to_dict()
    found = _distributions(spreads, meta.get("kl_budget"))
    if found:
        out[DISTRIBUTION] = found
    return out


def _distributions(spreads: dict[str, DistributionTally], budget: str | None) -> dict:
    """Per check with logits scored: llama.cpp's statistics and, with ``budget`` (the
    run's ``--kl-budget``), the bootstrap verdict over its items."""
    limits = parse_limits(budget) if budget else None
    out = {}
    for name, tally in spreads.items():
        stats = statistics(tally)
        if stats is None:
            continue
        if limits:
            stats["budget"] = budget_verdict(tally, limits)
        out[name] = stats
    return out


def sweep_passed(summary: dict, strict: bool = False) -> bool:
    """Every item passed, the run is complete and no ``--kl-budget`` failed (an
    INCONCLUSIVE interval fails nothing: more items would decide). ``strict``
    (``--strict``): an item skipped as too long fails the sweep too; by default it is
    counted and named in the verdict line, not failed (docs/sweep.md says why)."""
    budgets = [d.get("budget", {}) for d in summary.get(DISTRIBUTION, {}).values()]
    over = any(b.get("verdict") == FAIL for b in budgets)
    unchecked = strict and summary["skipped"] > 0
    return summary["failed"] == 0 and summary["complete"] and not over and not unchecked


def _count(t: _CheckTally, result: dict) -> None:
    if result.get("passed") is None:
        t.not_applicable += 1
        return
    t.passed += bool(result["passed"])
    t.failed += not result["passed"]
    t.diffs.append(float(result["max_abs_diff"]))
    top1 = result.get("top1")
    if top1:
        t.agree += int(top1["agree"])
        t.tokens += int(top1["tokens"])
        t.top1_rows += 1


def _badness(line: dict) -> tuple[int, float]:
    """Failed items first, then skipped ones, then by their largest max abs diff."""
    diffs = [r.get("max_abs_diff") or 0.0 for r in line.get("checks", {}).values()]
    rank = {False: 2, None: 1}.get(line.get("passed"), 0)
    return (rank, max(diffs, default=0.0))


def _check_summary(t: _CheckTally, top1_note: str | None) -> dict:
    d = np.asarray(t.diffs, np.float64)
    stats = (
        {
            "p50": float(np.percentile(d, 50)),
            "p99": float(np.percentile(d, 99)),
            "max": float(d.max()),
        }
        if d.size
        else {"p50": None, "p99": None, "max": None}
    )
    if t.top1_rows:
        top1, note = t.agree / t.tokens if t.tokens else None, None
    else:
        top1, note = None, top1_note or "no top-1 figures in the results"
    return {
        "passed": t.passed,
        "failed": t.failed,
        "not_applicable": t.not_applicable,
        "max_abs_diff": stats,
        "top1_agreement": top1,
        "top1_tokens": t.tokens if t.top1_rows else None,
        "top1_note": note,
    }


def _worst_entry(line: dict) -> dict:
    out = {
        "index": line["index"],
        "id": line.get("id"),
        "text": line.get("text"),
        "passed": line.get("passed"),
        "max_abs_diff": {name: r.get("max_abs_diff") for name, r in line.get("checks", {}).items()},
        "worst_tensor": {name: r.get("worst") for name, r in line.get("checks", {}).items()},
    }
    if "skipped" in line:
        out["skipped"] = line["skipped"]
    g = line.get("checks", {}).get(GENERATE, {}).get("generation")
    if g:
        first = g["first_divergent_step"]
        out["generation"] = {
            "tokens_agreed": g["tokens_agreed"],
            "new_tokens": g["new_tokens"],
            "first_divergent_step": None if first is None else first["step"],
            "verdict": g["verdict"],
        }
    return out
