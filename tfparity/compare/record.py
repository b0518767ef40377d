"""The :class:`Comparison` record of one compared leaf, and the messages built from it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Comparison:
    """One leaf compared: the verdict and the statistics that explain it.

    Every field is a plain JSON value. Statistics cover the *valid* positions only
    (those the attention mask keeps); ``masked_*`` describe the excluded ones.
    ``required_atol`` is the smallest atol that would have passed at this rtol.
    """

    name: str
    passed: bool
    shape: list[int]
    expected_shape: list[int]
    dtype: str
    expected_dtype: str
    total: int
    mismatched: int
    max_abs_diff: float
    mean_abs_diff: float
    median_abs_diff: float
    p99_abs_diff: float
    max_rel_diff: float
    worst_index: list[int] | None
    worst_actual: float | None
    worst_expected: float | None
    cosine: float | None
    required_atol: float
    atol: float
    rtol: float
    nonfinite_actual: int = 0
    nonfinite_expected: int = 0
    masked_out: int = 0
    masked_max_abs_diff: float = 0.0
    problem: str | None = None
    judge: str = "tolerance"  # or "referee": ``passed`` then comes from a RefereeResult
    # The referee's bound when it judged: actual_rmse, reference_rmse, allowed_rmse (RMSEs
    # to the float64 truth), factor, floor (see :class:`Referee`); None for a tolerance.
    referee: dict[str, float] | None = None

    @classmethod
    def failed(cls, problem: str, **base: Any) -> Comparison:
        """A failed comparison that compared no values; ``base``: the leaf's name,
        shapes, dtypes, atol and rtol."""
        return cls(
            **base,
            passed=False,
            total=0,
            mismatched=0,
            max_abs_diff=0.0,
            mean_abs_diff=0.0,
            median_abs_diff=0.0,
            p99_abs_diff=0.0,
            max_rel_diff=0.0,
            worst_index=None,
            worst_actual=None,
            worst_expected=None,
            cosine=None,
            required_atol=0.0,
            problem=problem,
        )

    def headline(self) -> str:
        """What a verdict line says of this leaf: its largest difference, or, where it
        compared no values (a shape mismatch, a missing output), why. A leaf that compared
        nothing has a max abs diff of 0, so quoting that would headline a non-failure."""
        if self.total or not self.problem:
            where = "" if self.max_abs_diff == 0 else f" ({self.name})"  # NaN: named too
            return f"max abs diff {self.max_abs_diff:.3g}{where}"
        if not self.dtype or not self.expected_dtype:  # a missing output names itself
            return _phrase(self.problem)
        if self.shape != self.expected_shape:
            return f"{self.name}: shape {self.shape} vs {self.expected_shape}"
        if self.dtype != self.expected_dtype:
            return f"{self.name}: dtype {self.dtype} vs {self.expected_dtype}"
        return f"{self.name}: {_phrase(self.problem)}"

    @property
    def mismatched_percent(self) -> float:
        return 100.0 * self.mismatched / self.total if self.total else 0.0

    def message(self) -> str:
        """A readable block in the style of ``torch.testing.assert_close``."""
        head = f"{self.name}: tensors are not close!" if self.name else "Tensors are not close!"
        if self.problem and self.total == 0:
            return f"{head}\n\n{self.problem}"
        lines = [head, ""]
        if self.problem:
            lines.append(self.problem)
        lines.append(
            f"Mismatched elements: {self.mismatched} / {self.total} "
            f"({self.mismatched_percent:.1f}%)"
        )
        where = f" at index {tuple(self.worst_index)}" if self.worst_index is not None else ""
        refereed = self.judge == "referee"
        allowed_abs = "" if refereed else f" (up to {self.atol:g} allowed)"
        allowed_rel = "" if refereed else f" (up to {self.rtol:g} allowed)"
        lines.append(f"Greatest absolute difference: {self.max_abs_diff:.6g}{where}{allowed_abs}")
        lines.append(f"Greatest relative difference: {self.max_rel_diff:.6g}{allowed_rel}")
        lines.append(self.judge_text())
        if self.worst_actual is not None:
            lines.append(
                f"Worst element: actual {self.worst_actual:.8g}, expected {self.worst_expected:.8g}"
            )
        lines.append(
            f"Mean / median / p99 absolute difference: {self.mean_abs_diff:.3g} / "
            f"{self.median_abs_diff:.3g} / {self.p99_abs_diff:.3g}; cosine {_fmt(self.cosine)}"
        )
        lines.append(
            f"Smallest atol that would pass (rtol {self.rtol:g}): {self.required_atol:.3g}"
        )
        if self.masked_out:
            lines.append(
                f"Excluded as padding: {self.masked_out} elements "
                f"(max abs diff there {self.masked_max_abs_diff:.3g})"
            )
        return "\n".join(lines)

    def judge_text(self) -> str:
        """What decided this leaf: atol/rtol, or the float64 referee's RMSE bound."""
        if self.judge != "referee":
            return f"Judge: tolerance, atol {self.atol:g} and rtol {self.rtol:g}"
        r = self.referee
        if r is None:
            return "Judge: float64 referee"
        return (
            f"Judge: float64 referee, RMSE to float64 {r['actual_rmse']:.3g} "
            f"({'within' if self.passed else 'over'} {r['allowed_rmse']:.3g} allowed = factor "
            f"{r['factor']:g} x expected's {r['reference_rmse']:.3g} + floor {r['floor']:g} x RMS)"
        )


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.6f}"


def _phrase(problem: str, most: int = 90) -> str:
    """A problem's first sentence as a phrase inside a line: no full stop, a lower-case
    first letter (kept for a name with capitals inside: ``TF``, ``PyTorch``), cut at a
    word past ``most`` characters."""
    sentence = problem.split(". ", 1)[0].rstrip(".")
    first = sentence.split(" ", 1)[0]
    if first[:1].isupper() and not any(ch.isupper() for ch in first[1:]):
        sentence = sentence[0].lower() + sentence[1:]
    if len(sentence) > most:
        sentence = sentence[:most].rsplit(" ", 1)[0] + " ..."
    return sentence


def factor_text(factor: float) -> str:
    """A scale factor with the digits that show its distance from 1: ``1.0001``, never
    ``1`` (a weight scaled by 1.0001 is a fault, and "scaled by 1" reads as none): at
    least two significant digits of ``factor - 1``, and four of the factor."""
    text = f"{factor:.4g}"
    off = abs(factor - 1.0)
    if off == 0.0 or not math.isfinite(off):
        return text
    decimals = min(17, max(0, 1 - math.floor(math.log10(off))))
    near = f"{factor:.{decimals}f}".rstrip("0").rstrip(".")
    return near if len(near) > len(text) else text


def failed_comparison(name: str, problem: str, shape: list[int], dtype: str) -> Comparison:
    """A failed comparison that compared no values, for a problem found another way
    (e.g. NaN in a weight the outputs never reach)."""
    return Comparison.failed(
        problem,
        name=name,
        shape=shape,
        expected_shape=shape,
        dtype=dtype,
        expected_dtype=dtype,
        atol=0.0,
        rtol=0.0,
    )


def failure_message(comparisons: Sequence[Comparison]) -> str:
    """All failing leaves' blocks, worst first, for an assertion error."""
    failing = [c for c in comparisons if not c.passed]
    if not failing:
        return "All outputs are close."
    failing.sort(key=lambda c: (c.problem is None, -c.max_abs_diff))
    head = f"{len(failing)} of {len(comparisons)} outputs differ."
    return "\n\n".join([head] + [c.message() for c in failing])
