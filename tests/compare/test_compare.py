"""tfparity.compare on single arrays, on hand-made numpy arrays with known answers:
tolerances by dtype, exact equality, one bad element, NaN and Inf, shapes and dtypes,
and the Comparison as strict JSON. Masks, batches, nested outputs, messages and
framework tensors: test_compare_outputs.py; Hypothesis properties and the fast path:
test_compare_properties.py.

No deep-learning framework is imported here, so these tests run anywhere numpy does.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.compare import (
    Tolerance,
    compare_arrays,
    compare_batches,
    default_tolerance,
)

# Any numpy warning (overflow, invalid value, ...) inside tfparity.compare is a bug here.
pytestmark = pytest.mark.filterwarnings("error")


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


def test_empty_arrays_pass(roundtrip):
    c = compare_arrays(np.zeros((0, 3)), np.zeros((0, 3)))
    assert c.passed is True
    assert c.total == 0
    assert c.worst_index is None
    assert c.worst_actual is None and c.worst_expected is None
    assert c.cosine is None
    assert c.max_abs_diff == 0.0
    assert c.mismatched_percent == 0.0
    roundtrip(c)


def test_zero_dimensional_arrays():
    c = compare_arrays(np.float64(1.5), np.float64(1.0))
    assert c.passed is False
    assert c.shape == []
    assert c.total == 1
    assert c.worst_index == []
    assert c.max_abs_diff == 0.5
    assert "at index ()" in c.message()


# ----------------------------------------------------------------------------- one bad element


def test_single_perturbed_element_statistics(grid):
    expected = grid
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


def test_required_atol_is_the_threshold(grid):
    expected = grid
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


def test_expected_zero_gives_finite_huge_relative_difference(roundtrip):
    c = compare_arrays(np.array([10.0, 1.0]), np.array([0.0, 1.0]))
    assert c.passed is False
    assert c.max_abs_diff == 10.0
    assert np.isfinite(c.max_rel_diff)
    assert c.max_rel_diff > 1e300
    assert roundtrip(c) == c


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


def test_nonfinite_failures_are_strict_json(roundtrip):
    c = compare_arrays(np.array([np.nan, np.inf, 1.0]), np.array([1.0, -np.inf, np.nan]))
    assert c.passed is False
    assert c.mismatched == 3
    assert c.cosine is None  # no position is finite on both sides
    assert roundtrip(c) == c


# ----------------------------------------------------------------------------- shapes, dtypes


@pytest.mark.parametrize(("shape_a", "shape_b"), [((2, 3), (1, 3)), ((3,), (3, 1))])
def test_shape_mismatch_fails_without_broadcasting(shape_a, shape_b, roundtrip):
    c = compare_arrays(np.zeros(shape_a), np.zeros(shape_b), name="logits")
    assert c.passed is False
    assert c.problem.startswith("Shape mismatch")
    assert c.problem == f"Shape mismatch: {list(shape_a)} vs expected {list(shape_b)}."
    assert c.shape == list(shape_a)
    assert c.expected_shape == list(shape_b)
    assert c.total == 0
    assert c.message() == f"logits: tensors are not close!\n\n{c.problem}"
    roundtrip(c)


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


# ----------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(
    "make",
    [
        lambda g: compare_arrays(g, g.copy()),
        lambda g: compare_arrays(g + 0.5, g, name="shifted"),
        lambda g: compare_arrays(np.array([np.nan, 1.0]), np.array([1.0, 1.0])),
        lambda g: compare_arrays(np.array([np.nan, np.nan]), np.array([np.nan, np.inf])),
        lambda g: compare_arrays(np.zeros((2, 3)), np.zeros((1, 3))),
        lambda g: compare_arrays(np.zeros(2, np.float32), np.zeros(2, np.float64)),
        lambda g: compare_arrays(
            np.full((2, 4, 3), np.nan), np.zeros((2, 4, 3)), mask=np.zeros((2, 4))
        ),
        lambda g: compare_batches(
            [np.zeros((2, 2)), np.ones((1, 3))], [np.zeros((2, 2)), np.zeros((1, 3))]
        ),
    ],
)
def test_comparison_is_strict_json_and_round_trips(make, grid, roundtrip):
    c = make(grid)
    back = roundtrip(c)
    assert back == c
    assert back.message() == c.message()
    for key in ("total", "mismatched", "masked_out", "nonfinite_actual", "nonfinite_expected"):
        assert type(getattr(back, key)) is int
    if c.worst_index is not None:
        assert all(type(i) is int for i in c.worst_index)
