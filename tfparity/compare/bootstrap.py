"""A statistical verdict on distribution metrics: a paired bootstrap over items.

A quantised model's KL divergence is a sample statistic: over 8 prompts its mean can
land either side of a budget by chance. So a budget (``kl_mean=0.01,same_top1=0.99``)
is judged against a confidence interval, not a point: the items (sentences or
prompts) are resampled with replacement, each resample's metric recomputed from the
positions of the items drawn (both sides' positions move together: the test is
paired), and the 2.5th and 97.5th percentiles of those values bound the interval.
PASS where the whole interval is within the budget, FAIL where it lies wholly
outside, INCONCLUSIVE where it straddles it: more items would decide. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..errors import TfparityError
from .distribution import PositionMetrics, metric_value, select
from .record import Comparison, failed_comparison

# metric -> the side of the limit it must stay on: "<=" an upper bound, ">=" a lower one
BOUNDS = {
    "kl_mean": "<=",
    "kl_median": "<=",
    "kl_p99": "<=",
    "kl_max": "<=",
    "same_top1": ">=",
    "rms_dp": "<=",
    "ln_ppl_ratio": "<=",
}
# the metrics that are shares of positions (from 0 to 1, never percentages)
SHARES = frozenset({"same_top1"})
PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
DEFAULT_SEED = 0
# Below this many items the percentile interval is no interval: one item resamples to
# itself (a zero-width "CI"); with 2 to 4 items the same_top1 interval has no width in
# 9-40% of draws, from 5 in 3% (scripts/bootstrap_coverage.py; docs/quantised.md, "How
# many sequences"). Fewer items: INCONCLUSIVE, saying how many to give.
MIN_ITEMS = 5


def too_few(items: int, minimum: int = MIN_ITEMS) -> int | None:
    """How many items a bootstrap verdict needs, where ``items`` is fewer; else None."""
    return minimum if items < minimum else None


@dataclass(frozen=True)
class Limit:
    """One budget term: ``metric`` must stay ``bound`` (``<=`` or ``>=``) ``value``."""

    metric: str
    bound: str
    value: float

    def __str__(self) -> str:
        return f"{self.metric}{self.bound}{self.value:g}"


@dataclass(frozen=True)
class MetricVerdict:
    """One term's verdict, with the point value and its confidence interval (None, None:
    too few items for one, :data:`MIN_ITEMS`)."""

    limit: Limit
    value: float
    low: float | None
    high: float | None
    verdict: str


@dataclass(frozen=True)
class BootstrapVerdict:
    """Every term's verdict; the whole is FAIL if any term fails, else INCONCLUSIVE if
    any straddles, else PASS."""

    terms: list[MetricVerdict]
    items: int
    resamples: int
    confidence: float
    seed: int
    needed: int | None = None  # too few items: how many to give (every term INCONCLUSIVE)

    @property
    def verdict(self) -> str:
        found = {t.verdict for t in self.terms}
        return FAIL if FAIL in found else INCONCLUSIVE if INCONCLUSIVE in found else PASS

    def details(self) -> dict[str, Any]:
        """The one JSON shape of a bootstrap verdict, wherever a report holds one (a
        cross-check's ``distribution.budget``, ``--quantize``'s, a backend's, a sweep's
        summary): ``terms`` (each ``limit``, ``value``, ``low``, ``high``, ``verdict``),
        ``items``, ``resamples``, ``confidence``, ``seed``, ``needed`` and ``verdict``."""
        return asdict(self) | {"verdict": self.verdict}

    def failures(
        self,
        name: str,
        *,
        items: str = "sequences",
        budget: str = "budget",
        blame: str = "",
    ) -> list[Comparison]:
        """A failing row per term whose whole interval lies outside its limit, so the
        verdict line leads with it; an INCONCLUSIVE term fails nothing (more items would
        decide). ``name`` is the row's name with ``{metric}`` in it (``distribution
        {metric} (logits)``); ``items`` what was resampled; ``budget`` whose budget it is
        over (``the int8 budget``); ``blame`` ends the message (the layer to blame)."""
        return [
            failed_comparison(
                name.format(metric=t.limit.metric),
                f"Over {budget}: {t.limit.metric} {t.value:.3g} outside {t.limit}, its "
                f"{100 * self.confidence:g}% interval [{t.low:.3g}, {t.high:.3g}] over "
                f"{self.items} {items} wholly outside{blame}.",
                [self.items],
                "float64",
            )
            for t in self.terms
            if t.verdict == FAIL
        ]


def check_share(what: str, number: float) -> None:
    """Exit 2 where ``number``, a share (cosine, agreement, ``same_top1``), is over 1:
    ``95`` was meant as a percentage, so its share is suggested (``95 -> 0.95``). One
    message for ``--budget`` and ``--kl-budget``."""
    if number > 1:
        hint = f" (a percentage? {number:g} -> {number / 100:g})" if number <= 100 else ""
        raise TfparityError(f"{what}: a share, at most 1{hint}.")


def parse_limits(text: str) -> list[Limit]:
    """``"kl_mean=0.01,same_top1>=0.99"``: ``=`` takes the metric's own side (an upper
    bound for KL, Δp and the perplexity ratio; a lower one for same_top1)."""
    limits = []
    for term in (t.strip() for t in text.split(",")):
        if not term:
            continue
        limits.append(_parse_term(term, text))
    if not limits:
        raise TfparityError(f"Empty distribution budget {text!r}: give e.g. kl_mean=0.01.")
    return limits


def _parse_term(term: str, text: str) -> Limit:
    for op in ("<=", ">=", "="):
        if op in term:
            name, _, raw = (s.strip() for s in term.partition(op))
            break
    else:
        raise TfparityError(
            f"Budget term {term!r} in {text!r} has no value: write metric=value, e.g. kl_mean=0.01."
        )
    if name not in BOUNDS:
        raise TfparityError(
            f"Unknown distribution metric {name!r} in budget {text!r}; known: {', '.join(BOUNDS)}."
        )
    if op != "=" and op != BOUNDS[name]:
        raise TfparityError(
            f"{name} is bounded {BOUNDS[name]} (budget {text!r}); write {name}{BOUNDS[name]}"
            f"{raw} or {name}={raw}."
        )
    try:
        value = float(raw)
    except ValueError:
        raise TfparityError(f"Budget value {raw!r} for {name} is not a number.") from None
    if not np.isfinite(value):
        raise TfparityError(f"Budget value {raw!r} for {name} must be finite.")
    if name in SHARES:
        if value < 0:
            raise TfparityError(f"Budget {name}={raw}: a share, from 0 to 1.")
        check_share(f"Budget {name}={raw}", value)
    return Limit(name, BOUNDS[name], value)


def bootstrap_verdict(
    metrics: PositionMetrics,
    limits: Sequence[Limit],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
    minimum: int = MIN_ITEMS,
) -> BootstrapVerdict:
    """Each limit judged on a percentile interval of ``resamples`` item resamples
    (seeded: the same inputs give the same verdict). Fewer than ``minimum`` items: no
    interval, every term INCONCLUSIVE and ``needed`` says how many to give."""
    groups = _positions_by_item(metrics.item)
    needed = too_few(len(groups), minimum)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(groups), size=(resamples, len(groups)))
    tail = 100 * (1 - confidence) / 2
    terms = []
    for limit in limits:
        value = metric_value(metrics, limit.metric)
        if value is None:
            raise TfparityError(
                f"{limit.metric} needs next-token targets (a causal LM on text); this run has none."
            )
        if needed is not None:
            terms.append(MetricVerdict(limit, value, None, None, INCONCLUSIVE))
            continue
        spread = _resampled(metrics, limit.metric, groups, draws)
        low, high = (float(x) for x in np.percentile(spread, [tail, 100 - tail]))
        terms.append(MetricVerdict(limit, value, low, high, interval_verdict(limit, low, high)))
    return BootstrapVerdict(terms, len(groups), resamples, confidence, seed, needed)


# The per-position values whose mean a metric is (rms_dp: the root of the mean of dp²):
# these resample exactly from per-item sums, without gathering positions.
_MEANS = {
    "kl_mean": lambda m: m.kl,
    "same_top1": lambda m: m.same_top.astype(np.float64),
    "rms_dp": lambda m: m.dp**2,
    "ln_ppl_ratio": lambda m: m.nll_actual - m.nll_ref,
}


def _resampled(
    m: PositionMetrics, metric: str, groups: list[np.ndarray], draws: np.ndarray
) -> np.ndarray:
    """``metric`` on each resample (a row of ``draws``: item numbers, with repeats).
    A mean over the drawn items' positions is (counts @ item sums) / (counts @ item
    sizes), and a maximum the largest item maximum drawn: no positions gathered. The
    median and p99 gather each resample's positions."""
    if metric in _MEANS or metric == "kl_max":
        counts = np.stack([np.bincount(row, minlength=len(groups)) for row in draws])
        values = _MEANS[metric](m) if metric in _MEANS else m.kl
        if metric == "kl_max":
            tops = np.array([values[g].max() for g in groups])
            return np.where(counts > 0, tops, -np.inf).max(axis=1)
        sums = np.array([values[g].sum() for g in groups])
        sizes = np.array([len(g) for g in groups], np.float64)
        means = (counts @ sums) / (counts @ sizes)
        return np.sqrt(means) if metric == "rms_dp" else means
    samples = (select(m, np.concatenate([groups[i] for i in row])) for row in draws)
    return np.array([metric_value(s, metric) for s in samples], np.float64)


def _positions_by_item(item: np.ndarray) -> list[np.ndarray]:
    order = np.argsort(item, kind="stable")
    _, starts = np.unique(item[order], return_index=True)
    return np.split(order, starts[1:])


def interval_verdict(limit: Limit, low: float, high: float) -> str:
    """PASS where the interval ``[low, high]`` lies within ``limit``, FAIL where wholly
    outside, INCONCLUSIVE where it straddles it (the sweep judges its own intervals)."""
    if limit.bound == "<=":
        return PASS if high <= limit.value else FAIL if low > limit.value else INCONCLUSIVE
    return PASS if low >= limit.value else FAIL if high < limit.value else INCONCLUSIVE
