"""The judges of tfparity.compare.judge, each both ways (rounding noise passes, a real
difference fails, NaN and Inf are refused), the one hidden-state -> layer mapping, and
the one known-difference match that the cross-check's and the gradients' localisations
share. Numpy only: the arrays are made here."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tfparity.architectures.bert import GELU_FINDING
from tfparity.checks.crosscheck import localisation
from tfparity.checks.gradients import localise as gradient_localise
from tfparity.compare import (
    BudgetJudge,
    CrossBackendReferee,
    Referee,
    Tolerance,
    ToleranceJudge,
    failure_message,
    known_difference_note,
    rmse,
    within,
)
from tfparity.compare.budgets import BUDGETS
from tfparity.sweep.itemcheck import referee_verdicts
from tfparity.trace import EMBEDDINGS, Trace, hidden_state_of, layer_of, layer_text

RNG = np.random.default_rng(0)
TRUTH = RNG.standard_normal((2, 8, 16))  # float64: the truth
REFERENCE = (TRUTH + RNG.standard_normal(TRUTH.shape) * 1e-7).astype(np.float32)
NOISY = (TRUTH + RNG.standard_normal(TRUTH.shape) * 1e-7).astype(np.float32)  # a clean port
WRONG = (TRUTH + 1e-2).astype(np.float32)  # a bias off by 0.01


def broken(value: float) -> np.ndarray:
    out = NOISY.copy()
    out[1, 3, 5] = value
    return out


JUDGES = {
    "tolerance": ToleranceJudge(Tolerance(atol=1e-5, rtol=1.3e-6)),
    "referee": Referee(),
    "budget": BudgetJudge(BUDGETS["float16"].tensor, "float16"),
}


@pytest.mark.parametrize("kind", JUDGES)
def test_each_judge_passes_rounding_noise_and_fails_a_real_difference(kind):
    judge = JUDGES[kind]
    clean = judge.judge("x", [NOISY], [REFERENCE], truth=[TRUTH])
    wrong = judge.judge("x", [WRONG], [REFERENCE], truth=[TRUTH])
    assert clean.passed and not wrong.passed
    assert clean.judge == wrong.judge == kind


@pytest.mark.parametrize("kind", JUDGES)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_each_judge_refuses_nan_and_inf(kind, value):
    c = JUDGES[kind].judge("x", [broken(value)], [REFERENCE], truth=[TRUTH])
    assert not c.passed
    assert c.nonfinite_actual == 1 and "Non-finite" in c.problem


def test_the_referee_judges_by_the_truth_and_falls_back_to_the_dtype_tolerance_without_one():
    # Both sides off the truth by the same rounding: the referee passes what a tight
    # tolerance would fail, and says by what bound.
    c = Referee().judge("x", [NOISY], [REFERENCE], truth=[TRUTH])
    assert c.referee["allowed_rmse"] == pytest.approx(
        3.0 * c.referee["reference_rmse"] + 1e-7 * float(np.sqrt(np.mean(TRUTH**2)))
    )
    assert c.referee["actual_rmse"] <= c.referee["allowed_rmse"]
    untruthed = Referee().judge("x", [WRONG], [REFERENCE])
    assert untruthed.judge == "tolerance" and not untruthed.passed


def test_the_referee_slack_widens_the_bound_and_nothing_else():
    tight = Referee().judge("x", [WRONG], [REFERENCE], truth=[TRUTH])
    loose = Referee().judge("x", [WRONG], [REFERENCE], truth=[TRUTH], slack=1.0)
    assert not tight.passed and loose.passed
    assert loose.referee["allowed_rmse"] == pytest.approx(tight.referee["allowed_rmse"] + 1.0)


def test_within_refuses_non_finite_errors_even_under_an_infinite_bound():
    assert within(1.0, 2.0) and not within(3.0, 2.0)
    assert not within(np.nan, np.inf) and not within(np.inf, np.inf)
    assert within(np.array([1.0, np.nan, 3.0]), 2.0).tolist() == [True, False, False]


def test_the_rule_is_the_same_for_a_leaf_and_for_the_sweep_rows():
    # The sweep judges every row at once; each row alone through the referee gives
    # the same verdicts (a fault on row 1 only).
    tf = NOISY.copy()
    tf[1] += 1e-2
    names = ("last_hidden_state",)
    rows = referee_verdicts(
        Trace({names[0]: tf}),
        Trace({names[0]: REFERENCE}),
        Trace({names[0]: TRUTH}),
        None,
        Referee(),
    )
    alone = [
        Referee().batches(names[0], [tf[i : i + 1]], [REFERENCE[i : i + 1]], [TRUTH[i : i + 1]])
        for i in range(2)
    ]
    assert [r[names[0]] for r in rows] == [a.passed for a in alone] == [True, False]


def test_the_allowed_rmse_widens_the_factor_for_few_values_only():
    referee = Referee()
    assert referee.allowed(1.0, 0.0) == 3.0
    assert referee.allowed(1.0, 0.0, 2) == 100.0  # two logits: PyTorch's RMSE is a poor guide
    assert referee.allowed(np.array([1.0, 1.0]), 0.0, np.array([2, 1000])).tolist() == [100.0, 3.0]


def test_each_judge_describes_itself_as_the_reports_say():
    assert Referee().describe() == "float64 referee (factor 3, floor 1e-07 x RMS)"
    assert (
        Referee(4, 1e-6).describe("per step")
        == "float64 referee per step (factor 4, floor 1e-06 x RMS)"
    )
    assert JUDGES["tolerance"].describe() == "tolerance"
    text = JUDGES["budget"].describe()
    assert text.startswith("quantised (float16): judged by budgets: max abs error 0.01")
    assert text.endswith(
        "not by the float64 referee (a quantised model differs from float32 by design)"
    )
    assert CrossBackendReferee().describe() == (
        "float64 referee (factor 3, floor 1e-07 x RMS), the other backends as the float32 "
        "reference; ceiling 0.0001 x RMS"
    )


def test_the_cross_backend_referee_passes_rounding_and_fails_one_channel_off_naming_it():
    # another backend's float32 rounding stands in for the reference; the ceiling judges
    # alone (no other backend), and catches a fault every backend shares
    skewed = NOISY.copy()
    skewed[..., 5] *= 1.05
    judge = CrossBackendReferee(others=(rmse(REFERENCE, TRUTH),))
    clean = judge.judge("jax:dense", [NOISY], [TRUTH])
    wrong = judge.judge("jax:dense", [skewed], [TRUTH])
    assert clean.passed and clean.judge == "referee"
    assert clean.referee["actual_rmse"] <= clean.referee["allowed_rmse"]
    assert not wrong.passed and wrong.referee["actual_rmse"] > wrong.referee["allowed_rmse"]
    assert "jax:dense" in failure_message([clean, wrong])
    alone = CrossBackendReferee()
    assert alone.judge("jax:dense", [NOISY], [TRUTH]).passed
    assert not alone.judge("jax:dense", [skewed], [TRUTH]).passed
    shared = CrossBackendReferee(others=(rmse(skewed, TRUTH),))
    assert not shared.judge("jax:dense", [skewed], [TRUTH]).passed
    assert not judge.judge("jax:dense", [broken(np.nan)], [TRUTH]).passed  # NaN refused


@pytest.mark.parametrize(
    ("hidden_state", "layer", "text"),
    [(0, EMBEDDINGS, "the embeddings"), (1, 0, "layer 0"), (4, 3, "layer 3")],
)
def test_layer_of_maps_hidden_states_to_the_layer_that_outputs_them(hidden_state, layer, text):
    assert layer_of(hidden_state) == layer
    assert hidden_state_of(layer) == hidden_state
    assert layer_text(hidden_state) == text


def test_layer_text_names_a_decoders_layers_as_the_reports_do():
    assert layer_text(0, "decoder embeddings", "decoder layer") == "decoder embeddings"
    assert layer_text(3, "decoder embeddings", "decoder layer") == "decoder layer 2"


# ----------------------------------------------------------------- known differences

KNOWN = f"; a known difference of this port: {GELU_FINDING.finding}{GELU_FINDING.rerun()}"
CHECKPOINT = SimpleNamespace(hidden_act="gelu")  # the reference as the checkpoint has it
REPRODUCED = SimpleNamespace(hidden_act="gelu_pytorch_tanh")  # computes as the port does


def notes(hidden_state, layer, component, config):
    """What the cross-check's and the gradients' localisations append at that place."""
    tf_model = SimpleNamespace(known_difference=GELU_FINDING)
    pt_model = SimpleNamespace(config=config)
    cross = localisation._known(tf_model, pt_model, hidden_state, layer, component, "hint")
    grad = gradient_localise._known(tf_model, pt_model, hidden_state, layer)
    return cross.removeprefix("hint"), grad


def test_both_localisations_name_the_known_difference_at_its_place():
    assert notes(1, 0, "intermediate", CHECKPOINT) == (KNOWN, KNOWN)
    assert notes(1, 0, None, CHECKPOINT) == (KNOWN, KNOWN)  # no taps: not contradicted


@pytest.mark.parametrize(
    ("hidden_state", "layer", "component", "config"),
    [
        (2, 1, None, CHECKPOINT),  # another layer
        (0, EMBEDDINGS, "embeddings", CHECKPOINT),
        (1, 0, None, REPRODUCED),  # the reference already computes as the port
    ],
)
def test_both_localisations_leave_it_out_elsewhere(hidden_state, layer, component, config):
    assert notes(hidden_state, layer, component, config) == ("", "")


def test_a_tapped_component_that_contradicts_the_finding_leaves_it_out():
    assert known_difference_note(GELU_FINDING, CHECKPOINT, 1, 0, "attention") == ""
    assert known_difference_note(None, CHECKPOINT, 1, 0, "intermediate") == ""
