"""Tests for tfparity.compare on hand-made numpy arrays with known answers.

No deep-learning framework is imported here: tensors from TF/torch are imitated by tiny
fake classes, so these tests run anywhere numpy does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json

import numpy as np
import pytest

from tfparity.compare import (
    Comparison,
    Tolerance,
    compare_arrays,
    compare_batches,
    compare_output_batches,
    compare_outputs,
    default_tolerance,
    failure_message,
    flatten,
    to_numpy,
    valid_positions,
)

# Any numpy warning (overflow, invalid value, ...) inside tfparity.compare is a bug here.
pytestmark = pytest.mark.filterwarnings("error")

F64_TOL = Tolerance(atol=1e-7, rtol=1e-7)


def _roundtrip(c: Comparison) -> Comparison:
    """Serialise as strict JSON (no NaN/Infinity) and rebuild the Comparison."""
    text = json.dumps(dataclasses.asdict(c), allow_nan=False)
    return Comparison(**json.loads(text))


def _grid() -> np.ndarray:
    return np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


# ----------------------------------------------------------------------------- tolerances


@pytest.mark.parametrize(
    ("dtype", "atol", "rtol"),
    [
        (np.dtype("float16"), 1e-5, 1e-3),
        ("float16", 1e-5, 1e-3),
        ("bfloat16", 1e-5, 1.6e-2),
        (np.dtype("float32"), 1e-5, 1.3e-6),
        ("float32", 1e-5, 1.3e-6),
        (np.dtype("float64"), 1e-7, 1e-7),
        (np.dtype("int8"), 0.0, 0.0),
        (np.dtype("int32"), 0.0, 0.0),
        (np.dtype("int64"), 0.0, 0.0),
        (np.dtype("uint8"), 0.0, 0.0),
        (np.dtype("bool"), 0.0, 0.0),
    ],
)
def test_default_tolerance_by_dtype(dtype, atol, rtol):
    assert default_tolerance(dtype) == Tolerance(atol=atol, rtol=rtol, equal_nan=False)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float16, Tolerance(1e-5, 1e-3)),
        (np.float32, Tolerance(1e-5, 1.3e-6)),
        (np.float64, Tolerance(1e-7, 1e-7)),
        (np.int64, Tolerance(0.0, 0.0)),
    ],
)
def test_default_tolerance_accepts_numpy_scalar_types(dtype, expected):
    # np.float32 (a type, as in ``np.zeros(3, dtype=np.float32)``) means the same as its dtype.
    assert default_tolerance(dtype) == expected


def test_default_tolerance_framework_dtype_spellings():
    class FakeTfDType:  # tf.DType has .name == "float16"
        name = "float16"

    assert default_tolerance(FakeTfDType()) == Tolerance(1e-5, 1e-3)
    assert default_tolerance("torch.bfloat16") == Tolerance(1e-5, 1.6e-2)
    assert default_tolerance("tf.float32") == Tolerance(1e-5, 1.3e-6)


@pytest.mark.parametrize(
    ("dtypes", "expected"),
    [
        ((np.dtype("float32"), np.dtype("float64")), Tolerance(1e-5, 1.3e-6)),
        ((np.dtype("float64"), np.dtype("float32")), Tolerance(1e-5, 1.3e-6)),
        ((np.dtype("float32"), np.dtype("float16")), Tolerance(1e-5, 1e-3)),
        (("float16", "bfloat16"), Tolerance(1e-5, 1.6e-2)),
        (("bfloat16", np.dtype("float32")), Tolerance(1e-5, 1.6e-2)),
        ((np.dtype("int64"), np.dtype("float64")), Tolerance(1e-7, 1e-7)),
        ((np.dtype("int32"), np.dtype("int64")), Tolerance(0.0, 0.0)),
        ((), Tolerance(0.0, 0.0)),
    ],
)
def test_default_tolerance_mixed_picks_loosest(dtypes, expected):
    assert default_tolerance(*dtypes) == expected


def test_default_tolerance_is_used_when_none_given():
    a = np.array([1.0, 2.0], dtype=np.float32)
    c = compare_arrays(a, a.copy())
    assert (c.atol, c.rtol) == (1e-5, 1.3e-6)
    c = compare_arrays(np.array([1, 2]), np.array([1, 2]))
    assert (c.atol, c.rtol) == (0.0, 0.0)


# ----------------------------------------------------------------------------- exact equality


def test_exact_equal_arrays_pass_with_zero_stats():
    a = np.arange(1, 25, dtype=np.float32).reshape(2, 3, 4)
    c = compare_arrays(a, a.copy(), name="x")
    assert c.passed is True
    assert c.name == "x"
    assert c.total == 24
    assert c.mismatched == 0
    assert c.mismatched_percent == 0.0
    assert c.max_abs_diff == 0.0
    assert c.mean_abs_diff == 0.0
    assert c.median_abs_diff == 0.0
    assert c.p99_abs_diff == 0.0
    assert c.max_rel_diff == 0.0
    assert c.required_atol == 0.0
    assert c.cosine == pytest.approx(1.0, abs=1e-12)
    assert c.shape == [2, 3, 4] and c.expected_shape == [2, 3, 4]
    assert c.dtype == "float32" and c.expected_dtype == "float32"
    assert c.nonfinite_actual == 0 and c.nonfinite_expected == 0
    assert c.masked_out == 0
    assert c.problem is None
    # With no difference anywhere the "worst" element is simply the first one.
    assert c.worst_index == [0, 0, 0]
    assert (c.worst_actual, c.worst_expected) == (1.0, 1.0)


def test_integers_compare_exactly():
    a = np.array([[1, 2], [3, 4]], dtype=np.int64)
    assert compare_arrays(a, a.copy()).passed is True
    b = a.copy()
    b[1, 0] = 4
    c = compare_arrays(a, b)
    assert c.passed is False
    assert c.mismatched == 1
    assert c.max_abs_diff == 1.0
    assert c.worst_index == [1, 0]
    assert (c.worst_actual, c.worst_expected) == (3.0, 4.0)


def test_all_zero_arrays_have_cosine_one_and_one_zero_side_has_none():
    z = np.zeros((2, 2))
    assert compare_arrays(z, z.copy()).cosine == 1.0
    c = compare_arrays(z, np.ones((2, 2)))
    assert c.cosine is None
    assert c.passed is False
    assert c.mismatched == 4


def test_empty_arrays_pass():
    c = compare_arrays(np.zeros((0, 3)), np.zeros((0, 3)))
    assert c.passed is True
    assert c.total == 0
    assert c.worst_index is None
    assert c.worst_actual is None and c.worst_expected is None
    assert c.cosine is None
    assert c.max_abs_diff == 0.0
    assert c.mismatched_percent == 0.0
    _roundtrip(c)


def test_zero_dimensional_arrays():
    c = compare_arrays(np.float64(1.5), np.float64(1.0))
    assert c.passed is False
    assert c.shape == []
    assert c.total == 1
    assert c.worst_index == []
    assert c.max_abs_diff == 0.5
    assert "at index ()" in c.message()


# ----------------------------------------------------------------------------- one bad element


def test_single_perturbed_element_statistics():
    expected = _grid()
    actual = expected.copy()
    actual[1, 2] = 6.5
    c = compare_arrays(actual, expected, name="h")

    assert c.passed is False
    assert (c.atol, c.rtol) == (1e-7, 1e-7)
    assert c.total == 6
    assert c.mismatched == 1
    assert c.mismatched_percent == pytest.approx(100 / 6)
    assert c.max_abs_diff == 0.5
    assert c.max_rel_diff == pytest.approx(0.5 / 6.0, rel=1e-12)
    assert c.worst_index == [1, 2]
    assert tuple(c.worst_index) == (1, 2)
    assert c.worst_actual == 6.5
    assert c.worst_expected == 6.0
    # Five zero differences and one 0.5.
    assert c.mean_abs_diff == pytest.approx(0.5 / 6, rel=1e-12)
    assert c.median_abs_diff == 0.0
    # Linear interpolation: rank 0.99 * (6 - 1) = 4.95 between 0 and 0.5.
    assert c.p99_abs_diff == pytest.approx(0.95 * 0.5, rel=1e-12)
    assert c.required_atol == pytest.approx(0.5 - 1e-7 * 6.0, rel=1e-12)
    dot = 1 + 4 + 9 + 16 + 25 + 6.5 * 6
    norm_a = np.sqrt(1 + 4 + 9 + 16 + 25 + 6.5**2)
    norm_b = np.sqrt(1 + 4 + 9 + 16 + 25 + 36)
    assert c.cosine == pytest.approx(dot / (norm_a * norm_b), rel=1e-12)
    assert c.cosine < 1.0
    assert c.problem is None
    assert c.nonfinite_actual == 0 and c.nonfinite_expected == 0


def test_required_atol_is_the_threshold():
    expected = _grid()
    actual = expected.copy()
    actual[0, 1] = 2.3
    actual[1, 2] = 6.5
    rtol = 0.01
    c = compare_arrays(actual, expected, tolerance=Tolerance(atol=0.0, rtol=rtol))
    assert c.passed is False
    # max(|a - b| - rtol * |b|) = max(0.3 - 0.02, 0.5 - 0.06) = 0.44
    assert c.required_atol == pytest.approx(0.44, rel=1e-12)

    just_enough = Tolerance(atol=c.required_atol * 1.0001, rtol=rtol)
    again = compare_arrays(actual, expected, tolerance=just_enough)
    assert again.passed is True
    assert again.mismatched == 0

    too_small = Tolerance(atol=c.required_atol * 0.9, rtol=rtol)
    again = compare_arrays(actual, expected, tolerance=too_small)
    assert again.passed is False
    assert again.mismatched == 1  # 0.3 <= 0.396 + 0.02 still passes; 0.5 does not
    assert again.worst_index == [1, 2]


def test_tolerance_boundary_is_inclusive():
    tol = Tolerance(atol=0.25, rtol=0.5)
    expected = np.array([2.0])  # allowed = 0.25 + 0.5 * 2 = 1.25, all exact in float64
    at_boundary = compare_arrays(np.array([3.25]), expected, tolerance=tol)
    assert at_boundary.passed is True
    assert at_boundary.max_abs_diff == 1.25
    assert at_boundary.required_atol == 0.25

    below = compare_arrays(np.array([0.75]), expected, tolerance=tol)
    assert below.passed is True

    over = compare_arrays(np.array([np.nextafter(3.25, np.inf)]), expected, tolerance=tol)
    assert over.passed is False
    assert over.mismatched == 1
    just_over = np.nextafter(1.25, np.inf)  # the next float64 above the allowed difference
    under = compare_arrays(np.array([2.0 - just_over]), expected, tolerance=tol)
    assert under.max_abs_diff == just_over
    assert under.passed is False


def test_relative_tolerance_scales_with_expected_not_actual():
    tol = Tolerance(atol=0.0, rtol=1.0)
    # |0 - 1| <= 1 * |1|
    assert compare_arrays(np.array([0.0]), np.array([1.0]), tolerance=tol).passed is True
    # |1 - 0| > 1 * |0|
    assert compare_arrays(np.array([1.0]), np.array([0.0]), tolerance=tol).passed is False


def test_expected_zero_gives_finite_huge_relative_difference():
    c = compare_arrays(np.array([10.0, 1.0]), np.array([0.0, 1.0]))
    assert c.passed is False
    assert c.max_abs_diff == 10.0
    assert np.isfinite(c.max_rel_diff)
    assert c.max_rel_diff > 1e300
    assert _roundtrip(c) == c


def test_worst_element_is_the_largest_absolute_difference():
    expected = np.array([1000.0, 0.001, 5.0])
    actual = np.array([1001.0, 0.002, 5.0])  # rel diff is largest at [1], abs at [0]
    c = compare_arrays(actual, expected)
    assert c.worst_index == [0]
    assert c.max_abs_diff == pytest.approx(1.0)
    assert c.max_rel_diff == pytest.approx(1.0)
    assert c.mismatched == 2


# ----------------------------------------------------------------------------- NaN and Inf


def test_nan_in_actual_only_fails():
    actual = np.array([[1.0, 2.0], [np.nan, 4.0]])
    expected = np.array([[1.0, 2.0], [3.0, 4.0]])
    c = compare_arrays(actual, expected)
    assert c.passed is False
    assert c.mismatched == 1
    assert c.nonfinite_actual == 1
    assert c.nonfinite_expected == 0
    assert "NaN" in c.problem
    assert "actual has 1 NaN and 0 Inf" in c.problem
    assert "expected has" not in c.problem
    assert "(1, 0)" in c.problem
    # Statistics cover the finite positions only.
    assert c.max_abs_diff == 0.0
    assert c.total == 4
    assert c.problem in c.message()


def test_nan_in_both_at_same_place_needs_equal_nan():
    actual = np.array([1.0, np.nan, 3.0])
    expected = np.array([1.0, np.nan, 3.0])
    strict = compare_arrays(actual, expected)
    assert strict.passed is False
    assert strict.mismatched == 1
    assert "NaN" in strict.problem
    assert "(1,)" in strict.problem

    lenient = compare_arrays(actual, expected, tolerance=Tolerance(1e-7, 1e-7, equal_nan=True))
    assert lenient.passed is True
    assert lenient.mismatched == 0
    assert lenient.problem is None
    assert lenient.nonfinite_actual == 1 and lenient.nonfinite_expected == 1


def test_nan_at_different_places_fails_even_with_equal_nan():
    actual = np.array([np.nan, 2.0, 3.0])
    expected = np.array([1.0, np.nan, 3.0])
    c = compare_arrays(actual, expected, tolerance=Tolerance(1e-7, 1e-7, equal_nan=True))
    assert c.passed is False
    assert c.mismatched == 2
    assert "actual has 1 NaN" in c.problem
    assert "expected has 1 NaN" in c.problem
    assert "(0,)" in c.problem


def test_same_signed_infinities_pass():
    a = np.array([np.inf, 1.0, -np.inf])
    c = compare_arrays(a, a.copy())
    assert c.passed is True
    assert c.mismatched == 0
    assert c.problem is None
    assert c.nonfinite_actual == 2 and c.nonfinite_expected == 2


def test_opposite_infinities_fail():
    c = compare_arrays(np.array([1.0, np.inf]), np.array([1.0, -np.inf]))
    assert c.passed is False
    assert c.mismatched == 1
    assert "Inf" in c.problem
    assert "(1,)" in c.problem


@pytest.mark.parametrize(
    ("actual", "expected"),
    [([np.inf, 2.0], [1.0, 2.0]), ([1.0, 2.0], [1.0, -np.inf])],
)
def test_infinity_against_finite_fails(actual, expected):
    c = compare_arrays(np.array(actual), np.array(expected))
    assert c.passed is False
    assert c.problem is not None and "Inf" in c.problem


def test_nonfinite_failures_are_strict_json():
    c = compare_arrays(np.array([np.nan, np.inf, 1.0]), np.array([1.0, -np.inf, np.nan]))
    assert c.passed is False
    assert c.mismatched == 3
    assert c.cosine is None  # no position is finite on both sides
    assert _roundtrip(c) == c


# ----------------------------------------------------------------------------- shapes, dtypes


@pytest.mark.parametrize(("shape_a", "shape_b"), [((2, 3), (1, 3)), ((3,), (3, 1))])
def test_shape_mismatch_fails_without_broadcasting(shape_a, shape_b):
    c = compare_arrays(np.zeros(shape_a), np.zeros(shape_b), name="logits")
    assert c.passed is False
    assert c.problem.startswith("Shape mismatch")
    assert c.problem == f"Shape mismatch: {list(shape_a)} vs expected {list(shape_b)}."
    assert c.shape == list(shape_a)
    assert c.expected_shape == list(shape_b)
    assert c.total == 0
    assert c.message() == f"logits: tensors are not close!\n\n{c.problem}"
    _roundtrip(c)


def test_dtype_mismatch_fails_when_checked():
    actual = np.array([1.0, 2.0], dtype=np.float32)
    expected = np.array([1.0, 2.0 + 5e-6], dtype=np.float64)
    c = compare_arrays(actual, expected)
    assert c.passed is False
    assert c.problem == "Dtype mismatch: float32 vs expected float64."
    assert (c.dtype, c.expected_dtype) == ("float32", "float64")

    # Unchecked, the values are compared at the looser (float32) default tolerance.
    c = compare_arrays(actual, expected, check_dtype=False)
    assert c.passed is True
    assert c.problem is None
    assert (c.atol, c.rtol) == (1e-5, 1.3e-6)
    assert c.max_abs_diff == pytest.approx(5e-6, rel=1e-6)


def test_bfloat16_arrays_are_compared():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    expected = np.array([1.0, 2.0, 4.0], dtype=ml_dtypes.bfloat16)
    actual = np.array([1.0, 2.0, 4.03125], dtype=ml_dtypes.bfloat16)  # one bf16 ulp at 4
    c = compare_arrays(actual, expected)
    assert c.dtype == "bfloat16"
    assert (c.atol, c.rtol) == (1e-5, 1.6e-2)
    assert c.passed is True
    assert c.max_abs_diff == 0.03125
    assert c.worst_index == [2]


# ----------------------------------------------------------------------------- attention masks


def _masked_case():
    # batch 2, seq 4, hidden 3; sample 1 has two padded positions at the end.
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])
    expected = np.arange(24, dtype=np.float64).reshape(2, 4, 3)
    return mask, expected


def test_valid_positions():
    mask = np.array([[1, 0], [1, 1]])
    assert valid_positions((2, 2, 3), None) is None
    assert valid_positions((2,), mask) is None
    assert valid_positions((2, 3), mask) is None
    assert valid_positions((2, 2, 3, 5), np.ones((2, 3))) is None
    v = valid_positions((2, 2, 3), mask)
    assert v.shape == (2, 2, 3)
    assert v.dtype == bool
    assert v[0, 0].all() and not v[0, 1].any() and v[1].all()
    v2 = valid_positions((2, 2), mask)
    np.testing.assert_array_equal(v2, mask.astype(bool))


def test_mask_excludes_padding_from_verdict():
    mask, expected = _masked_case()
    actual = expected.copy()
    actual[1, 3, :] += 1000.0  # padded position
    actual[1, 2, 0] = np.nan  # padded position too
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is True
    assert c.mismatched == 0
    assert c.total == 24 - 2 * 3
    assert c.masked_out == 6
    assert c.masked_max_abs_diff == 1000.0
    assert c.max_abs_diff == 0.0
    assert c.nonfinite_actual == 0
    assert c.problem is None

    # Without the mask, the same arrays fail.
    unmasked = compare_arrays(actual, expected)
    assert unmasked.passed is False
    assert unmasked.mismatched == 4
    assert unmasked.masked_out == 0


def test_mask_keeps_valid_positions_and_maps_worst_index_back():
    mask, expected = _masked_case()
    actual = expected.copy()
    actual[1, 3, 2] += 1000.0  # padded: ignored
    actual[1, 1, 2] += 0.5  # valid: the worst element that counts
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is False
    assert c.mismatched == 1
    assert c.total == 18
    assert c.worst_index == [1, 1, 2]
    assert c.worst_expected == expected[1, 1, 2]
    assert c.worst_actual == expected[1, 1, 2] + 0.5
    assert c.max_abs_diff == 0.5
    assert c.masked_max_abs_diff == 1000.0
    assert "Excluded as padding: 6 elements (max abs diff there 1e+03)" in c.message()


def test_mask_does_not_apply_to_pooled_output():
    mask, _ = _masked_case()
    expected = np.arange(6, dtype=np.float64).reshape(2, 3)  # [batch, hidden], hidden != seq
    actual = expected.copy()
    actual[1, 2] += 1.0
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is False
    assert c.masked_out == 0
    assert c.total == 6
    assert c.worst_index == [1, 2]


def test_mask_of_wrong_shape_is_not_applied():
    _, expected = _masked_case()
    actual = expected.copy()
    actual[1, 3, 0] += 1000.0
    wrong_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])  # seq 5, leaf has seq 4
    c = compare_arrays(actual, expected, mask=wrong_mask)
    assert c.passed is False
    assert c.masked_out == 0
    assert c.total == 24
    assert c.worst_index == [1, 3, 0]


def test_mask_applies_to_token_level_two_dimensional_leaf():
    mask, _ = _masked_case()
    expected = np.zeros((2, 4))  # e.g. per-token scores [batch, seq]
    actual = expected.copy()
    actual[1, 3] = 5.0
    c = compare_arrays(actual, expected, mask=mask)
    assert c.passed is True
    assert c.masked_out == 2
    assert c.masked_max_abs_diff == 5.0


# ----------------------------------------------------------------------------- several batches


def test_compare_batches_counts_rows_across_batches():
    exp1 = np.arange(12, dtype=np.float64).reshape(2, 3, 2)
    exp2 = np.arange(20, dtype=np.float64).reshape(2, 5, 2) + 100.0
    act1, act2 = exp1.copy(), exp2.copy()
    act1[0, 1, 0] += 0.25
    act2[1, 4, 1] += 0.5
    c = compare_batches([act1, act2], [exp1, exp2], name="last_hidden_state")
    assert c.passed is False
    assert c.name == "last_hidden_state"
    assert c.total == 12 + 20
    assert c.mismatched == 2
    assert c.worst_index == [3, 4, 1]  # second batch, row 1 -> sample 2 + 1
    assert c.worst_expected == exp2[1, 4, 1]
    assert c.max_abs_diff == 0.5
    assert c.mean_abs_diff == pytest.approx(0.75 / 32, rel=1e-12)
    # shape/dtype describe the first batch
    assert c.shape == [2, 3, 2]


def test_compare_batches_with_masks():
    exp1 = np.zeros((2, 3, 2))
    exp2 = np.zeros((2, 5, 2))
    mask1 = np.ones((2, 3), dtype=np.int32)
    mask2 = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    act1, act2 = exp1.copy(), exp2.copy()
    act2[1, 4, 0] = 99.0  # padding
    act2[1, 2, 1] = 0.5  # valid
    c = compare_batches([act1, act2], [exp1, exp2], masks=[mask1, mask2])
    assert c.passed is False
    assert c.total == 12 + 20 - 4
    assert c.masked_out == 4
    assert c.masked_max_abs_diff == 99.0
    assert c.mismatched == 1
    assert c.worst_index == [3, 2, 1]


def test_compare_batches_nonfinite_index_counts_rows_across_batches():
    exp1, exp2 = np.zeros((2, 3)), np.zeros((3, 4))
    act2 = exp2.copy()
    act2[1, 2] = np.nan
    c = compare_batches([exp1.copy(), act2], [exp1, exp2])
    assert c.passed is False
    assert "(3, 2)" in c.problem


def test_compare_batches_shape_mismatch_in_a_later_batch():
    a = [np.zeros((2, 3)), np.zeros((1, 4))]
    b = [np.zeros((2, 3)), np.zeros((1, 5))]
    c = compare_batches(a, b)
    assert c.passed is False
    assert c.problem == "Shape mismatch: [1, 4] vs expected [1, 5]."


@pytest.mark.parametrize(
    ("actual", "expected", "masks"),
    [
        ([np.zeros(2), np.ones(2)], [np.zeros(2)], None),  # an expected batch missing
        ([np.zeros(2)], [np.zeros(2), np.ones(2)], None),  # an actual batch missing
        ([np.zeros(2), np.ones(2)], [np.zeros(2), np.zeros(2)], [None]),  # a mask missing
        ([], [], None),
    ],
)
def test_compare_batches_rejects_unequal_batch_counts(actual, expected, masks):
    # Zipping unequal lists would silently drop the differing batch and pass.
    with pytest.raises(ValueError, match="same number"):
        compare_batches(actual, expected, masks=masks)


# ----------------------------------------------------------------------------- nested outputs


def test_flatten_names_nested_structures():
    h = [np.full((1, 2), float(i)) for i in range(4)]
    tree = {
        "last_hidden_state": np.zeros((1, 2)),
        "pooler_output": None,
        "hidden_states": tuple(h),
        "a": {"b": np.ones(2), "c": None},
        "past": [{"key": np.ones(1), "value": np.zeros(1)}],
    }
    flat = flatten(tree)
    assert list(flat) == [
        "last_hidden_state",
        "hidden_states[0]",
        "hidden_states[1]",
        "hidden_states[2]",
        "hidden_states[3]",
        "a.b",
        "past[0].key",
        "past[0].value",
    ]
    np.testing.assert_array_equal(flat["hidden_states[3]"], h[3])
    assert all(isinstance(v, np.ndarray) for v in flat.values())


def test_flatten_top_level_shapes():
    x = np.ones(3)
    assert list(flatten(x)) == [""]
    assert list(flatten([x, x])) == ["[0]", "[1]"]
    assert flatten(None) == {}
    assert list(flatten((x, None, x))) == ["[0]", "[2]"]


def test_compare_outputs_leaf_by_leaf():
    expected = {
        "last_hidden_state": _grid(),
        "hidden_states": (np.zeros((2, 2)), np.ones((2, 2))),
        "extra": {"score": np.array([1.0])},
    }
    actual = {
        "last_hidden_state": _grid(),
        "hidden_states": (np.zeros((2, 2)), np.array([[1.0, 1.0], [1.0, 3.0]])),
        "extra": {"score": np.array([1.0])},
    }
    results = compare_outputs(actual, expected)
    assert [c.name for c in results] == [
        "last_hidden_state",
        "hidden_states[0]",
        "hidden_states[1]",
        "extra.score",
    ]
    assert [c.passed for c in results] == [True, True, False, True]
    bad = results[2]
    assert bad.worst_index == [1, 1]
    assert bad.max_abs_diff == 2.0


def test_compare_outputs_missing_leaf_names_the_side():
    expected = {"logits": np.zeros(2), "pooler_output": np.zeros(3), "only_expected": np.ones(1)}
    actual = {"logits": np.zeros(2), "pooler_output": None, "only_actual": np.ones(4)}
    results = {c.name: c for c in compare_outputs(actual, expected)}
    assert list(results) == ["logits", "pooler_output", "only_expected", "only_actual"]
    assert results["logits"].passed is True

    missing = results["pooler_output"]
    assert missing.passed is False
    assert missing.problem == "Output 'pooler_output' is missing from the actual side."
    assert missing.shape == [] and missing.expected_shape == [3]

    assert results["only_expected"].problem == (
        "Output 'only_expected' is missing from the actual side."
    )
    extra = results["only_actual"]
    assert extra.passed is False
    assert extra.problem == "Output 'only_actual' is missing from the expected side."
    assert extra.shape == [4] and extra.expected_shape == []
    assert extra.dtype == "float64" and extra.expected_dtype == ""
    _roundtrip(extra)


def test_compare_outputs_passes_mask_to_every_leaf():
    mask = np.array([[1, 1, 0]])
    expected = {"last_hidden_state": np.zeros((1, 3, 2)), "pooler_output": np.zeros((1, 2))}
    actual = {"last_hidden_state": np.zeros((1, 3, 2)), "pooler_output": np.zeros((1, 2))}
    actual["last_hidden_state"][0, 2, :] = 7.0
    results = compare_outputs(actual, expected, mask=mask)
    assert [c.passed for c in results] == [True, True]
    assert results[0].masked_out == 2
    assert results[1].masked_out == 0


def test_compare_output_batches():
    exp = [{"h": np.zeros((2, 3))}, {"h": np.zeros((1, 5))}]
    act = [{"h": np.zeros((2, 3))}, {"h": np.zeros((1, 5))}]
    act[1]["h"][0, 4] = 1.0
    (c,) = compare_output_batches(act, exp)
    assert c.name == "h"
    assert c.total == 11
    assert c.worst_index == [2, 4]
    assert c.passed is False


# ----------------------------------------------------------------------------- messages


def _three_leaves() -> list[Comparison]:
    base = _grid().astype(np.float32)
    small = base.copy()
    small[1, 2] += 0.5
    large = base.copy()
    large[0, 1] += 2.0
    return compare_outputs(
        {"small": small, "same": base.copy(), "large": large},
        {"small": base, "same": base, "large": base},
    )


def test_failure_message_lists_failing_leaves_worst_first():
    results = _three_leaves()
    assert [c.passed for c in results] == [False, True, False]
    msg = failure_message(results)
    assert msg.startswith("2 of 3 outputs differ.")
    assert "same:" not in msg
    assert msg.index("large: tensors are not close!") < msg.index("small: tensors are not close!")
    assert "Mismatched elements: 1 / 6 (16.7%)" in msg
    assert "Greatest absolute difference: 0.5 at index (1, 2) (up to 1e-05 allowed)" in msg
    assert "Greatest absolute difference: 2 at index (0, 1) (up to 1e-05 allowed)" in msg
    assert "Greatest relative difference: 1 (up to 1.3e-06 allowed)" in msg
    assert "Worst element: actual 6.5, expected 6" in msg


def test_failure_message_puts_problems_first():
    results = _three_leaves()
    shape = compare_arrays(np.zeros(2), np.zeros(3), name="shape_bad")
    msg = failure_message(results + [shape])
    assert msg.startswith("3 of 4 outputs differ.")
    assert msg.index("shape_bad:") < msg.index("large:") < msg.index("small:")
    assert "Shape mismatch: [2] vs expected [3]." in msg


def test_failure_message_when_all_close():
    a = _grid()
    results = compare_outputs({"x": a, "y": a}, {"x": a.copy(), "y": a.copy()})
    assert failure_message(results) == "All outputs are close."
    assert failure_message([]) == "All outputs are close."


def test_message_without_name():
    c = compare_arrays(np.array([1.0, 2.0]), np.array([1.0, 3.0]))
    msg = c.message()
    assert msg.startswith("Tensors are not close!\n\n")
    assert "Mismatched elements: 1 / 2 (50.0%)" in msg
    assert "at index (1,)" in msg
    assert "(up to 1e-07 allowed)" in msg


# ----------------------------------------------------------------------------- to_numpy


class FakeTfTensor:
    """Has .numpy() like an eager TF tensor."""

    def __init__(self, values, dtype=np.float32):
        self._values = np.array(values, dtype=dtype)

    def numpy(self):
        return self._values


class FakeTorchTensor:
    """Has .detach().cpu() and, for bfloat16, .float() like a torch tensor."""

    def __init__(self, values, dtype="torch.float32"):
        self._values = np.array(values, dtype=np.float32)
        self.dtype = dtype
        self.calls: list[str] = []

    def detach(self):
        self.calls.append("detach")
        return self

    def cpu(self):
        self.calls.append("cpu")
        return self

    def float(self):
        self.calls.append("float")
        return FakeTorchTensor(self._values)

    def numpy(self):
        if self.dtype == "torch.bfloat16":
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self._values


def test_to_numpy_accepts_objects_with_numpy_method():
    out = to_numpy(FakeTfTensor([[1.0, 2.0]]))
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[1.0, 2.0]])


def test_a_tf_tensor_is_read_in_place_not_copied():
    """TF's .numpy() copies; a cross-check keeps every output, so each copy cost time
    and fresh memory. The array is a read-only view of the tensor's own buffer."""
    from tfparity.adapters.runtime.imports import import_tf

    tf = import_tf()
    tensor = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    out = to_numpy(tensor)
    np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3))
    assert out.dtype == np.float32 and not out.flags.writeable and out.base is not None
    assert to_numpy(tensor).__array_interface__["data"][0] == out.__array_interface__["data"][0]
    assert tensor.numpy().__array_interface__["data"][0] != out.__array_interface__["data"][0]


def test_to_numpy_torch_like_paths():
    t = FakeTorchTensor([1.0, 2.0])
    np.testing.assert_array_equal(to_numpy(t), [1.0, 2.0])
    assert t.calls == ["detach", "cpu"]
    bf = FakeTorchTensor([3.0], dtype="torch.bfloat16")
    np.testing.assert_array_equal(to_numpy(bf), [3.0])
    assert bf.calls == ["detach", "cpu", "float"]


def test_to_numpy_plain_values():
    a = np.ones(3)
    assert to_numpy(a) is a
    out = to_numpy([[1, 2], [3, 4]])
    assert isinstance(out, np.ndarray) and out.shape == (2, 2)
    assert to_numpy(2.5).shape == ()


def test_compare_and_flatten_accept_fake_tensors():
    expected = {"logits": FakeTfTensor([1.0, 2.0, 3.0])}
    actual = {"logits": FakeTfTensor([1.0, 2.0, 3.5])}
    assert isinstance(flatten(actual)["logits"], np.ndarray)
    (c,) = compare_outputs(actual, expected)
    assert c.dtype == "float32"
    assert c.passed is False
    assert c.worst_index == [2]
    assert c.max_abs_diff == 0.5


# ----------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    "make",
    [
        lambda: compare_arrays(_grid(), _grid()),
        lambda: compare_arrays(_grid() + 0.5, _grid(), name="shifted"),
        lambda: compare_arrays(np.array([np.nan, 1.0]), np.array([1.0, 1.0])),
        lambda: compare_arrays(np.array([np.nan, np.nan]), np.array([np.nan, np.inf])),
        lambda: compare_arrays(np.zeros((2, 3)), np.zeros((1, 3))),
        lambda: compare_arrays(np.zeros(2, np.float32), np.zeros(2, np.float64)),
        lambda: compare_arrays(
            np.full((2, 4, 3), np.nan), np.zeros((2, 4, 3)), mask=np.zeros((2, 4))
        ),
        lambda: compare_batches(
            [np.zeros((2, 2)), np.ones((1, 3))], [np.zeros((2, 2)), np.zeros((1, 3))]
        ),
    ],
)
def test_comparison_is_strict_json_and_round_trips(make):
    c = make()
    data = dataclasses.asdict(c)
    text = json.dumps(data, allow_nan=False)
    back = Comparison(**json.loads(text))
    assert back == c
    assert back.message() == c.message()
    for key in ("total", "mismatched", "masked_out", "nonfinite_actual", "nonfinite_expected"):
        assert type(data[key]) is int
    if c.worst_index is not None:
        assert all(type(i) is int for i in c.worst_index)


def test_pooled_output_is_not_masked_even_when_its_width_equals_the_sequence_length():
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    pooled = np.zeros((2, 3), np.float32)
    other = pooled.copy()
    other[1, 2] = 1.0  # a real difference in the pooled vector, under a "padding" column
    (c,) = compare_outputs({"pooler_output": other}, {"pooler_output": pooled}, mask=mask)
    assert c.passed is False and c.masked_out == 0
    (per_token,) = compare_outputs({"scores": other}, {"scores": pooled}, mask=mask)
    assert per_token.passed is True and per_token.masked_out == 3


# ----------------------------------------------------------------------------- properties
# Hypothesis: random shapes, dtypes, NaN/Inf and masks (issue 12).

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from tfparity.compare import Tolerance as _Tol  # noqa: E402
from tfparity.compare import compare_arrays as _compare  # noqa: E402
from tfparity.compare import referee as _referee_module  # noqa: E402
from tfparity.compare import stats as _stats  # noqa: E402
from tfparity.compare.masks import Layout  # noqa: E402


@contextlib.contextmanager
def _blocks(size: int):
    """Blocks of ``size`` elements in the fast path and the referee's sums."""
    saved = _stats.BLOCK
    _stats.BLOCK = _referee_module.BLOCK = size
    try:
        yield
    finally:
        _stats.BLOCK = _referee_module.BLOCK = saved


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_FLOAT_DTYPES = st.sampled_from([np.float16, np.float32, np.float64])
_SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)


@st.composite
def _pair(draw, finite: bool = True):
    """Two arrays of one random shape and float dtype (finite, or with NaN/Inf too)."""
    dtype = draw(_FLOAT_DTYPES)
    shape = draw(_SHAPES)
    elements = st.floats(-1e3, 1e3, width=16)
    if not finite:
        elements = elements | st.sampled_from([np.nan, np.inf, -np.inf])
    a = draw(hnp.arrays(dtype, shape, elements=elements))
    b = draw(hnp.arrays(dtype, shape, elements=elements))
    return a, b


@st.composite
def _mask_for(draw, shape):
    if len(shape) < 2:
        return None
    return draw(hnp.arrays(np.int32, shape[:2], elements=st.integers(0, 1)))


@_SETTINGS
@given(
    data=st.data(),
    atol=st.floats(0, 10, allow_nan=False),
    rtol=st.floats(0, 1, allow_nan=False),
)
def test_property_never_passes_a_finite_difference_beyond_the_tolerance(data, atol, rtol):
    a, b = data.draw(_pair())
    mask = data.draw(_mask_for(a.shape))
    c = _compare(a, b, mask=mask, tolerance=_Tol(atol=atol, rtol=rtol))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    keep = np.ones(a.shape, bool)
    if mask is not None:
        keep = np.broadcast_to(mask.astype(bool).reshape(mask.shape + (1,) * (a.ndim - 2)), a.shape)
    beyond = (np.abs(a64 - b64) > atol + rtol * np.abs(b64)) & keep
    if beyond.any():
        assert not c.passed and c.mismatched == int(beyond.sum())
    if not keep.any():
        assert not c.passed  # everything masked: nothing compared never passes
    if c.passed:
        assert c.total == int(keep.sum()) > 0


@_SETTINGS
@given(data=st.data())
def test_property_identical_finite_inputs_never_fail(data):
    a, _ = data.draw(_pair())
    mask = data.draw(_mask_for(a.shape))
    if mask is not None:
        mask[(0,) * mask.ndim] = 1  # at least one element is compared
    for tol in (None, _Tol(atol=0.0, rtol=0.0)):
        c = _compare(a, a.copy(), mask=mask, tolerance=tol)
        assert c.passed and c.mismatched == 0 and c.max_abs_diff == 0.0


@_SETTINGS
@given(data=st.data())
def test_property_worst_index_holds_the_worst_difference(data):
    a, b = data.draw(_pair())
    mask = data.draw(_mask_for(a.shape))
    c = _compare(a, b, mask=mask)
    if c.total == 0:
        return
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    if mask is not None:
        keep = mask.astype(bool).reshape(mask.shape + (1,) * (a.ndim - 2))
        diff = np.where(np.broadcast_to(keep, a.shape), diff, -1.0)
    index = tuple(c.worst_index)
    assert diff[index] == c.max_abs_diff == diff.max()
    assert c.worst_actual == float(a[index]) and c.worst_expected == float(b[index])


@_SETTINGS
@given(data=st.data())
def test_property_nonfinite_mismatches_never_pass(data):
    a, b = data.draw(_pair(finite=False))
    c = _compare(a, b, tolerance=_Tol(atol=1e3, rtol=1.0))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = (a64 == b64) | (np.isfinite(a64) & np.isfinite(b64))
    if not same.all():  # a NaN, or an Inf the other side does not match exactly
        assert not c.passed and c.problem and "Non-finite" in c.problem
    if c.passed:
        assert c.nonfinite_actual == c.nonfinite_expected


@_SETTINGS
@given(
    bad=st.sampled_from([float("nan"), float("inf"), -float("inf"), -1e-9, -5.0]),
    which=st.sampled_from(["atol", "rtol"]),
)
def test_property_unusable_tolerances_are_refused(bad, which):
    from tfparity.compare import ToleranceError

    kwargs = {"atol": 0.0, "rtol": 0.0, which: bad}
    with pytest.raises(ToleranceError, match=which):
        _Tol(**kwargs)


@_SETTINGS
@given(
    data=st.data(),
    atol=st.floats(0, 10, allow_nan=False),
    rtol=st.floats(0, 1, allow_nan=False),
)
def test_property_the_finite_fast_path_equals_the_general_path(data, atol, rtol):
    """The all-finite fast path (blocks converted in cache, no gathered copy) gives the
    general path's values; its cosine sums block by block, equal up to rounding."""
    a, b = data.draw(_pair())
    mask = data.draw(_mask_for(a.shape))
    _assert_fast_equals_general([a], [b], [mask], _Tol(atol=atol, rtol=rtol))


def _assert_fast_equals_general(a_list, b_list, masks, tol):
    layout = Layout.of(a_list, masks)
    general = _stats._general_stats(_stats._gather_valid(a_list, b_list, layout), tol)
    stats = _stats._fused_stats(a_list, b_list, layout, tol)
    assert stats is not None
    cosine, expected_cosine = stats.pop("cosine"), general.pop("cosine")
    assert stats == general
    if expected_cosine is None:
        assert cosine is None
    else:
        assert cosine == pytest.approx(expected_cosine, rel=1e-12, abs=1e-12)


@_SETTINGS
@given(data=st.data(), n=st.integers(1, 4), block=st.integers(1, 9))
def test_property_the_fast_path_over_batches_equals_the_general_path(data, n, block):
    """Several batches of different lengths, padded: offsets and the first worst index
    carry across batches as across blocks."""
    width = data.draw(st.integers(1, 3))
    a_list, b_list, masks = [], [], []
    for _ in range(n):
        shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), width)
        elements = st.floats(-1e3, 1e3, width=32)
        a_list.append(data.draw(hnp.arrays(np.float32, shape, elements=elements)))
        b_list.append(data.draw(hnp.arrays(np.float32, shape, elements=elements)))
        masks.append(data.draw(_mask_for(shape)))
    with _blocks(block):
        _assert_fast_equals_general(a_list, b_list, masks, _Tol(atol=1e-3, rtol=1e-3))


@pytest.mark.parametrize("block", [1, 2, 9])
def test_the_fast_path_counts_mismatches_at_the_tolerance_edge(block):
    """Blocks whose largest |a - b| - rtol|b| is under atol skip the mismatch count;
    at and just above that edge they count, as the general path does. atol 0.5 and
    rtol 0.25 with |b| = 2 put the bound at exactly 1.0."""
    b = np.full(6, 2.0)
    a = np.array([3.0, np.nextafter(3.0, 4.0), 3.5, 2.25, 1.0, 2.0])  # |a - b| <= 1.5
    tol = _Tol(atol=0.5, rtol=0.25)
    with _blocks(block):
        _assert_fast_equals_general([a], [b], [None], tol)
        stats = _stats._fused_stats([a], [b], Layout.of([a], [None]), tol)
    assert stats["mismatched"] == 2 and stats["required_atol"] == 1.0


def test_the_fast_path_declines_non_finite_differences_for_the_general_path():
    a = np.ones((2, 3), np.float32)
    for bad in (np.nan, np.inf):
        b = a.copy()
        b[1, 2] = bad
        assert _stats._fused_stats([a], [b], Layout.of([a], [None]), _Tol(atol=0, rtol=0)) is None
        c = compare_arrays(a, b)
        assert not c.passed and c.nonfinite_expected == 1 and c.problem


@_SETTINGS
@given(
    data=st.data(),
    block=st.integers(1, 9),
    atol=st.floats(0, 10, allow_nan=False),
    rtol=st.floats(0, 1, allow_nan=False),
)
def test_property_the_fast_path_in_small_blocks_equals_the_general_path(data, block, atol, rtol):
    """Block maxima, counts and the first argmax combine exactly across block edges."""
    a, b = data.draw(_pair())
    mask = data.draw(_mask_for(a.shape))
    with _blocks(block):
        _assert_fast_equals_general([a], [b], [mask], _Tol(atol=atol, rtol=rtol))


@_SETTINGS
@given(
    pair=_pair(),
    block=st.integers(1, 9),
)
def test_property_rmse_in_blocks_is_the_plain_formula(pair, block):
    from tfparity.compare import rmse

    a, b = (np.asarray(x, np.float64) for x in pair)
    with _blocks(block):
        got = rmse(a, b)
    expected = float(np.sqrt(np.mean((a - b) ** 2))) if a.size else 0.0
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_padding_is_left_out_and_its_largest_finite_difference_reported():
    a = np.zeros((2, 3, 4), np.float32)
    b = a.copy()
    b[0, 2] = 5.0  # a padded row differs by 5
    b[1, 1] = np.nan  # and one is NaN: not a finite difference
    mask = np.array([[1, 1, 0], [1, 0, 0]])
    (c,) = compare_outputs({"x": a}, {"x": b}, mask=mask)
    assert c.passed and c.total == 3 * 4
    assert c.masked_out == 3 * 4 and c.masked_max_abs_diff == 5.0


@_SETTINGS
@given(hnp.arrays(np.float64, st.integers(1, 300), elements=st.floats(0, 1e3)))
def test_property_median_and_p99_are_numpys_percentiles(d):
    _median_p99 = _stats._median_p99
    assert _median_p99(d) == tuple(float(x) for x in np.percentile(d, [50, 99]))
    scratch = np.empty_like(d)
    before = d.copy()
    assert _median_p99(d, scratch) == _median_p99(d) and np.array_equal(d, before)


def test_all_finite_is_exact_where_a_sum_overflows_or_a_part_is_infinite():
    from tfparity.compare import all_finite

    assert all_finite(np.full(10**5, 60000, np.float16))  # a float16 sum would overflow
    assert all_finite(np.array([1e308, 1e308]))  # so does a float64 one: still finite
    assert all_finite(np.full(4, 3e38, np.float32))  # float32 sums float32: it overflows
    assert not all_finite(np.array([1.0, np.nan], np.float32))
    assert not all_finite(np.array([np.inf, -np.inf]))  # the sum is NaN, not Inf
    assert not all_finite(np.array([1 + 1j, complex(0, np.inf)], np.complex64))


@_SETTINGS
@given(data=st.data(), n=st.integers(1, 3), block=st.integers(1, 9))
def test_property_referee_sums_batch_by_batch_are_the_plain_formula(data, n, block):
    """RefereeSums adds each batch's float64 run as it arrives (in blocks); the RMSEs
    equal the plain formula on the gathered valid elements, up to rounding."""
    from tfparity.compare import Referee, RefereeSums

    a_list, r_list, t_list, masks = [], [], [], []
    for _ in range(n):
        shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), 2)
        t = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-10, 10)))
        noise = (data.draw(st.floats(0, 1e-2)), data.draw(st.floats(0, 1e-2)))
        t_list.append(t)
        a_list.append((t + noise[0] * np.sin(7 * t)).astype(np.float32))
        r_list.append((t + noise[1] * np.cos(5 * t)).astype(np.float32))
        masks.append(data.draw(_mask_for(shape)))
    sums = RefereeSums()
    with _blocks(block):
        for a, r, t, m in zip(a_list, r_list, t_list, masks, strict=True):
            sums.add(a, r, t, m)
    got = Referee().result("x", sums)
    keep = [
        np.ones(t.shape, bool)
        if m is None
        else np.broadcast_to(np.asarray(m, bool)[..., None], t.shape)
        for m, t in zip(masks, t_list, strict=True)
    ]
    a, r, t = (
        np.concatenate([x[k] for x, k in zip(xs, keep, strict=True)]).astype(np.float64)
        for xs in (a_list, r_list, t_list)
    )

    def plain(u, v):
        return float(np.sqrt(np.mean((u - v) ** 2))) if u.size else 0.0

    assert got.actual_rmse == pytest.approx(plain(a, t), rel=1e-9, abs=1e-300)
    assert got.reference_rmse == pytest.approx(plain(r, t), rel=1e-9, abs=1e-300)
    scale = float(np.sqrt(np.mean(t**2))) if t.size else 0.0
    expected_allowed = Referee().factor_for(a.size) * plain(r, t) + 1e-7 * scale
    assert got.allowed_rmse == pytest.approx(expected_allowed, rel=1e-9, abs=1e-300)


def test_referee_sums_fail_a_non_finite_candidate_and_refuse_other_shapes():
    from tfparity.compare import Referee, RefereeSums, referee_batches

    t = np.linspace(-1, 1, 24).reshape(2, 3, 4)
    a, r = t.astype(np.float32), t.astype(np.float32)
    a[1, 2, 3] = np.nan
    verdict = referee_batches("x", [a], [r], [t])
    assert not verdict.passed and np.isnan(verdict.actual_rmse) and verdict.reference_rmse < 1e-7
    clean = referee_batches("x", [r], [r], [t])
    assert clean.passed and clean.actual_rmse == clean.reference_rmse
    sums = RefereeSums()
    sums.add(r[:, :2], r, t, None)
    assert Referee().result("x", sums) is None
    with pytest.raises(ValueError, match="differ in shape"):
        referee_batches("x", [r[:, :2]], [r], [t])


@_SETTINGS
@given(
    hnp.arrays(np.float32, st.integers(1, 200), elements=st.floats(-1e3, 1e3, width=32)),
    st.booleans(),
)
def test_property_a_comparison_reports_numpys_median_and_p99(a, same):
    # equal arrays take the shortcut (both 0, no partition); others the partitions
    b = a.copy() if same else a + np.float32(0.5)
    c = compare_arrays(a, b)
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    median, p99 = np.percentile(d, [50, 99])
    assert (c.median_abs_diff, c.p99_abs_diff) == (float(median), float(p99))


@pytest.mark.parametrize(
    "values",
    [
        lambda r, n: np.abs(r.standard_normal(n)) * 1e-6,  # a hidden state's differences
        lambda r, n: np.where(r.random(n) < 0.7, 0.0, r.random(n)),  # mostly exact zeros
        lambda r, n: r.integers(0, 4, n).astype(np.float64),  # a few values, many ties
        lambda r, n: r.pareto(1.5, n),  # a heavy tail
        lambda r, n: np.sort(r.random(n)),  # ordered
    ],
)
@pytest.mark.parametrize("n", [65536, 200_003])
def test_large_arrays_give_numpys_median_and_p99_exactly(values, n):
    d = values(np.random.default_rng(n), n).astype(np.float64)
    before = d.copy()
    assert _stats._median_p99(d) == tuple(float(x) for x in np.percentile(d, [50, 99]))
    assert np.array_equal(d, before)  # read, not reordered


def test_the_sampled_bracket_holds_on_a_hidden_state_like_array():
    d = np.abs(np.random.default_rng(0).standard_normal(300_000))
    assert _stats._bracketed(d) == tuple(float(x) for x in np.percentile(d, [50, 99]))
