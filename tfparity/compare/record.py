"""The :class:`Comparison` record of one compared leaf, and the messages built from it."""

from __future__ import annotations

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
