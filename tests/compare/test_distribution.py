"""Distribution metrics against an independent, loop-by-loop float64 implementation of
llama.cpp's definitions (perplexity.cpp, PR#5076/#5081), and their properties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfparity.compare.distribution import (
    DP_AT_TARGET,
    DP_AT_TOP,
    percentile,
    position_metrics,
    summarise,
)

# 2 items x 3 positions x 4 tokens; item 1's last position is padding
REF = np.array(
    [
        [[2.0, 1.0, 0.0, -1.0], [0.5, 0.5, 3.0, 0.0], [1.0, 2.0, 3.0, 4.0]],
        [[0.0, 0.0, 0.0, 1.0], [3.0, -2.0, 1.0, 0.0], [9.0, 9.0, 9.0, 9.0]],
    ]
)
ACT = np.array(
    [
        [[1.9, 1.2, 0.0, -1.0], [0.5, 0.7, 2.5, 0.1], [1.0, 2.0, 4.5, 4.0]],
        [[0.0, 0.1, 0.0, 1.0], [2.0, -2.0, 1.5, 0.0], [-50.0, 0.0, 0.0, 0.0]],
    ]
)
MASK = np.array([[1, 1, 1], [1, 1, 0]])
TARGETS = np.array([[1, 2, -1], [3, 0, -1]])  # the last of each has no next token


def _softmax(row):
    m = max(row)
    e = [math.exp(x - m) for x in row]
    return [x / sum(e) for x in e]


def _by_hand(ref, act, mask, targets=None):
    """Explicit sums over each real position, as llama.cpp's loop does them."""
    kl, same, dp, nll_r, nll_a = [], [], [], [], []
    for b in range(ref.shape[0]):
        for t in range(ref.shape[1]):
            if not mask[b, t] or (targets is not None and targets[b, t] < 0):
                continue
            p, q = _softmax(list(ref[b, t])), _softmax(list(act[b, t]))
            kl.append(sum(pi * (math.log(pi) - math.log(qi)) for pi, qi in zip(p, q, strict=True)))
            top = max(range(len(p)), key=lambda i: p[i])
            same.append(top == max(range(len(q)), key=lambda i: q[i]))
            tok = top if targets is None else int(targets[b, t])
            dp.append(q[tok] - p[tok])
            nll_r.append(-math.log(p[tok]))
            nll_a.append(-math.log(q[tok]))
    n = len(kl)
    ordered = sorted(kl)
    median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2] + ordered[n // 2 - 1])
    pos = 0.99 * (n - 1)
    i = int(pos)
    p99 = (1 - (pos - i)) * ordered[i] + (pos - i) * ordered[min(i + 1, n - 1)]
    return {
        "kl_mean": sum(kl) / n,
        "kl_median": median,
        "kl_p99": p99,
        "kl_max": ordered[-1],
        "same_top1": sum(same) / n,
        "rms_dp": math.sqrt(sum(d * d for d in dp) / n),
        "ln_ppl_ratio": sum(nll_a) / n - sum(nll_r) / n,
        "positions": n,
    }


@pytest.mark.parametrize("targets", [None, TARGETS])
def test_statistics_equal_llama_cpp_definitions(targets):
    stats = summarise(position_metrics(REF, ACT, MASK, targets))
    hand = _by_hand(REF, ACT, MASK, targets)
    assert stats.positions == hand["positions"] == (5 if targets is None else 4)
    for name in ("kl_mean", "kl_median", "kl_p99", "kl_max", "same_top1", "rms_dp"):
        assert getattr(stats, name) == pytest.approx(hand[name], abs=1e-6), name
    if targets is None:
        assert stats.dp_at == DP_AT_TOP and stats.ln_ppl_ratio is None
    else:
        assert stats.dp_at == DP_AT_TARGET
        assert stats.ln_ppl_ratio == pytest.approx(hand["ln_ppl_ratio"], abs=1e-6)


def test_one_kl_by_hand():
    """KL of two 2-token distributions written out: p=(e/(e+1), 1/(e+1)), q=(1/2, 1/2)."""
    p1 = math.e / (math.e + 1)
    expected = p1 * math.log(2 * p1) + (1 - p1) * math.log(2 * (1 - p1))
    m = position_metrics(np.array([[1.0, 0.0]]), np.array([[0.0, 0.0]]))
    assert m.kl[0] == pytest.approx(expected, abs=1e-12)


def test_percentile_is_linear_interpolation_at_fraction_times_n_minus_1():
    v = np.array([4.0, 0.0, 1.0, 2.0, 3.0])
    assert percentile(v, 0.99) == pytest.approx(3.96)
    assert percentile(v, 0.5) == 2.0
    assert percentile(v, 0.0) == 0.0 and percentile(v, 1.0) == 4.0


def test_identical_logits_give_zero_kl_and_full_agreement():
    stats = summarise(position_metrics(REF, REF, MASK, TARGETS))
    assert stats.kl_max == pytest.approx(0.0, abs=1e-15)
    assert stats.same_top1 == 1.0 and stats.rms_dp == 0.0 and stats.ln_ppl_ratio == 0.0


def test_kl_is_never_negative():
    rng = np.random.default_rng(3)
    ref, act = rng.normal(size=(2, 50, 7, 11)) * 4
    assert (position_metrics(ref, act).kl >= 0).all()


def test_a_constant_added_per_position_changes_nothing():
    shift = np.array([[5.0], [-300.0], [1e3]])[None]  # per position, exp would overflow
    a = summarise(position_metrics(REF, ACT, MASK, TARGETS))
    b = summarise(position_metrics(REF + shift, ACT - 2 * shift, MASK, TARGETS))
    for name in ("kl_mean", "kl_max", "same_top1", "rms_dp", "ln_ppl_ratio"):
        assert getattr(b, name) == pytest.approx(getattr(a, name), abs=1e-9), name


def test_masked_positions_are_ignored():
    """Item 1's padding holds wildly different logits: masked, they change nothing;
    unmasked, they dominate the maximum."""
    masked = summarise(position_metrics(REF, ACT, MASK))
    unmasked = summarise(position_metrics(REF, ACT, np.ones_like(MASK)))
    garbage = ACT.copy()
    garbage[1, 2] = [0.0, 80.0, -80.0, 5.0]
    assert summarise(position_metrics(REF, garbage, MASK)) == masked
    assert unmasked.kl_max > 10 * masked.kl_max and unmasked.positions == 6


def test_shapes_must_match():
    with pytest.raises(ValueError, match="shape"):
        position_metrics(REF, ACT[..., :3])


def test_blocks_of_positions_give_what_one_block_gives(monkeypatch):
    """Large vocabularies are scored a block of positions at a time (buffers reused):
    blocks of 2 positions must give what one block gives."""
    import tfparity.compare.distribution as distribution

    rng = np.random.default_rng(7)
    ref = rng.standard_normal((3, 5, 11)).astype(np.float32)
    act = ref + rng.standard_normal(ref.shape).astype(np.float32) * 0.2
    targets = rng.integers(-1, 11, (3, 5))
    whole = distribution.position_metrics(ref, act, None, targets)
    monkeypatch.setattr(distribution, "CHUNK_ELEMENTS", 2 * 11)
    blocks = distribution.position_metrics(ref, act, None, targets)
    for name in ("kl", "same_top", "dp", "item", "nll_ref", "nll_actual"):
        np.testing.assert_allclose(getattr(blocks, name), getattr(whole, name), rtol=1e-12)
