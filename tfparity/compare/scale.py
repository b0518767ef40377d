"""How much larger one output is than its truth as a whole: a least-squares scale and
its standard error, for faults that an RMSE bound cannot see under coarse rounding.

A half-precision layer errs by about one unit of its rounding per element (float16:
4.9e-4 relative), so an RMSE bound must allow a few units, and a fault of 0.1% (two
float16 units) hides inside it. But rounding to nearest is unbiased and varies from
element to element, while a fault such as a scale is systematic: fitted over the n
elements, the scale ``s = <a, t> / <t, t>`` of ``a`` against its truth ``t`` has a
standard error that shrinks as 1/sqrt(n), and rounding leaves ``s`` within a fraction
of a unit of 1 (measured in docs/backends.md). Numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ScaleFit:
    """``actual`` ~ ``scale`` x ``truth`` over ``n`` elements, ``error`` the standard
    error of ``scale``."""

    scale: float
    error: float
    n: int

    @property
    def standard_errors(self) -> float:
        """How many standard errors ``scale`` stands from 1 (inf for an exact fit)."""
        off = abs(self.scale - 1.0)
        return off / self.error if self.error else (np.inf if off else 0.0)

    def departs(self, floor: float, k: float) -> bool:
        """Whether ``scale`` stands from 1 by more than ``k`` standard errors (not
        noise) and by more than ``floor`` (not a bias that rounding itself can have)."""
        off = abs(self.scale - 1.0)
        return off > floor and off > k * self.error

    def parts_from(self, other: ScaleFit, floor: float, k: float) -> bool:
        """Whether ``scale`` stands from ``other``'s (another output's, fitted to the
        same truth) by more than ``floor`` and ``k`` standard errors of the difference
        (taken as independent: where the two share rounding, a wider bound). Two
        outputs that share a departure from the truth (the same rounded weights and
        inputs, on a few elements) do not part."""
        off = abs(self.scale - other.scale)
        return off > floor and off > k * float(np.hypot(self.error, other.error))


def scale_fit(actual: Any, truth: Any) -> ScaleFit | None:
    """The least-squares scale of ``actual`` against ``truth`` and its standard error;
    None where it means nothing (shapes differ, a value is not finite, the truth is zero
    or has fewer than two elements). The error is the heteroscedasticity-robust
    (sandwich) one: rounding errs in proportion to each element's size, not alike."""
    a = np.asarray(actual, np.float64).ravel()
    t = np.asarray(truth, np.float64).ravel()
    if a.shape != t.shape or t.size < 2 or not (np.isfinite(a).all() and np.isfinite(t).all()):
        return None
    tt = float(t @ t)
    if not tt:
        return None
    s = float(a @ t) / tt
    residual = a - s * t
    n = t.size
    error = float(np.sqrt(np.sum((residual * t) ** 2) * n / (n - 1))) / tt
    return ScaleFit(s, error, n)
