"""The attention mask's one rule (tfparity.compare.masks), held by every place that uses
it: comparisons, the referee's sums, the sweep's per-row verdicts and row RMS, and the
modes check's magnitudes. A ``[batch, seq]`` mask applies to a leaf whose first two axes
are ``[batch, seq]``, rank 2 or more, except to a pooled output (known by its name)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tfparity.checks.modes import reference_magnitudes
from tfparity.compare import (
    Referee,
    RefereeSums,
    Tolerance,
    compare_arrays,
    compare_batches,
    compare_outputs,
    is_pooled,
    leaf_mask,
    row_rms,
    valid_positions,
)
from tfparity.sweep.itemcheck import leaf_rows, referee_verdicts
from tfparity.trace import Trace

pytestmark = pytest.mark.filterwarnings("error")

MASK = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])  # [batch 2, seq 4]; row 1 padded at 2, 3
TIGHT = Tolerance(atol=1e-6, rtol=0.0)


def _with_padding_off(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Two arrays equal except at row 1's padded tokens (positions 2 and 3 of axis 1)."""
    expected = np.linspace(1.0, 2.0, int(np.prod(shape))).reshape(shape)
    actual = expected.copy()
    actual[1, 2:] += 1000.0
    return actual, expected


def test_the_rule_itself():
    assert leaf_mask(None, (2, 4, 3)) is None
    assert leaf_mask(MASK, (2,)) is None  # rank 1: no token axis
    assert leaf_mask(MASK, (2, 5, 3)) is None  # another sequence length
    assert leaf_mask(MASK, (2, 3, 4, 4)) is None  # attentions [batch, heads, seq, seq]
    np.testing.assert_array_equal(leaf_mask(MASK, (2, 4)), MASK.astype(bool))
    np.testing.assert_array_equal(leaf_mask(MASK, (2, 4, 3)), MASK.astype(bool))
    for name in ("pooler_output", "pooled_output", "pooler", "bf16:pooler_output", "x.pooler"):
        assert is_pooled(name) and leaf_mask(MASK, (2, 4), name) is None
    for name in ("last_hidden_state", "hidden_states[2]", "start_logits", "layer_0.output"):
        assert not is_pooled(name) and leaf_mask(MASK, (2, 4), name) is not None


def test_a_pooled_leaf_as_wide_as_the_sequence_is_never_masked():
    """pooler_output [batch, hidden] with hidden == seq: its shape matches the mask, but it
    has no token axis. Every home of the rule compares all of it."""
    actual, expected = _with_padding_off((2, 4))
    for name in ("pooler_output", "pooler"):
        assert valid_positions(expected.shape, MASK, name) is None
        c = compare_arrays(actual, expected, name=name, mask=MASK, tolerance=TIGHT)
        assert not c.passed and c.total == 8 and c.masked_out == 0
        (nested,) = compare_outputs({name: actual}, {name: expected}, mask=MASK, tolerance=TIGHT)
        assert not nested.passed and nested.total == 8
        rows = leaf_rows(actual, expected, MASK, name, TIGHT)
        assert rows.passed.tolist() == [True, False] and rows.max_abs_diff[1] == 1000.0
        assert row_rms(actual - expected, MASK, name)[1] == pytest.approx(np.sqrt(2e6 / 4))
        sums = RefereeSums()
        sums.add(actual, expected, expected, MASK, name=name)
        assert sums.n == 8
        verdict = Referee().batches(name, [actual], [expected], [expected], [MASK])
        assert not verdict.passed
        assert reference_magnitudes([Trace({name: actual})], [MASK])[name] == actual.max()


@pytest.mark.parametrize("shape", [(2, 4), (2, 4, 3), (2, 4, 2, 2)])
def test_a_token_leaf_of_rank_2_or_more_is_masked_everywhere(shape):
    """[batch, seq] (per-token scores, e.g. start_logits), [batch, seq, hidden] and
    deeper: the padded tokens are left out by every home of the rule. Rank 2 is the case
    where the sweep's row RMS and per-row verdicts once applied the mask to rank 3 and
    more only, and judged a rank-2 token leaf on its padding."""
    name = "start_logits" if len(shape) == 2 else "last_hidden_state"
    actual, expected = _with_padding_off(shape)
    width = int(np.prod(shape[2:]))
    c = compare_arrays(actual, expected, name=name, mask=MASK, tolerance=TIGHT)
    assert c.passed and c.total == 6 * width and c.masked_out == 2 * width
    rows = leaf_rows(actual, expected, MASK, name, TIGHT)
    assert rows.passed.tolist() == [True, True] and rows.max_abs_diff.tolist() == [0.0, 0.0]
    assert row_rms(actual - expected, MASK, name).tolist() == [0.0, 0.0]
    sums = RefereeSums()
    sums.add(actual, expected, expected, MASK, name=name)
    assert sums.n == 6 * width and sums.at == 0.0
    tf, pt = Trace({name: actual}), Trace({name: expected})
    assert referee_verdicts(tf, pt, pt, MASK, Referee()) == [{name: True}] * 2
    assert reference_magnitudes([tf], [MASK])[name] == expected[1, :2].max()  # last kept


def test_a_leaf_of_another_shape_is_compared_whole():
    """Attentions [batch, heads, seq, seq] (heads != seq), or a leaf of another sequence
    length: the mask does not apply (the row RMS once failed to broadcast it)."""
    mask = np.array([[1, 1, 0], [1, 0, 0]])  # seq 3
    x = np.ones((2, 4, 3, 3))
    assert valid_positions(x.shape, mask) is None
    np.testing.assert_array_equal(row_rms(x, mask), [1.0, 1.0])
    assert compare_arrays(x, x, mask=mask).total == x.size


def test_a_fully_padded_row_has_nothing_to_compare():
    mask = np.array([[1, 1, 0], [0, 0, 0]])
    x = np.arange(18, dtype=np.float64).reshape(2, 3, 3)
    c = compare_batches([x[1:]], [x[1:]], masks=[mask[1:]])
    assert not c.passed and c.total == 0 and "Nothing compared" in c.problem
    rows = leaf_rows(x, x, mask, "last_hidden_state")
    assert rows.passed.tolist() == [True, False]
    assert row_rms(x, mask)[1] == 0.0
    assert row_rms(x, mask)[0] == pytest.approx(np.sqrt(np.mean(x[0, :2] ** 2)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    shape=st.sampled_from([(2, 3), (3, 3), (2, 3, 2), (3, 2, 2, 2), (2, 4, 3, 3)]),
    name=st.sampled_from(["last_hidden_state", "start_logits", "pooler_output"]),
)
def test_property_every_home_keeps_the_same_elements(data, shape, name):
    """The row RMS and the referee's sums run over the elements valid_positions keeps,
    and the sweep's per-row verdicts are compare_arrays' on each row alone."""
    mask = data.draw(hnp.arrays(np.int32, (shape[0], 3), elements=st.integers(0, 1)))
    a = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-10, 10)))
    b = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-10, 10)))
    valid = valid_positions(shape, mask, name)
    keep = np.ones(shape, bool) if valid is None else valid
    sums = RefereeSums()
    sums.add(a, b, b, mask, name=name)
    assert sums.n == int(keep.sum())
    for r in range(shape[0]):
        kept = (a - b)[r][keep[r]]
        expected_rms = float(np.sqrt(np.mean(kept**2))) if kept.size else 0.0
        assert row_rms(a - b, mask, name)[r] == pytest.approx(expected_rms, abs=1e-12)
    rows = leaf_rows(a, b, mask, name, TIGHT)
    for r in range(shape[0]):
        c = compare_arrays(
            a[r : r + 1], b[r : r + 1], name=name, mask=mask[r : r + 1], tolerance=TIGHT
        )
        assert bool(rows.passed[r]) == c.passed
