"""Budgets (numpy only): parsing, defaults per kind, judging a comparison, and the
per-layer error growth that names the layer that quantises worst."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.checks.crosscheck.agreement import Agreement
from tfparity.checks.crosscheck.budgeted import agreement_failures, budget_of
from tfparity.compare import BudgetJudge
from tfparity.compare.bootstrap import parse_limits
from tfparity.compare.budgets import BUDGETS, Budget, budgets_for, parse_tensor_budget
from tfparity.compare.growth import error_growth, worst_layer
from tfparity.errors import TfparityError


def test_defaults_per_kind_and_user_parts_over_them():
    drq = budgets_for("dynamic-range int8").tensor_budget()
    assert (drq.max, drq.mean) == (BUDGETS["dynamic-range int8"].tensor.max, 5e-2)
    assert drq.origin == "default for dynamic-range int8"
    mine = budgets_for("dynamic-range int8").tensor_budget("max=1e-2, mean=1e-3")
    assert (mine.max, mine.mean, mine.cosine) == (1e-2, 1e-3, drq.cosine)
    assert mine.origin == "set by the user"
    # float16 is held tighter than int8
    assert budgets_for("float16").tensor_budget().max < drq.max


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
        parse_tensor_budget(text, budgets_for(None).tensor_budget())


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
    ok = BudgetJudge(budget).judge("x", [near], [ref])
    assert ok.passed and ok.judge == "budget" and ok.problem is None
    bad = BudgetJudge(budget).judge("x", [far], [ref])
    assert not bad.passed and "max abs error 1 > 0.01" in bad.problem


def test_agreement_under_its_share_is_a_failing_row():
    budget = Budget(max=1, mean=1, cosine=0, agreement=0.9)
    rows = agreement_failures([Agreement("logits", "label", 8, 10)], budget)
    assert len(rows) == 1 and not rows[0].passed
    assert "label agreement 0.800 < 0.9" in rows[0].problem
    assert agreement_failures([Agreement("logits", "label", 10, 10)], budget) == []


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


def test_one_table_keyed_by_kind_per_tensor_and_kl():
    """``budgets_for(kind)`` is the one lookup: per-tensor and distribution defaults of a
    kind; a mixed Keras kind takes its coarsest mode's and says so; the user's parts win."""
    int8 = budgets_for("keras int8")
    assert int8.tensor == BUDGETS["keras int8"].tensor and int8.kind == "keras int8"
    assert [str(x) for x in int8.kl] == ["kl_mean<=0.015", "same_top1>=0.95"]
    assert int8.kl_limits() == (list(int8.kl), "default for int8, docs/quantised.md")
    mixed = budgets_for("keras int4+int8")
    assert mixed.kind == "keras int4" and mixed.kl == BUDGETS["keras int4"].kl
    assert mixed.tensor_budget().origin == "default for keras int4, the coarsest of keras int4+int8"
    given = parse_limits("kl_mean=0.5")
    assert mixed.kl_limits(given) == (given, "set by --kl-budget")
    assert budgets_for("float16").kl == () and budgets_for(None).kind == "float32"
    assert budgets_for(None).tensor_budget().max < budgets_for("float16").tensor_budget().max
    with pytest.raises(TfparityError, match="No default distribution budget for quantisation 'q3'"):
        budgets_for("keras q3").kl_limits()


def test_onnx_int8_kinds_have_budgets_and_the_int8_growth_limit():
    """ONNX Runtime's quantiser: its own budgets, measured on MiniLM with its defaults
    (per-tensor weights: looser than LiteRT's per-channel dynamic range; static int8 the
    loosest); both held to int8's per-layer growth limit, the first block to one of its
    own (the lookup is quantised too), unlike a LiteRT kind."""
    from tfparity.compare.growth import growth_limit
    from tfparity.compare.quantisation import ONNX_INT8, growth_mode

    dynamic, static = budgets_for("onnx dynamic int8"), budgets_for("onnx static int8")
    assert BUDGETS["dynamic-range int8"].tensor.max < dynamic.tensor.max < static.tensor.max
    assert (
        static.tensor.cosine < dynamic.tensor.cosine < BUDGETS["dynamic-range int8"].tensor.cosine
    )
    assert dynamic.kl and static.kl
    assert growth_mode("onnx dynamic int8") == growth_mode("onnx static int8") == ONNX_INT8
    assert growth_limit(ONNX_INT8).growth == growth_limit("int8").growth
    assert growth_limit(ONNX_INT8, first=True).growth > growth_limit("int8", first=True).growth
    assert growth_mode("dynamic-range int8") is None and growth_mode(None) is None
