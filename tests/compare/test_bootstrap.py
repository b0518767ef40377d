"""The bootstrap verdict on distribution metrics: PASS inside, FAIL outside,
INCONCLUSIVE across a budget; seeded; budgets parsed with clear errors."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from tfparity.compare.bootstrap import (
    FAIL,
    INCONCLUSIVE,
    MIN_ITEMS,
    PASS,
    Limit,
    bootstrap_verdict,
    parse_limits,
)
from tfparity.compare.distribution import position_metrics, summarise
from tfparity.errors import TfparityError
from tfparity.report.quantisation import distribution_lines


def _logits(items: int, noise: float, seed: int = 0):
    """Reference logits and a perturbed copy: ``noise`` sets the KL."""
    rng = np.random.default_rng(seed)
    ref = rng.normal(size=(items, 6, 20)) * 3
    return ref, ref + rng.normal(size=ref.shape) * noise


def _row(verdict):
    return verdict.details()


def test_close_logits_pass_and_far_ones_fail():
    close = position_metrics(*_logits(16, 0.01))
    far = position_metrics(*_logits(16, 2.0))
    limits = parse_limits("kl_mean=0.01,same_top1=0.9")
    good = bootstrap_verdict(close, limits, resamples=200)
    bad = bootstrap_verdict(far, limits, resamples=200)
    assert good.verdict == PASS and all(t.verdict == PASS for t in good.terms)
    assert bad.verdict == FAIL and bad.terms[0].verdict == FAIL
    assert bad.terms[0].low > 0.01  # the whole interval above the budget
    for t in good.terms + bad.terms:
        assert t.low <= t.value <= t.high


def test_a_budget_inside_the_interval_is_inconclusive():
    metrics = position_metrics(*_logits(6, 0.5))
    point = bootstrap_verdict(metrics, [Limit("kl_mean", "<=", 1.0)], resamples=300)
    t = point.terms[0]
    assert t.low < t.value < t.high
    middle = bootstrap_verdict(metrics, [Limit("kl_mean", "<=", t.value)], resamples=300)
    assert middle.verdict == INCONCLUSIVE
    shown = distribution_lines({**asdict(summarise(metrics)), "budget": _row(middle)})
    assert "distribution budget INCONCLUSIVE (run more items) over 6 sequences" in shown[1]


def test_the_seed_fixes_the_interval():
    metrics = position_metrics(*_logits(8, 0.3))
    limits = parse_limits("kl_mean=0.05,kl_p99=0.2")
    a, b = (bootstrap_verdict(metrics, limits, resamples=100, seed=7) for _ in range(2))
    c = bootstrap_verdict(metrics, limits, resamples=100, seed=8)
    assert a == b
    assert a.terms != c.terms


def test_items_are_resampled_whole():
    """One item holds all the error: an interval over items spans with and without it."""
    ref, act = _logits(MIN_ITEMS, 0.0)
    act[2] += np.random.default_rng(1).normal(size=act[2].shape) * 3
    v = bootstrap_verdict(position_metrics(ref, act), parse_limits("kl_mean=1e-3"))
    assert v.items == MIN_ITEMS and v.terms[0].low == pytest.approx(0.0, abs=1e-12)
    assert v.verdict == INCONCLUSIVE


def test_the_perplexity_ratio_needs_targets():
    with pytest.raises(TfparityError, match="next-token targets"):
        bootstrap_verdict(position_metrics(*_logits(3, 0.1)), parse_limits("ln_ppl_ratio=0.01"))


def test_budget_forms():
    assert parse_limits("kl_mean=0.01, same_top1>=0.99,rms_dp<=0.02") == [
        Limit("kl_mean", "<=", 0.01),
        Limit("same_top1", ">=", 0.99),
        Limit("rms_dp", "<=", 0.02),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kl_avg=0.01", "Unknown distribution metric 'kl_avg'"),
        ("kl_mean=abc", "not a number"),
        ("kl_mean=nan", "finite"),
        ("kl_mean", "no value"),
        ("same_top1<=0.9", "bounded >="),
        ("", "Empty"),
        ("same_top1=95", r"same_top1=95: a share, at most 1 \(a percentage\? 95 -> 0.95\)"),
        ("same_top1=-0.1", "a share, from 0 to 1"),
        ("same_top1=150", "a share, at most 1[.]"),
    ],
)
def test_bad_budgets_are_refused(text, message):
    with pytest.raises(TfparityError, match=message):
        parse_limits(text)


def test_intervals_equal_those_of_gathering_each_resamples_positions():
    """The mean and maximum metrics resample from per-item sums; the interval must be
    the one a resample of the positions themselves gives (seeded alike)."""
    from tfparity.compare.distribution import metric_value, select

    rng = np.random.default_rng(3)
    ref = rng.standard_normal((7, 9, 13))
    act = ref + rng.standard_normal(ref.shape) * 0.3
    targets = rng.integers(0, 13, (7, 9))
    mask = (np.arange(9)[None, :] < rng.integers(3, 10, (7, 1))).astype(int)
    m = position_metrics(ref, act, mask, targets)
    limits = parse_limits("kl_mean=1,kl_max=9,same_top1=0,rms_dp=1,ln_ppl_ratio=1")
    verdict = bootstrap_verdict(m, limits, resamples=200, seed=5)
    order = np.argsort(m.item, kind="stable")
    _, starts = np.unique(m.item[order], return_index=True)
    groups = np.split(order, starts[1:])
    draws = np.random.default_rng(5).integers(0, len(groups), size=(200, len(groups)))
    for term in verdict.terms:
        gathered = [
            metric_value(select(m, np.concatenate([groups[i] for i in row])), term.limit.metric)
            for row in draws
        ]
        low, high = np.percentile(gathered, [2.5, 97.5])
        assert (term.low, term.high) == pytest.approx((low, high), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("items", [1, MIN_ITEMS - 1])
def test_too_few_items_are_inconclusive_saying_how_many_to_give(items):
    """One sequence resampled is itself: its "interval" has no width. Below MIN_ITEMS the
    verdict is INCONCLUSIVE with no interval, however far the value is from the limit."""
    metrics = position_metrics(*_logits(items, 2.0))
    limits = parse_limits("kl_mean=0.001,same_top1=0.96")
    verdict = bootstrap_verdict(metrics, limits, resamples=100)
    assert verdict.verdict == INCONCLUSIVE and verdict.needed == MIN_ITEMS
    assert all(t.verdict == INCONCLUSIVE and t.low is None is t.high for t in verdict.terms)
    assert verdict.terms[0].value > 0.001  # over the limit, and still not a FAIL
    shown = distribution_lines({**asdict(summarise(metrics)), "budget": _row(verdict)})
    unit = "sequence" if items == 1 else "sequences"
    assert (
        f"INCONCLUSIVE ({items} {unit}: too few for an interval; give at least {MIN_ITEMS})"
        in (shown[1])
    )
    assert "no interval" in shown[1] and "CI" not in shown[1]
    # from MIN_ITEMS on, an interval (of some width) and a verdict
    enough = bootstrap_verdict(position_metrics(*_logits(MIN_ITEMS, 2.0)), limits, resamples=100)
    assert enough.needed is None and enough.verdict == FAIL
    assert all(t.low < t.high for t in enough.terms if t.limit.metric == "kl_mean")


def test_one_json_shape_and_one_failing_row_per_term_outside():
    """``details()`` is the one JSON shape every report holds (crosscheck, --quantize,
    backends, sweep); ``failures()`` a row per FAIL term, none for PASS or INCONCLUSIVE."""
    far = position_metrics(*_logits(8, 2.0))
    verdict = bootstrap_verdict(far, parse_limits("kl_mean=0.001,kl_max=1e9"), resamples=100)
    shape = verdict.details()
    assert set(shape) == {"terms", "items", "resamples", "confidence", "seed", "needed", "verdict"}
    assert shape["verdict"] == FAIL and shape["items"] == 8 and shape["needed"] is None
    assert shape["terms"][0]["limit"] == {"metric": "kl_mean", "bound": "<=", "value": 0.001}
    assert set(shape["terms"][0]) == {"limit", "value", "low", "high", "verdict"}
    assert [t["verdict"] for t in shape["terms"]] == [FAIL, PASS]
    (row,) = verdict.failures("distribution {metric} (logits)", items="prompts", blame="; here")
    assert row.name == "distribution kl_mean (logits)" and not row.passed
    assert row.problem.startswith("Over budget: kl_mean ")
    assert "95% interval [" in row.problem and row.problem.endswith(
        "over 8 prompts wholly outside; here."
    )
    mode = verdict.failures("q {metric}", budget="the int4 budget")
    assert mode[0].problem.startswith("Over the int4 budget: kl_mean")
    few = bootstrap_verdict(position_metrics(*_logits(1, 2.0)), parse_limits("kl_mean=0.001"))
    assert few.details()["needed"] == MIN_ITEMS and few.failures("{metric}") == []
