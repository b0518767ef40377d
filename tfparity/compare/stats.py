"""Leaf statistics: one named tensor compared over its batches (numpy only).

In the spirit of ``torch.testing``: check shape and dtype, compute the closeness
``|a - b| <= atol + rtol * |b|`` over the positions that matter (padding excluded, see
:mod:`.masks`) and summarise the error. Two paths give equal values: a fast one in
cache-sized float64 blocks when every difference is finite, and a general one that also
judges NaN and Inf. ``actual`` is the side under test, ``expected`` the reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..trace import to_numpy
from .masks import Layout, token_rows
from .record import Comparison
from .tolerance import Closeness, Tolerance, default_tolerance, dtype_name


def compare_arrays(
    actual: Any,
    expected: Any,
    *,
    name: str = "",
    mask: np.ndarray | None = None,
    tolerance: Tolerance | None = None,
    check_dtype: bool = True,
) -> Comparison:
    """Compare two arrays; see :func:`compare_batches` for several batches at once."""
    return compare_batches(
        [actual], [expected], name=name, masks=[mask], tolerance=tolerance, check_dtype=check_dtype
    )


def compare_batches(
    actual: Sequence[Any],
    expected: Sequence[Any],
    *,
    name: str = "",
    masks: Sequence[np.ndarray | None] | None = None,
    tolerance: Tolerance | None = None,
    check_dtype: bool = True,
) -> Comparison:
    """Compare one named tensor over several batches (which may differ in length).

    Statistics are computed over all batches together; the worst index is given as
    ``(sample, ...)`` where ``sample`` counts rows across the batches in order.
    """
    a_list = [to_numpy(a) for a in actual]
    b_list = [to_numpy(b) for b in expected]
    masks = list(masks) if masks is not None else [None] * len(a_list)
    if not a_list or len(b_list) != len(a_list) or len(masks) != len(a_list):
        raise ValueError(
            f"compare_batches needs the same number (>= 1) of actual, expected and mask "
            f"batches; got {len(a_list)}, {len(b_list)} and {len(masks)}."
        )
    tol = tolerance or default_tolerance(a_list[0].dtype, b_list[0].dtype)
    shape_a, shape_b = list(a_list[0].shape), list(b_list[0].shape)
    dtype_a, dtype_b = dtype_name(a_list[0].dtype), dtype_name(b_list[0].dtype)
    base = dict(
        name=name,
        shape=shape_a,
        expected_shape=shape_b,
        dtype=dtype_a,
        expected_dtype=dtype_b,
        atol=tol.atol,
        rtol=tol.rtol,
    )

    for a, b in zip(a_list, b_list, strict=True):
        if a.shape != b.shape:
            problem = f"Shape mismatch: {list(a.shape)} vs expected {list(b.shape)}."
            return Comparison.failed(problem, **base)
    if check_dtype and dtype_a != dtype_b:
        return Comparison.failed(f"Dtype mismatch: {dtype_a} vs expected {dtype_b}.", **base)
    if any(np.iscomplexobj(x) for x in a_list + b_list):
        # float64 conversion would drop the imaginary part (with only a warning) and
        # pass tensors whose imaginary parts differ.
        raise TypeError(
            f"{name or 'the tensors'}: complex arrays are not compared (the imaginary part "
            "would be dropped); compare x.real and x.imag as two tensors."
        )

    layout = Layout.of(a_list, masks, name)
    padding = _padding(a_list, b_list, layout.keeps)
    if layout.total == 0 and padding.count:
        return Comparison.failed(
            f"Nothing compared: the mask excludes all {padding.count} elements "
            "(an attention mask of zeros only?). A comparison of nothing does not pass.",
            **base,
        )
    stats = _fused_stats(a_list, b_list, layout, tol)  # None: NaN or Inf somewhere
    if stats is None:
        stats = _general_stats(_gather_valid(a_list, b_list, layout), tol)
    return _summarise(base, stats, layout, padding, a_list, b_list)


@dataclass
class _Valid:
    """The valid elements of all batches, gathered and flattened (the general path)."""

    a: np.ndarray
    b: np.ndarray
    layout: Layout

    def index_of(self, k: int) -> list[int]:
        return self.layout.index_of(k)


@dataclass
class _Padding:
    count: int = 0  # padded elements left out
    max_diff: float = 0.0  # their largest finite |a - b| (0.0 when none)


def _valid_values(arrays: Sequence[np.ndarray], layout: Layout) -> np.ndarray:
    """The valid elements of all batches, flattened, in float64 (converted after the
    padding is dropped: padding can be most of a batch)."""
    parts = [layout.rows(x, i) for i, x in enumerate(arrays)]
    return np.concatenate(parts, dtype=np.float64)  # one copy, converted on the way


def _padding(a_list, b_list, keeps) -> _Padding:
    """How many elements the mask left out, and their largest finite difference, batch
    by batch (no concatenated array)."""
    found = _Padding()
    with np.errstate(invalid="ignore", over="ignore"):
        for a, b, keep in zip(a_list, b_list, keeps, strict=True):
            if keep is None:
                continue
            padded = ~keep
            d = np.subtract(token_rows(a, keep)[padded], token_rows(b, keep)[padded], dtype=float)
            found.count += d.size
            largest = float(np.abs(d, out=d).max(initial=0.0))
            if not np.isfinite(largest):  # NaN or Inf in the padding: the finite ones
                largest = float(np.max(d, where=np.isfinite(d), initial=0.0))
            found.max_diff = max(found.max_diff, largest)
    return found


def _gather_valid(a_list, b_list, layout: Layout) -> _Valid:
    return _Valid(_valid_values(a_list, layout), _valid_values(b_list, layout), layout)


_TINY, _HUGE = np.finfo(np.float64).tiny, float(np.finfo(np.float64).max)


def _summarise(
    base: dict, stats: dict, layout: Layout, padding: _Padding, a_list: list, b_list: list
) -> Comparison:
    """One comparison from either path's statistics (both give equal values)."""
    worst = stats.pop("worst")
    found = layout.locate(worst) if worst is not None else None
    return Comparison(
        **base,
        **stats,
        passed=stats["mismatched"] == 0,
        total=layout.total,
        worst_index=layout.index_of(worst) if worst is not None else None,
        worst_actual=float(a_list[found[0]][found[1]]) if found else None,
        worst_expected=float(b_list[found[0]][found[1]]) if found else None,
        masked_out=padding.count,
        masked_max_abs_diff=padding.max_diff,
    )


def all_finite(x: np.ndarray) -> bool:
    """No NaN or Inf in ``x`` (a float or complex array). Usually one sum, with no
    temporary array (NaN and Inf propagate through a sum); the elementwise test runs only
    when that sum is not finite (a real NaN/Inf, or finite values whose sum overflows).
    Summed in x's own precision, at least float32: a float64 sum of float32 would
    convert every element on the way, costlier than the scan itself."""
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(x, dtype=np.result_type(x.dtype, np.float32))):
            return True
    return bool(np.isfinite(x).all())


# Elements per block of the fast path (and of the referee's sums): its buffers then stay
# in a core's L2 cache, where whole-leaf temporaries would stream through memory.
BLOCK = 1 << 14


@dataclass
class _Sums:
    """The cosine's float64 dot products over the valid elements."""

    aa: float = 0.0
    bb: float = 0.0
    ab: float = 0.0


@dataclass
class _BlockTotals:
    mismatched: int = 0
    max_rel: float = 0.0
    required_atol: float = 0.0
    worst: int | None = None  # the first index of the largest |a - b|
    worst_diff: float = -1.0


def _fused_stats(
    a_list: list, b_list: list, layout: Layout, tol: Tolerance
) -> dict[str, Any] | None:
    """The all-finite case in one pass over each batch's valid elements, in blocks
    converted to float64 in cache (no gathered copy of the leaf): the element rule's
    totals, |a - b| into one array (for the mean, median and p99) and the cosine's sums.
    None when a difference is not finite (NaN or Inf on a side, or an overflow): the
    general path decides those."""
    diff = np.empty(layout.total)
    blocks = _Blocks(min(BLOCK, max((a.size for a in a_list), default=0)), tol)
    with np.errstate(invalid="ignore", over="ignore"):
        for i, (a, b) in enumerate(zip(a_list, b_list, strict=True)):
            av, bv = layout.rows(a, i), layout.rows(b, i)
            start = int(layout.offsets[i])
            for s in range(0, av.size, BLOCK):
                e = min(s + BLOCK, av.size)
                blocks.add(av[s:e], bv[s:e], diff[start + s : start + e], start + s)
        mean = float(diff.mean()) if diff.size else 0.0  # before the median reorders diff
    if not np.isfinite(mean):
        return None
    totals, sums = blocks.totals, blocks.sums
    # all equal (the embeds check's usual case): no partition needed to know both are 0
    exact = totals.worst is None or totals.worst_diff == 0.0
    median, p99 = (0.0, 0.0) if exact else _median_p99(diff, diff)
    return dict(
        mismatched=totals.mismatched,
        max_abs_diff=totals.worst_diff if totals.worst is not None else 0.0,
        mean_abs_diff=mean,
        median_abs_diff=median,
        p99_abs_diff=p99,
        max_rel_diff=min(totals.max_rel, _HUGE),
        worst=totals.worst,
        cosine=_cosine_of(sums.aa, sums.bb, sums.ab, layout.total),
        required_atol=totals.required_atol,
        nonfinite_actual=0,
        nonfinite_expected=0,
        problem=None,
    )


class _Blocks:
    """The fast path's running totals and the float64 buffers its blocks reuse. Block
    maxima, counts and sums combine exactly (sums up to rounding), and the first block
    holding the maximum gives numpy's (first) argmax."""

    def __init__(self, size: int, tol: Tolerance) -> None:
        self.tol, self.totals, self.sums = tol, _BlockTotals(), _Sums()
        self.x, self.y, self.abs_b, self.bound, self.spare = (np.empty(size) for _ in range(5))

    def add(self, a: np.ndarray, b: np.ndarray, d: np.ndarray, at: int) -> None:
        """One block: ``a`` and ``b`` in any real dtype; |a - b| into ``d``; ``at``: the
        block's first index among the leaf's valid elements."""
        n, tol, totals, sums = a.size, self.tol, self.totals, self.sums
        x, y = as_float64(a, self.x[:n]), as_float64(b, self.y[:n])
        abs_b, bound, spare = self.abs_b[:n], self.bound[:n], self.spare[:n]
        np.abs(np.subtract(x, y, out=d), out=d)
        np.multiply(np.abs(y, out=abs_b), tol.rtol, out=bound)
        excess = float(np.subtract(d, bound, out=spare).max())  # of |a - b| over rtol|b|
        totals.required_atol = max(totals.required_atol, excess)
        if excess >= tol.atol:  # else none is over atol + rtol|b|: rounding is monotone
            bound += tol.atol  # atol + rtol * |expected|, as the general path computes it
            spare_mask = spare.view(bool)[:n]
            totals.mismatched += int(np.count_nonzero(np.greater(d, bound, out=spare_mask)))
        rel = np.divide(d, np.maximum(abs_b, _TINY, out=abs_b), out=abs_b)  # d / tiny overflows
        totals.max_rel = max(totals.max_rel, float(rel.max()))
        k = int(np.argmax(d))
        if d[k] > totals.worst_diff:
            totals.worst, totals.worst_diff = at + k, float(d[k])
        sums.aa += float(np.dot(x, x))
        sums.bb += float(np.dot(y, y))
        sums.ab += float(np.dot(x, y))


def as_float64(x: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """``x`` itself when float64, else converted into ``buffer``."""
    if x.dtype == np.float64:
        return x
    np.copyto(buffer, x, casting="unsafe")
    return buffer


def _general_stats(v: _Valid, tol: Tolerance) -> dict[str, Any]:
    """NaN or Inf on a side: non-finite elements pass only where the other side holds
    the same one; the statistics are over the elements finite on both sides."""
    a, b = v.a, v.b
    c = Closeness.of(a, b, tol)
    finite, diff, abs_b, close = c.finite, c.diff, c.abs_b, c.close
    d, b_fin = diff[finite], abs_b[finite]
    with np.errstate(over="ignore"):
        rel = float((d / np.maximum(b_fin, _TINY)).max()) if d.size else 0.0
    worst = int(np.argmax(np.where(finite, diff, -1.0))) if d.size else None
    median, p99 = _median_p99(d) if d.size else (0.0, 0.0)
    return dict(
        mismatched=int(close.size - np.count_nonzero(close)),
        max_abs_diff=float(d.max()) if d.size else 0.0,
        mean_abs_diff=float(d.mean()) if d.size else 0.0,
        median_abs_diff=median,
        p99_abs_diff=p99,
        max_rel_diff=min(rel, _HUGE),
        worst=worst,
        cosine=_cosine(a[finite], b[finite]),
        required_atol=float(np.max(d - tol.rtol * b_fin, initial=0.0)),
        nonfinite_actual=int((~np.isfinite(a)).sum()),
        nonfinite_expected=int((~np.isfinite(b)).sum()),
        problem=_nonfinite_problem(v, ~finite & ~close),
    )


def _median_p99(d: np.ndarray, scratch: np.ndarray | None = None) -> tuple[float, float]:
    """``np.percentile(d, [50, 99])`` (linear interpolation, numpy's own formula). A large
    ``d`` is read a few times instead of partitioned whole: each quantile's neighbours are
    found among the values inside a bracket taken from a seeded sample, counted exactly
    (:func:`_bracketed`); where a bracket misses, and for small ``d``, two single-index
    partitions (:func:`_partitioned`). ``scratch``: a float64 array of d's size to
    partition in (else a copy is made; d stays in order), or ``d`` itself."""
    if d.size >= _BRACKETED_FROM:
        found = _bracketed(d)
        if found is not None:
            return found
    return _partitioned(d, scratch)


# From this size a sampled bracket and a few reads beat partitioning the whole (about 3x
# on a hidden state of 3M values); below it, partitioning is as quick and simpler.
_BRACKETED_FROM = 65536
_SAMPLE = 4096


def _bracketed(d: np.ndarray) -> tuple[float, float] | None:
    """Both quantiles, exactly, from the values inside brackets around them: a seeded
    sample's quantiles a little below and above give the bracket, the values under it
    are counted, and the two neighbours of the quantile's position are selected among
    the bracketed values. None where a bracket does not hold both neighbours."""
    n = d.size
    sample = np.sort(d[np.random.default_rng(0).integers(0, n, _SAMPLE)])
    found = []
    for q, room in ((0.5, 0.03), (0.99, 0.006)):  # ~4 and ~4 sample standard deviations
        low, t = _kth(n, q)
        a = sample[max(0, int((q - room) * (_SAMPLE - 1)))]
        b = sample[min(_SAMPLE - 1, int((q + room) * (_SAMPLE - 1)) + 1)]
        below = int(np.count_nonzero(d < a))
        inside = d[(d >= a) & (d <= b)]
        k = low - below
        if k < 0 or k + 1 >= inside.size:
            return None
        inside.partition([k, k + 1])
        found.append(float(_lerp(inside[k], inside[k + 1], t)))
    return found[0], found[1]


def _partitioned(d: np.ndarray, scratch: np.ndarray | None = None) -> tuple[float, float]:
    """Both quantiles from two single-index partitions: numpy's partition with several
    indices at once is several times slower than one. The median's partition of the whole
    comes first, so that p99's runs on the upper half only (1.5 passes, not 2)."""
    n = d.size
    lo50, t50 = _kth(n, 0.5)
    lo99, t99 = _kth(n, 0.99)
    x = d.copy() if scratch is None else scratch
    if scratch is not None and scratch is not d:
        np.copyto(x, d)
    x.partition(lo50)
    upper = x[lo50 + 1 :]  # the values above the median's index, unordered
    upper_min = upper.min() if upper.size else x[lo50]
    median = _lerp(x[lo50], upper_min, t50)
    if lo99 == lo50:  # fewer than 3 values
        return float(median), float(_lerp(x[lo50], upper_min, t99))
    k = lo99 - lo50 - 1  # p99's index within the upper half
    upper.partition(k)
    above = upper[k + 1 :]
    p99 = _lerp(upper[k], above.min() if above.size else upper[k], t99)
    return float(median), float(p99)


def _kth(n: int, q: float) -> tuple[int, float]:
    """Index below the q-quantile of n sorted values, and the fraction towards the next."""
    position = (n - 1) * q
    low = int(np.floor(position))
    return low, position - low


def _lerp(a: float, b: float, t: float) -> float:
    """numpy's interpolation between neighbours (exact at both ends)."""
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _nonfinite_problem(v: _Valid, bad: np.ndarray) -> str | None:
    if not bad.any():
        return None
    first = int(np.flatnonzero(bad)[0])
    sides = []
    for label, x in (("actual", v.a), ("expected", v.b)):
        n_nan, n_inf = int(np.isnan(x[bad]).sum()), int(np.isinf(x[bad]).sum())
        if n_nan or n_inf:
            sides.append(f"{label} has {n_nan} NaN and {n_inf} Inf")
    return (
        f"Non-finite values that the other side does not match: {'; '.join(sides)} "
        f"(first at index {tuple(v.index_of(first))})."
    )


def _cosine(a: np.ndarray, b: np.ndarray) -> float | None:
    return _cosine_of(float(np.dot(a, a)), float(np.dot(b, b)), float(np.dot(a, b)), a.size)


def _cosine_of(aa: float, bb: float, ab: float, n: int) -> float | None:
    """The cosine from its dot products (``n`` elements); np.linalg.norm's own formula."""
    na, nb = np.sqrt(aa), np.sqrt(bb)
    if n == 0 or na == 0 or nb == 0:
        return 1.0 if n and na == nb else None
    return float(ab / (na * nb))
