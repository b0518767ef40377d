"""Properties of tfparity.compare, drawn by Hypothesis: random shapes, dtypes, NaN/Inf
and masks (issue 12); and the fast path and the referee's sums in blocks, held equal to
the plain formulas (numpy only).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tfparity.compare import Tolerance, compare_arrays, compare_outputs
from tfparity.compare import referee as referee_module
from tfparity.compare import stats as _stats
from tfparity.compare.masks import Layout

# Any numpy warning (overflow, invalid value, ...) inside tfparity.compare is a bug here.
pytestmark = pytest.mark.filterwarnings("error")


@contextlib.contextmanager
def _blocks(size: int):
    """Blocks of ``size`` elements in the fast path and the referee's sums."""
    saved = _stats.BLOCK
    _stats.BLOCK = referee_module.BLOCK = size
    try:
        yield
    finally:
        _stats.BLOCK = referee_module.BLOCK = saved


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
    c = compare_arrays(a, b, mask=mask, tolerance=Tolerance(atol=atol, rtol=rtol))
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
    for tol in (None, Tolerance(atol=0.0, rtol=0.0)):
        c = compare_arrays(a, a.copy(), mask=mask, tolerance=tol)
        assert c.passed and c.mismatched == 0 and c.max_abs_diff == 0.0


@_SETTINGS
@given(data=st.data())
def test_property_worst_index_holds_the_worst_difference(data):
    a, b = data.draw(_pair())
    mask = data.draw(_mask_for(a.shape))
    c = compare_arrays(a, b, mask=mask)
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
    c = compare_arrays(a, b, tolerance=Tolerance(atol=1e3, rtol=1.0))
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
        Tolerance(**kwargs)


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
    _assert_fast_equals_general([a], [b], [mask], Tolerance(atol=atol, rtol=rtol))


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
        _assert_fast_equals_general(a_list, b_list, masks, Tolerance(atol=1e-3, rtol=1e-3))


@pytest.mark.parametrize("block", [1, 2, 9])
def test_the_fast_path_counts_mismatches_at_the_tolerance_edge(block):
    """Blocks whose largest |a - b| - rtol|b| is under atol skip the mismatch count;
    at and just above that edge they count, as the general path does. atol 0.5 and
    rtol 0.25 with |b| = 2 put the bound at exactly 1.0."""
    b = np.full(6, 2.0)
    a = np.array([3.0, np.nextafter(3.0, 4.0), 3.5, 2.25, 1.0, 2.0])  # |a - b| <= 1.5
    tol = Tolerance(atol=0.5, rtol=0.25)
    with _blocks(block):
        _assert_fast_equals_general([a], [b], [None], tol)
        stats = _stats._fused_stats([a], [b], Layout.of([a], [None]), tol)
    assert stats["mismatched"] == 2 and stats["required_atol"] == 1.0


def test_the_fast_path_declines_non_finite_differences_for_the_general_path():
    a = np.ones((2, 3), np.float32)
    for bad in (np.nan, np.inf):
        b = a.copy()
        b[1, 2] = bad
        assert (
            _stats._fused_stats([a], [b], Layout.of([a], [None]), Tolerance(atol=0, rtol=0)) is None
        )
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
        _assert_fast_equals_general([a], [b], [mask], Tolerance(atol=atol, rtol=rtol))


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
    from tfparity.compare import Referee, RefereeSums

    t = np.linspace(-1, 1, 24).reshape(2, 3, 4)
    a, r = t.astype(np.float32), t.astype(np.float32)
    a[1, 2, 3] = np.nan
    verdict = Referee().batches("x", [a], [r], [t])
    assert not verdict.passed and np.isnan(verdict.actual_rmse) and verdict.reference_rmse < 1e-7
    clean = Referee().batches("x", [r], [r], [t])
    assert clean.passed and clean.actual_rmse == clean.reference_rmse
    sums = RefereeSums()
    sums.add(r[:, :2], r, t, None)
    assert Referee().result("x", sums) is None
    with pytest.raises(ValueError, match="differ in shape"):
        Referee().batches("x", [r[:, :2]], [r], [t])


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
