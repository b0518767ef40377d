"""The float64 referee's arithmetic: the root-mean-square errors it rests on, summed
batch by batch. The rule that judges them is :class:`.judge.Referee`'s."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .masks import Layout, leaf_mask
from .stats import BLOCK, as_float64, to_numpy


@dataclass
class RefereeResult:
    name: str
    actual_rmse: float
    reference_rmse: float
    allowed_rmse: float
    ratio: float | None  # actual_rmse / reference_rmse
    passed: bool
    factor: float = 3.0  # the factor applied (judge.Referee.factor_for the leaf's size)


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
    # Per batch, the squares of ``a - r`` (no float64 needed): what :meth:`.judge.Referee.settled`
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
        the squares of ``a - r`` over the valid elements, for :meth:`.judge.Referee.settled`."""
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

    def _buffers_of(self, size: int) -> list[np.ndarray]:
        """Three float64 blocks, kept between batches (reallocated only to grow)."""
        if not self._buffers or self._buffers[0].size < size:
            self._buffers = [np.empty(size) for _ in range(3)]
        return self._buffers

    def rmses(self) -> tuple[float, float, float]:
        """The candidate's and the reference's RMSEs to the truth, and the truth's RMS,
        over the batches added so far (what :meth:`.judge.Referee.result` judges)."""
        return tuple(  # type: ignore[return-value]
            float(np.sqrt(v / self.n)) if self.n else 0.0 for v in (self.at, self.rt, self.tt)
        )


def _unthreaded_squares(d: np.ndarray) -> float:
    """The sum of ``d``'s squares without BLAS. These sums run between PyTorch's
    float64 batches, and BLAS threads spin for a while after each call, taking cores
    from PyTorch's own threads."""
    return float(np.einsum("i,i->", d, d))


def unthreaded_rmse(a: Any, b: Any) -> float:
    """:func:`rmse` by numpy's mean, without BLAS: for the many small layers of a check
    judged one by one, where BLAS threads spinning after each call cost more than they
    save (:func:`_unthreaded_squares`)."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    return float(np.sqrt(np.mean(d * d))) if d.size else 0.0


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
