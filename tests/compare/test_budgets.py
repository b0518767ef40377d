"""Budgets (numpy only): parsing, defaults per kind, judging a comparison, and the
per-layer error growth that names the layer that quantises worst."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.checks.crosscheck.agreement import Agreement
from tfparity.checks.crosscheck.budgeted import budget_of, judged
from tfparity.compare import compare_arrays
from tfparity.compare.budgets import (
    DEFAULT_BUDGETS,
    Budget,
    budget_for,
    error_growth,
    parse_budget,
    worst_layer,
)
from tfparity.errors import TfparityError


def test_defaults_per_kind_and_user_parts_over_them():
    drq = budget_for("dynamic-range int8")
    assert (drq.max, drq.mean) == (DEFAULT_BUDGETS["dynamic-range int8"].max, 5e-2)
    assert drq.origin == "default for dynamic-range int8"
    mine = budget_for("dynamic-range int8", "max=1e-2, mean=1e-3")
    assert (mine.max, mine.mean, mine.cosine) == (1e-2, 1e-3, drq.cosine)
    assert mine.origin == "set by the user"
    # float16 is held tighter than int8
    assert budget_for("float16").max < drq.max


@pytest.mark.parametrize(
    "text, names",
    [
        ("max", "KEY=VALUE"),
        ("tol=1", "KEY=VALUE"),
        ("max=abc", "not a number"),
        ("mean=-1", ">= 0"),
        ("max=nan", ">= 0"),
        ("cosine=1.5", "at most 1"),
        ("agreement=95", r"agreement=95: a share, at most 1 \(a percentage\? 95 -> 0.95\)"),
    ],
)
def test_malformed_budgets_are_usage_errors(text, names):
    with pytest.raises(TfparityError, match=names):
        parse_budget(text, budget_for(None))


def test_a_float32_side_without_a_budget_keeps_the_referee():
    assert budget_of(None, None) is None
    assert budget_of(None, "max=1e-3").max == 1e-3
    assert budget_of("float16", None).origin == "default for float16"


def test_judging_by_a_budget_passes_within_and_fails_over_it():
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(2, 4, 8)).astype(np.float32)
    near = ref + np.float32(1e-3)
    far = ref.copy()
    far[0, 0, 0] += 1.0
    budget = Budget(max=1e-2, mean=1e-2, cosine=0.99, agreement=0.9)
    (ok,) = judged([compare_arrays(near, ref, name="x")], [], budget)
    assert ok.passed and ok.judge == "budget" and ok.problem is None
    (bad,) = judged([compare_arrays(far, ref, name="x")], [], budget)
    assert not bad.passed and "max abs error 1 > 0.01" in bad.problem


def test_agreement_under_its_share_is_a_failing_row():
    budget = Budget(max=1, mean=1, cosine=0, agreement=0.9)
    rows = judged([], [Agreement("logits", "label", 8, 10)], budget)
    assert len(rows) == 1 and not rows[0].passed
    assert "label agreement 0.800 < 0.9" in rows[0].problem
    assert judged([], [Agreement("logits", "label", 10, 10)], budget) == []


def test_error_growth_names_the_layer_that_adds_most_error():
    rng = np.random.default_rng(1)
    ref = [rng.normal(size=(2, 5, 8)) for _ in range(4)]  # hidden states 0..3
    noise = [0.001, 0.002, 0.05, 0.051]  # layer 1 (hidden state 2) adds the most
    act = [r + n * rng.normal(size=r.shape) for r, n in zip(ref, noise, strict=True)]
    mask = np.ones((2, 5), np.int32)
    rows = error_growth([act], [ref], [mask])
    assert [r.layer for r in rows] == ["embeddings", 0, 1, 2]
    assert worst_layer(rows).layer == 1
    assert rows[2].growth > 10
    # padding is left out: a huge error under a zero mask changes nothing
    mask[1, 4] = 0
    act[3][1, 4] += 100.0
    assert worst_layer(error_growth([act], [ref], [mask])).layer == 1
