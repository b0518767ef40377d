"""Per-item verdicts from batched runs (numpy only).

Each leaf of a batch is compared row by row in one vectorised pass, every row on its
own valid tokens (the rule of ``compare_arrays`` with that row's mask), so an item's
verdict and max abs diff depend on the item alone, not on which batch, bucket or shard
it landed in (up to the float rounding of the batched runs themselves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..compare import (
    Closeness,
    Referee,
    Tolerance,
    default_tolerance,
    row_counts,
    row_rms,
    valid_positions,
    within,
)
from ..trace import Trace


@dataclass(frozen=True)
class RowResult:
    """One check on one item: verdict, worst leaf and its max abs diff over valid tokens,
    the failing leaves, and top-1 agreement counts where an LM head is available."""

    passed: bool | None  # None: the check does not apply to this model
    max_abs_diff: float
    worst: str | None
    failing: tuple[str, ...] = ()
    top1_agree: int | None = None
    top1_tokens: int | None = None
    note: str | None = None
    fp64: bool | None = None  # the referee's float64 pass ran for this item (None: no referee)
    generation: dict | None = None  # the generate check's figures (sweep.generate.row_result)
    # The logits' distribution metrics as per-item sums (sweep.distribution.item_values)
    distribution: dict | None = None

    def to_dict(self) -> dict:
        out: dict = {
            "passed": self.passed,
            "max_abs_diff": self.max_abs_diff,
            "worst": self.worst,
        }
        if self.failing:
            out["failing"] = list(self.failing)
        if self.top1_tokens is not None:
            out["top1"] = {"agree": self.top1_agree, "tokens": self.top1_tokens}
        if self.note:
            out["note"] = self.note
        if self.fp64 is not None:
            out["referee"] = "fp64" if self.fp64 else "fp32+margin"
        if self.generation is not None:
            out["generation"] = self.generation
        if self.distribution:
            out["distribution"] = self.distribution
        return out


@dataclass(frozen=True)
class LeafRows:
    """One leaf compared row by row: per row, whether every valid element is within
    the tolerance and the largest finite abs diff over its valid elements."""

    name: str
    passed: np.ndarray  # [rows] bool
    max_abs_diff: np.ndarray  # [rows] float64


def leaf_rows(
    actual: np.ndarray,
    expected: np.ndarray,
    mask: np.ndarray,
    name: str,
    tolerance: Tolerance | None = None,
) -> LeafRows:
    """``compare_arrays``'s verdict and max abs diff for every row at once (vectorised:
    the sweep compares every leaf of every item, and per-row calls dominated its time).
    As there, padding is excluded, a non-finite value passes only where the other side
    holds the same one, and a row with nothing to compare fails."""
    a, b = np.asarray(actual), np.asarray(expected)
    rows = a.shape[0]
    if a.shape != b.shape:
        return LeafRows(name, np.zeros(rows, bool), np.zeros(rows))
    tol = tolerance or default_tolerance(a.dtype, b.dtype)
    a64, b64 = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
    valid = valid_positions(a.shape, mask, name)
    valid = np.ones(a.shape, bool) if valid is None else valid
    c = Closeness.of(a64, b64, tol)
    axes = tuple(range(1, a.ndim))
    passed = (c.close | ~valid).all(axis=axes) & valid.any(axis=axes)
    worst = np.where(valid, c.diff, 0.0).max(axis=axes) if a.size else np.zeros(rows)
    return LeafRows(name, passed, worst)


def compared_rows(
    actual: Trace,
    expected: Trace,
    mask: np.ndarray,
    *,
    tolerance: Tolerance | None = None,
    names: list[str] | None = None,
) -> list[LeafRows]:
    """Every shared leaf (or ``names``), each compared row by row, padding excluded."""
    names = names or [n for n in expected if n in actual]
    return [leaf_rows(actual[n], expected[n], mask, n, tolerance) for n in names]


def judged(leaves: list[LeafRows], row: int, verdicts: dict[str, bool] | None = None) -> RowResult:
    """Fold one row of the compared leaves into a RowResult (``verdicts`` override
    the tolerance's verdict per leaf)."""
    passed = {leaf.name: (verdicts or {}).get(leaf.name, bool(leaf.passed[row])) for leaf in leaves}
    worst = max(leaves, key=lambda leaf: leaf.max_abs_diff[row], default=None)
    failing = tuple(name for name, ok in passed.items() if not ok)
    return RowResult(
        passed=not failing,
        max_abs_diff=float(worst.max_abs_diff[row]) if worst else 0.0,
        worst=worst.name if worst else None,
        failing=failing,
    )


def referee_verdicts(
    tf: Trace, pt: Trace, pt64: Trace, mask: np.ndarray, referee: Referee
) -> list[dict[str, bool]]:
    """Per row and leaf: TF's RMSE to PyTorch fp64 within ``factor`` x PyTorch fp32's
    plus ``floor`` x fp64's RMS (the :class:`Referee`'s rule, every row at once; the
    factor widened for a row of few values, :meth:`Referee.factor_for`)."""
    rows = next(iter(pt64.values())).shape[0] if len(pt64) else 0
    verdicts: list[dict[str, bool]] = [{} for _ in range(rows)]
    for name in pt:
        if name not in tf or name not in pt64:
            continue
        t = np.asarray(pt64[name], np.float64)
        actual = row_rms(np.asarray(tf[name], np.float64) - t, mask, name)
        reference = row_rms(np.asarray(pt[name], np.float64) - t, mask, name)
        values = row_counts(t.shape, mask, name)
        # the rule itself, not Referee.judge: one vector for every row (thousands of items)
        ok = within(actual, referee.allowed(reference, row_rms(t, mask, name), values))
        for r in range(rows):
            verdicts[r][name] = bool(ok[r])
    return verdicts


def top1_counts(
    logits: Callable[[Trace], np.ndarray], actual: Trace, expected: Trace, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the positions whose top-1 (argmax over the last axis of ``logits(run)``:
    tokens of an LM head, labels of a classifier) agrees between the two sides, and the
    row's positions: its real tokens, or 1 for a per-sequence label."""
    a = np.argmax(logits(actual), axis=-1)
    b = np.argmax(logits(expected), axis=-1)
    if a.ndim == 1:  # [batch]: one label per sequence
        return (a == b).astype(int), np.ones_like(a)
    valid = mask.astype(bool)
    return ((a == b) & valid).sum(axis=1), valid.sum(axis=1)
