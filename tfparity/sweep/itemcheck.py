"""Per-item verdicts from batched runs (numpy only).

A batch's traces are sliced row by row and each row is compared on its own valid
tokens (``compare_arrays`` with that row's mask), so an item's verdict and max abs diff
depend on the item alone, not on which batch, bucket or shard it landed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..compare import Comparison, Referee, Tolerance, compare_arrays, referee_batches
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
        return out


def row_comparisons(
    actual: Trace,
    expected: Trace,
    mask: np.ndarray,
    row: int,
    *,
    tolerance: Tolerance | None = None,
    names: list[str] | None = None,
) -> list[Comparison]:
    """Every shared leaf (or ``names``) of row ``row``, padding excluded."""
    m = mask[row : row + 1]
    out = []
    for name in names or [n for n in expected if n in actual]:
        a, b = actual[name][row : row + 1], expected[name][row : row + 1]
        # The mask applies to [batch, seq, ...] leaves only; a pooled [1, hidden] leaf
        # could otherwise be mistaken for [1, seq] when hidden == seq.
        leaf_mask = m if a.ndim >= 3 else None
        out.append(
            compare_arrays(a, b, name=name, mask=leaf_mask, tolerance=tolerance, check_dtype=False)
        )
    return out


def judged(comparisons: list[Comparison], verdicts: dict[str, bool] | None = None) -> RowResult:
    """Fold one row's comparisons into a RowResult (``verdicts`` override per leaf)."""
    passed = {c.name: (verdicts or {}).get(c.name, c.passed) for c in comparisons}
    worst = max(comparisons, key=lambda c: c.max_abs_diff, default=None)
    failing = tuple(name for name, ok in passed.items() if not ok)
    return RowResult(
        passed=not failing,
        max_abs_diff=float(worst.max_abs_diff) if worst else 0.0,
        worst=worst.name if worst else None,
        failing=failing,
    )


def referee_verdicts(
    tf: Trace, pt: Trace, pt64: Trace, mask: np.ndarray, row: int, referee: Referee
) -> dict[str, bool]:
    """Per leaf: TF's RMSE to PyTorch fp64 within ``factor`` x PyTorch fp32's (this row)."""
    m = mask[row : row + 1]
    verdicts = {}
    for name in pt:
        if name not in tf or name not in pt64:
            continue
        leaf_mask = m if tf[name].ndim >= 3 else None
        r = referee_batches(
            name,
            [tf[name][row : row + 1]],
            [pt[name][row : row + 1]],
            [pt64[name][row : row + 1]],
            masks=[leaf_mask],
            referee=referee,
        )
        verdicts[name] = r.passed
    return verdicts


def top1_counts(
    head: Callable[[np.ndarray], np.ndarray], actual: Trace, expected: Trace, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: tokens whose top-1 prediction (argmax over the vocabulary, the last
    axis) agrees between the two sides, and the row's real tokens."""
    a = np.argmax(head(actual["last_hidden_state"]), axis=-1)
    b = np.argmax(head(expected["last_hidden_state"]), axis=-1)
    valid = mask.astype(bool)
    return ((a == b) & valid).sum(axis=1), valid.sum(axis=1)
