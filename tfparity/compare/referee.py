"""The float64 referee: a candidate judged by a float64 truth instead of a fixed
threshold (the cross-check's verdict), and the root-mean-square errors it rests on."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .masks import Layout, leaf_mask
from .record import Comparison
from .stats import BLOCK, as_float64, to_numpy

_ROUNDING = 1e-9  # relative: far above float64 sums' rounding, far below any margin

# Per number of values n: the square root of the F(n, n) distribution's 1 - 1e-4
# quantile (scipy.stats.f.ppf(1 - 1e-4, n, n), rounded up), i.e. the ratio of two RMSEs
# over n values of the same rounding noise that one clean leaf in 10^4 exceeds. Past 16
# values it is below the default factor of 3.
SMALL_LEAF_FACTORS = {
    1: 6366.2, 2: 100.0, 3: 25.68, 4: 13.11, 5: 8.77, 6: 6.7, 7: 5.52, 8: 4.77,
    9: 4.24, 10: 3.86, 11: 3.57, 12: 3.34, 13: 3.15, 14: 3.0, 15: 2.87, 16: 2.76,
}  # fmt: skip


@dataclass(frozen=True)
class Referee:
    """Judge a candidate by a float64 truth instead of a fixed threshold.

    The candidate (e.g. TF fp32) passes when its RMSE to the truth (PyTorch fp64) is at
    most ``factor`` times the reference's own RMSE to the truth (PyTorch fp32), plus
    ``floor`` times the truth's RMS (for tensors that fp32 computes exactly). Deep
    models get room for the rounding they really accumulate; shallow ones get none.
    """

    factor: float = 3.0
    floor: float = 1e-7

    def factor_for(self, n: int) -> float:
        """``factor`` for a leaf of ``n`` values, widened where ``n`` is so small (a
        classifier's two or three logits, per item in a sweep) that PyTorch's own RMSE
        over them is a poor estimate of its rounding: with two values, TF's RMSE is over
        3x PyTorch's on one clean item in ten. The widened factor is what one clean leaf
        in 10^4 exceeds (:data:`SMALL_LEAF_FACTORS`); a fault on such a leaf (a head
        bias off by 0.01) is still orders of magnitude past it."""
        return max(self.factor, SMALL_LEAF_FACTORS.get(int(n), 0.0))


@dataclass
class RefereeResult:
    name: str
    actual_rmse: float
    reference_rmse: float
    allowed_rmse: float
    ratio: float | None  # actual_rmse / reference_rmse
    passed: bool
    factor: float = 3.0  # the factor applied (Referee.factor_for the leaf's size)


def judged_by_referee(c: Comparison, r: RefereeResult | None, referee: Referee) -> Comparison:
    """``c`` judged by its referee verdict ``r`` (None: as it was), with the bound that
    decided it; a comparison that found a problem (shapes, NaN) keeps its verdict."""
    if r is None or c.problem:
        return c
    bound = {
        "actual_rmse": r.actual_rmse,
        "reference_rmse": r.reference_rmse,
        "allowed_rmse": r.allowed_rmse,
        "factor": r.factor,
        "floor": referee.floor,
    }
    return replace(c, passed=r.passed, judge="referee", referee=bound)  # c is left as it was


def referee_batches(
    name: str,
    actual: Sequence[Any],
    reference: Sequence[Any],
    truth: Sequence[Any],
    *,
    masks: Sequence[np.ndarray | None] | None = None,
    referee: Referee = Referee(),
) -> RefereeResult:
    """Referee one named tensor over batches (padding excluded, as in comparisons)."""
    masks = list(masks) if masks is not None else [None] * len(actual)
    sums = RefereeSums()
    for a, r, t, mask in zip(actual, reference, truth, masks, strict=True):
        sums.add(a, r, t, mask, name=name)
    result = sums.result(name, referee)
    if result is None:
        raise ValueError(f"{name}: the three sides differ in shape; nothing to referee.")
    return result


@dataclass
class RefereeSums:
    """One leaf's referee, summed batch by batch as the float64 runs arrive, so that
    they need not be kept (fresh memory for every float64 output costs page faults,
    a measurable share of a cross-check). In float64 over the valid elements (padding
    excluded by the mask, as in comparisons): the squares of ``a - t`` (candidate),
    ``r - t`` (reference) and ``t`` (truth)."""

    at: float = 0.0
    rt: float = 0.0
    tt: float = 0.0
    n: int = 0
    batches: int = 0
    usable: bool = True  # False once a batch's three sides differed in shape
    # Per batch, the squares of ``a - r`` (no float64 needed): what :meth:`settled`
    # bounds the batches not yet refereed by.
    differences: list[float] = field(default_factory=list)
    _buffers: list = field(default_factory=list, init=False, repr=False, compare=False)

    def add(
        self, actual: Any, reference: Any, truth: Any, mask: np.ndarray | None, name: str = ""
    ) -> None:
        """One batch of the three sides of the leaf ``name``; the mask applies as in
        comparisons (:func:`.masks.leaf_mask`)."""
        a, r, t = (to_numpy(x) for x in (actual, reference, truth))
        self.batches += 1
        if not a.shape == r.shape == t.shape or any(np.iscomplexobj(x) for x in (a, r, t)):
            self.usable = False
            return
        layout = Layout.of([t], [mask], name)
        av, rv, tv = (layout.rows(x, 0) for x in (a, r, t))
        x, y, z = self._buffers_of(min(BLOCK, av.size))
        with np.errstate(invalid="ignore", over="ignore"):
            for s in range(0, av.size, BLOCK):
                e = min(s + BLOCK, av.size)
                k = e - s
                truth_block = as_float64(tv[s:e], z[:k])
                candidate = np.subtract(as_float64(av[s:e], x[:k]), truth_block, out=x[:k])
                reference = np.subtract(as_float64(rv[s:e], y[:k]), truth_block, out=y[:k])
                self.at += _unthreaded_squares(candidate)
                self.rt += _unthreaded_squares(reference)
                self.tt += _unthreaded_squares(truth_block)
        self.n += av.size

    def add_difference(
        self, actual: Any, reference: Any, mask: np.ndarray | None, name: str = ""
    ) -> None:
        """One batch's candidate against the reference (no truth needed), in batch order:
        the squares of ``a - r`` over the valid elements, for :meth:`settled`."""
        a, r = (to_numpy(x) for x in (actual, reference))
        if a.shape != r.shape or any(np.iscomplexobj(x) for x in (a, r)):
            self.differences.append(math.inf)  # never settled: float64 runs everywhere
            return
        layout = Layout.of([r], [mask], name)
        av, rv = (layout.rows(x, 0) for x in (a, r))
        x, y, _ = self._buffers_of(min(BLOCK, av.size))
        total = 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            for s in range(0, av.size, BLOCK):
                k = min(s + BLOCK, av.size) - s
                d = np.subtract(as_float64(av[s : s + k], x[:k]), as_float64(rv[s : s + k], y[:k]))
                total += _unthreaded_squares(d)
        self.differences.append(total)

    def settled(self, referee: Referee) -> bool:
        """True when no float64 run of the batches not yet refereed can change the
        verdict: the referee passes whatever they hold. Exact, no assumption: with ``K``
        the batches refereed and ``U`` the rest, ``a = (a_K, d_U) + (0, r_U)`` (``d`` the
        candidate minus the reference, ``r`` the reference's own error), so
        ``|a| <= |(a_K, d_U)| + |r_U|``, while ``F |r| - |r_U|`` is at least
        ``sqrt(F^2 - 1) |r_K|`` (its minimum over ``|r_U|``); ``|(a_K, d_U)|`` below
        that, plus the floor on the refereed truth, is a pass. Derivation in
        docs/crosscheck.md ("Float64 only where it decides")."""
        rest = self.differences[self.batches :]
        if not self.usable or not rest or referee.factor <= 1.0:
            return False
        worst = math.sqrt(self.at + math.fsum(rest))
        bound = math.sqrt(referee.factor**2 - 1.0) * math.sqrt(self.rt)
        bound += referee.floor * math.sqrt(self.tt)
        return bool(worst <= bound * (1.0 - _ROUNDING))  # float64 sums: room for their rounding

    def _buffers_of(self, size: int) -> list[np.ndarray]:
        """Three float64 blocks, kept between batches (reallocated only to grow)."""
        if not self._buffers or self._buffers[0].size < size:
            self._buffers = [np.empty(size) for _ in range(3)]
        return self._buffers

    def result(self, name: str, referee: Referee) -> RefereeResult | None:
        """The referee's verdict; None when a batch could not be refereed (shapes)."""
        if not self.usable:
            return None
        a, r, t = (
            float(np.sqrt(v / self.n)) if self.n else 0.0 for v in (self.at, self.rt, self.tt)
        )
        return _verdict(name, a, r, t, referee.factor_for(self.n), referee)


def _unthreaded_squares(d: np.ndarray) -> float:
    """The sum of ``d``'s squares without BLAS. These sums run between PyTorch's
    float64 batches, and BLAS threads spin for a while after each call, taking cores
    from PyTorch's own threads."""
    return float(np.einsum("i,i->", d, d))


def _verdict(
    name: str,
    actual_rmse: float,
    reference_rmse: float,
    scale: float,
    factor: float,
    referee: Referee,
) -> RefereeResult:
    """Pass when the candidate's error to the truth is within ``factor`` times the
    reference's own, plus ``floor`` times the truth's RMS (``scale``)."""
    allowed = factor * reference_rmse + referee.floor * scale
    passed = bool(np.isfinite(actual_rmse) and actual_rmse <= allowed)
    ratio = actual_rmse / reference_rmse if reference_rmse > 0 else None
    return RefereeResult(name, actual_rmse, reference_rmse, allowed, ratio, passed, factor)


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    """Root mean square difference in float64 (0.0 for empty arrays)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        if a.shape != b.shape:  # broadcasting
            return float(np.sqrt(np.mean((a - b) ** 2)))
        a, b = a.reshape(-1), b.reshape(-1)
        buffer, total = np.empty(min(a.size, BLOCK)), 0.0
        for start in range(0, a.size, BLOCK):  # blocks: no whole-size temporaries
            d = np.subtract(
                a[start : start + BLOCK],
                b[start : start + BLOCK],
                out=buffer[: min(BLOCK, a.size - start)],
            )
            total += float(np.dot(d, d))
        return float(np.sqrt(total / a.size))


def row_rms(x: np.ndarray, mask: np.ndarray | None, name: str = "") -> np.ndarray:
    """Per row of ``x`` ([batch, ...]): the RMS over its valid elements (float64); the
    mask applies as in comparisons (:func:`.masks.leaf_mask`)."""
    x = np.asarray(x, np.float64)
    m = leaf_mask(mask, x.shape, name)
    # Per token first where the mask applies or the leaf has one (the summation order).
    tokens = x.shape[1] if m is not None or x.ndim >= 3 else 1
    with np.errstate(invalid="ignore", over="ignore"):
        sq = (x**2).reshape(x.shape[0], tokens, -1).sum(axis=2)
    total = np.where(m, sq, 0.0).sum(axis=1) if m is not None else sq.sum(axis=1)
    count = row_counts(x.shape, mask, name)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.sqrt(total / np.maximum(count, 1)), 0.0)


def row_counts(shape: tuple[int, ...], mask: np.ndarray | None, name: str = "") -> np.ndarray:
    """Per row of a leaf of ``shape`` ([batch, ...]): how many of its values are valid
    (what :func:`row_rms` averages over; the referee's factor depends on it)."""
    m = leaf_mask(mask, shape, name)
    if m is not None:
        return m.sum(axis=1) * math.prod(shape[2:])
    return np.full(shape[0], math.prod(shape[1:]))
