"""The distribution metrics of a sweep (llama.cpp's KL statistics, docs/quantised.md),
kept per item as sufficient values so that shards merge exactly (numpy only).

A sweep may score 10^5 items of hundreds of tokens each: keeping every position's KL
would grow results.jsonl by orders of magnitude. Each item's record therefore holds
what the exact statistics need, sums and a maximum over its scored positions (``kl_sum``,
``kl_max``, ``same_top1`` count, ``dp2_sum`` and, where next-token targets exist, both
sides' NLL sums), and the summary gives KL mean and max, same-top-1 share, RMS Δp and
ln(PPL ratio) exactly as over all positions. KL median and p99 need every position;
the summary gives them over the items' mean KL instead (``item_kl_median``,
``item_kl_p99``) and a ``--kl-budget`` on ``kl_median``/``kl_p99`` is refused.

Sums are taken over items in index order, so any order of lines (a resume, a merge, the
Ray engine) gives the same figures bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..compare.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    INCONCLUSIVE,
    BootstrapVerdict,
    Limit,
    MetricVerdict,
    interval_verdict,
    too_few,
)
from ..compare.distribution import PositionMetrics
from ..errors import TfparityError

# What a sweep cannot judge from per-item values (the positions' quantiles).
PER_POSITION_ONLY = ("kl_median", "kl_p99")
DISTRIBUTION = "distribution"  # the key in a check's record and in the summary
# Cells of item x resample drawn at once: bounds the bootstrap's memory (32 MB).
_CELLS = 4_000_000


def item_values(m: PositionMetrics, rows: int) -> list[dict]:
    """Per item of ``m`` (its ``item`` numbers the ``rows`` rows of one batch, from 0),
    the sums its record keeps; an item with no scored position gets an empty dict."""
    out: list[dict] = [{} for _ in range(rows)]
    for r in np.unique(m.item):
        at = m.item == r
        kl = m.kl[at]
        values = {
            "positions": int(kl.size),
            "kl_sum": float(kl.sum()),
            "kl_max": float(kl.max()),
            "same_top1": int(m.same_top[at].sum()),
            "dp2_sum": float((m.dp[at] ** 2).sum()),
            "dp_at": m.dp_at,
        }
        if m.nll_ref is not None and m.nll_actual is not None:
            values["nll_ref_sum"] = float(m.nll_ref[at].sum())
            values["nll_actual_sum"] = float(m.nll_actual[at].sum())
        out[int(r)] = values
    return out


_COLUMNS = ("positions", "kl_sum", "kl_max", "same_top1", "dp2_sum")


@dataclass
class DistributionTally:
    """One check's per-item values, gathered line by line (a tuple of floats per item:
    10^5 items hold a few MB) and summed in index order."""

    values: dict[int, tuple[float, ...]] = field(default_factory=dict)
    dp_ats: set[str] = field(default_factory=set)

    def add(self, index: int, result: dict) -> None:
        found = result.get(DISTRIBUTION)
        if not found or not found.get("positions"):
            return
        nll = found.get("nll_actual_sum", np.nan) - found.get("nll_ref_sum", np.nan)
        self.values[index] = tuple(float(found[k]) for k in _COLUMNS) + (nll,)
        self.dp_ats.add(found["dp_at"])

    def columns(self) -> dict[str, np.ndarray] | None:
        """Each sufficient value as an array over the items, in index order (None: no
        item had a scored position); ``nll`` (NLL sum, TF less PyTorch) only where every
        item has next-token targets."""
        if not self.values:
            return None
        rows = np.array([self.values[i] for i in sorted(self.values)], np.float64)
        cols = {k: rows[:, j] for j, k in enumerate(_COLUMNS)}
        if not np.isnan(rows[:, -1]).any():
            cols["nll"] = rows[:, -1]
        return cols

    def dp_at(self) -> str:
        return next(iter(self.dp_ats)) if len(self.dp_ats) == 1 else "mixed"


def statistics(tally: DistributionTally) -> dict | None:
    """llama.cpp's statistics over every scored position (KL mean and max, same top-1,
    RMS Δp, ln PPL ratio: exact), with the quantiles over the items' mean KL."""
    cols = tally.columns()
    if cols is None:
        return None
    n = cols["positions"].sum()
    item_kl = cols["kl_sum"] / cols["positions"]
    return {
        "positions": int(n),
        "items": int(cols["positions"].size),
        "kl_mean": float(cols["kl_sum"].sum() / n),
        "kl_max": float(cols["kl_max"].max()),
        "same_top1": float(cols["same_top1"].sum() / n),
        "rms_dp": float(np.sqrt(cols["dp2_sum"].sum() / n)),
        "ln_ppl_ratio": float(cols["nll"].sum() / n) if "nll" in cols else None,
        "item_kl_median": float(np.median(item_kl)),
        "item_kl_p99": float(np.percentile(item_kl, 99)),
        "dp_at": tally.dp_at(),
    }


def refuse_per_position_terms(limits: Sequence[Limit]) -> None:
    """Refuse (exit 2) the terms a sweep cannot judge from per-item values."""
    bad = [str(t) for t in limits if t.metric in PER_POSITION_ONLY]
    if bad:
        raise TfparityError(
            f"A sweep keeps per-item sums, not every position's KL, so it cannot judge "
            f"{', '.join(bad)} (a quantile over positions); budget kl_mean, kl_max, "
            "same_top1, rms_dp or ln_ppl_ratio, or judge the quantiles with `tfparity "
            "crosscheck --kl-budget` on a smaller text."
        )


def budget_verdict(
    tally: DistributionTally,
    limits: Sequence[Limit],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> dict:
    """The paired bootstrap over items (:func:`tfparity.compare.bootstrap.bootstrap_verdict`'s
    draws and percentile interval), each resample's statistic recomputed from the drawn
    items' sums; for summary.json, in :meth:`BootstrapVerdict.details`'s one shape. No
    scored item: INCONCLUSIVE, said."""
    cols = tally.columns()
    if cols is None:
        empty = BootstrapVerdict([], 0, resamples, confidence, seed).details()
        return empty | {"verdict": INCONCLUSIVE, "note": "no scored positions"}
    count = cols["positions"].size
    needed = too_few(count)
    spreads = _spreads(cols, limits, resamples, seed) if needed is None else [None] * len(limits)
    tail = 100 * (1 - confidence) / 2
    terms = []
    for limit, spread in zip(limits, spreads, strict=True):
        value = _metric(cols, limit.metric, np.arange(count)[None, :])[0]
        low = high = None  # too few items for an interval: INCONCLUSIVE
        if spread is not None:
            low, high = (float(x) for x in np.percentile(spread, [tail, 100 - tail]))
        verdict = INCONCLUSIVE if low is None else interval_verdict(limit, low, high)
        terms.append(MetricVerdict(limit, float(value), low, high, verdict))
    return BootstrapVerdict(terms, int(count), resamples, confidence, seed, needed).details()


def _spreads(
    cols: dict[str, np.ndarray], limits: Sequence[Limit], resamples: int, seed: int
) -> list[np.ndarray]:
    """Each limit's metric over ``resamples`` item resamples, drawn in chunks of rows
    (the same stream as one ``(resamples, items)`` draw) so memory stays bounded."""
    for limit in limits:
        if limit.metric == "ln_ppl_ratio" and "nll" not in cols:
            raise TfparityError(
                "ln_ppl_ratio needs next-token targets (a causal LM on text); this sweep has none."
            )
    count = cols["positions"].size
    rng = np.random.default_rng(seed)
    step = max(1, _CELLS // count)
    parts: list[list[np.ndarray]] = [[] for _ in limits]
    for start in range(0, resamples, step):
        draws = rng.integers(0, count, size=(min(step, resamples - start), count))
        for i, limit in enumerate(limits):
            parts[i].append(_metric(cols, limit.metric, draws))
    return [np.concatenate(p) for p in parts]


def _metric(cols: dict[str, np.ndarray], metric: str, draws: np.ndarray) -> np.ndarray:
    """``metric`` of each row of item draws (``[resamples, items]``)."""
    if metric == "kl_max":
        return cols["kl_max"][draws].max(axis=1)
    n = cols["positions"][draws].sum(axis=1)
    if metric == "rms_dp":
        return np.sqrt(cols["dp2_sum"][draws].sum(axis=1) / n)
    column = {"kl_mean": "kl_sum", "same_top1": "same_top1", "ln_ppl_ratio": "nll"}[metric]
    return cols[column][draws].sum(axis=1) / n
