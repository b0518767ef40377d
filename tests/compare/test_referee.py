"""The float64 referee's early stop (RefereeSums.settled): exact, never a pass that
float64 on the batches left could have turned into a fail, and tight where the
candidate's refereed error is zero."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfparity.compare import Referee, RefereeSums
from tfparity.compare.judge import SMALL_LEAF_FACTORS

F = 3.0


def sums_of(actual, reference, truth, refereed: int) -> RefereeSums:
    """Differences for every batch, float64 for the first ``refereed``."""
    sums = RefereeSums()
    for a, r in zip(actual, reference, strict=True):
        sums.add_difference(a, r, None)
    for a, r, t in list(zip(actual, reference, truth, strict=True))[:refereed]:
        sums.add(a, r, t, None)
    return sums


def full_verdict(actual, reference, truth, referee: Referee) -> bool:
    return referee.result("x", sums_of(actual, reference, truth, len(truth))).passed


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    batches=st.integers(2, 6),
    candidate=st.floats(0.0, 4.0),
    correlation=st.floats(-1.0, 1.0),
    drift=st.floats(0.0, 8.0),
)
def test_a_settled_leaf_passes_whatever_the_batches_left_hold(
    seed, batches, candidate, correlation, drift
):
    """Wherever float64 could stop, the verdict over every batch is a pass; the later
    batches' reference error grows by ``drift`` (the bound must not assume it alike)."""
    rng = np.random.default_rng(seed)
    referee = Referee(factor=F, floor=1e-7)
    truth, reference, actual = [], [], []
    for i in range(batches):
        t = rng.normal(size=(2, 5, 4))
        e_r = rng.normal(size=t.shape) * 1e-3 * (1.0 + drift * i / batches)
        own = rng.normal(size=t.shape) * 1e-3 * candidate
        truth.append(t)
        reference.append((t + e_r).astype(np.float32))
        actual.append((t + own + correlation * e_r).astype(np.float32))
    for k in range(1, batches):
        sums = sums_of(actual, reference, truth, k)
        if referee.settled(sums):
            assert full_verdict(actual, reference, truth, referee), k
            for scale in (0.0, 1.0, 10.0):  # and the truths float64 would have found
                worst = adversarial_truths(actual, reference, truth, k, sums, scale)
                assert full_verdict(actual, reference, worst, referee), (k, scale)


def adversarial_truths(actual, reference, truth, k, sums, scale):
    """Truths for the batches after ``k`` that make the candidate's error largest: the
    reference's error aligned with the candidate's difference to it, of the size where
    the bound is tightest (times ``scale``)."""
    size = scale * math.sqrt(sums.rt) / math.sqrt(F * F - 1) / math.sqrt(len(truth) - k)
    worst = list(truth[:k])
    for a, r in zip(actual[k:], reference[k:], strict=True):
        d = np.asarray(a, np.float64) - np.asarray(r, np.float64)
        norm = np.linalg.norm(d)
        direction = d / norm if norm > 0 else np.ones_like(d) / math.sqrt(d.size)
        worst.append(np.asarray(r, np.float64) - size * direction)
    return worst


def test_a_clean_candidate_settles_after_a_few_of_many_batches():
    """TF-like: the candidate's own float32 error as large as the reference's."""
    rng = np.random.default_rng(3)
    truth = [rng.normal(size=(8, 16, 32)) for _ in range(12)]
    reference = [(t + rng.normal(size=t.shape) * 1e-7).astype(np.float32) for t in truth]
    actual = [(t + rng.normal(size=t.shape) * 1e-7).astype(np.float32) for t in truth]
    first = next(k for k in range(1, 13) if Referee().settled(sums_of(actual, reference, truth, k)))
    assert first <= 4 and full_verdict(actual, reference, truth, Referee())


def tight_case(margin: float):
    """Batch 1 refereed with a zero candidate error; batch 2's difference is ``margin``
    times the bound, and its reference error the one that makes the verdict worst."""
    rng = np.random.default_rng(0)
    t = rng.normal(size=(4, 8))
    r_k = rng.normal(size=t.shape) * 1e-3
    d_u = rng.normal(size=t.shape)
    d_u *= margin * math.sqrt(F * F - 1) * np.linalg.norm(r_k) / np.linalg.norm(d_u)
    x_u = d_u / np.linalg.norm(d_u) * np.linalg.norm(r_k) / math.sqrt(F * F - 1)
    truth = [t, t]
    reference = [t + r_k, t + x_u]
    actual = [t, t + x_u + d_u]
    return actual, reference, truth


@pytest.mark.parametrize("margin", [0.999, 1.001])
def test_the_bound_is_tight_where_the_refereed_candidate_error_is_zero(margin):
    """Just inside the bound the worst completion still passes; just outside it, one
    fails, so float64 must run there: a looser bound would say PASS wrongly."""
    referee = Referee(factor=F, floor=0.0)
    actual, reference, truth = tight_case(margin)
    settled = referee.settled(sums_of(actual, reference, truth, 1))
    passed = full_verdict(actual, reference, truth, referee)
    assert settled is (margin < 1) and passed is (margin < 1)


def test_nothing_settles_without_float64_or_with_nan_or_a_shape_change():
    t = np.ones((2, 3))
    sums = sums_of([t + 1e-9, t], [t, t], [t, t], 0)
    assert not Referee().settled(sums)  # no refereed batch: no bound on the rest
    nan = np.full((2, 3), np.nan)
    assert not Referee().settled(sums_of([t, nan], [t + 1e-3, t], [t, t], 1))
    odd = sums_of([t, np.ones((2, 4))], [t + 1e-3, t], [t, t], 1)  # sides differ in shape
    assert not Referee().settled(odd)
    every = sums_of([t, t], [t + 1e-3, t], [t, t], 2)
    assert not Referee().settled(every)  # every batch refereed: the verdict itself decides


def test_differences_skip_the_padding_as_the_referee_does():
    """A huge difference on a masked position cannot keep float64 running."""
    t = np.random.default_rng(1).normal(size=(1, 4, 3))
    r = t + 1e-3
    a = t.copy()
    a[0, 3] += 1e3  # padding
    mask = np.array([[1, 1, 1, 0]])
    sums = RefereeSums()
    for _ in range(2):
        sums.add_difference(a, r, mask, "last_hidden_state")
    sums.add(a, r, t, mask, name="last_hidden_state")
    assert sums.differences[0] == pytest.approx(9 * 1e-6)
    assert Referee().settled(sums)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_small_leaf_factors_are_the_one_in_ten_thousand_ratio_of_two_rmses(n):
    """The ratio of two RMSEs over ``n`` values of the same noise exceeds the table's
    factor once in 10^4 (2M seeded draws: about 200 expected)."""
    rng = np.random.default_rng(n)
    a, r = (rng.chisquare(n, size=2_000_000) for _ in range(2))
    above = int(np.count_nonzero(np.sqrt(a / r) > SMALL_LEAF_FACTORS[n]))
    assert 100 <= above <= 300


def test_the_factor_widens_only_for_leaves_of_few_values():
    assert Referee().factor_for(2) == 100.0 and Referee().factor_for(17) == 3.0
    assert Referee().factor_for(14) == 3.0 and Referee().factor_for(13) == 3.15
    assert Referee(factor=5.0).factor_for(16) == 5.0  # a wider factor of one's own stays


def test_a_two_value_leaf_passes_clean_noise_and_fails_a_bias_off_by_a_hundredth():
    """A classifier's two logits of one item: TF's rounding 7x PyTorch's passes (it
    happens on clean items), a bias off by 0.01 fails, with the factor it was judged by."""
    t = np.array([[0.048, -0.047]])
    clean = Referee().batches("logits", [t + 3e-8], [t + 4e-9], [t])
    broken = Referee().batches("logits", [t + 0.01], [t + 4e-9], [t])
    assert clean.passed and clean.factor == 100.0
    assert not broken.passed and broken.allowed_rmse < 1e-6
