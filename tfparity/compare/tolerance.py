"""Tolerance policy: what difference is allowed, and the element rule that applies it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TfparityError


@dataclass(frozen=True)
class Tolerance:
    """Allowed difference: ``|actual - expected| <= atol + rtol * |expected|``."""

    atol: float
    rtol: float
    equal_nan: bool = False

    def __post_init__(self) -> None:
        # A NaN tolerance makes every comparison False (identical tensors would FAIL),
        # an infinite one makes every finite difference pass (a vacuous PASS), and a
        # negative one can never be met: each is a mistake, named here, at the source.
        for name in ("atol", "rtol"):
            check_tolerance_value(getattr(self, name), name)


class ToleranceError(TfparityError, ValueError):
    """A tolerance that is NaN, infinite or negative: a ValueError for API callers, and
    a TfparityError so that the CLI and the pytest plugin report it as bad input."""


def check_tolerance_value(value: Any, name: str) -> float:
    """``value`` as a float when it is a usable tolerance; :class:`ToleranceError` naming
    ``name`` otherwise, or ``TypeError`` when it is not a real number at all."""
    if value is None or isinstance(value, (bool, str, bytes, complex, list, tuple, dict)):
        raise TypeError(f"{name} must be a real number, not {type(value).__name__} {value!r}.")
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return value  # a number-like object (e.g. pytest.approx in a test): left to it
    value = float(value)
    if np.isnan(value):
        raise ToleranceError(f"{name} is NaN; give a finite number >= 0.")
    if np.isinf(value):
        raise ToleranceError(f"{name} is infinite ({value}): every difference would pass.")
    if value < 0:
        raise ToleranceError(f"{name} must not be negative (got {value:g}).")
    return value


# Defaults by dtype, as torch.testing.assert_close uses them.
_DEFAULTS: dict[str, tuple[float, float]] = {
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
    "float32": (1e-5, 1.3e-6),
    "float64": (1e-7, 1e-7),
}


def default_tolerance(*dtypes: Any) -> Tolerance:
    """The tolerance for the least precise of ``dtypes`` (integers compare exactly)."""
    names = [dtype_name(d) for d in dtypes]
    floats = [n for n in names if n in _DEFAULTS]
    if not floats:
        return Tolerance(atol=0.0, rtol=0.0)
    loosest = max(floats, key=lambda n: _DEFAULTS[n][1])
    atol, rtol = _DEFAULTS[loosest]
    return Tolerance(atol=atol, rtol=rtol)


def dtype_name(dtype: Any) -> str:
    """A numpy, TF or torch dtype's plain name (``float32``, ``bfloat16``)."""
    if isinstance(dtype, type) and issubclass(dtype, np.generic):  # np.float32, not its dtype
        dtype = np.dtype(dtype)
    name = getattr(dtype, "name", None) or str(dtype)
    return str(name).replace("tf.", "").replace("torch.", "")


@dataclass
class Closeness:
    """The element rule, element by element (float64 inputs of one shape): ``finite`` on
    both sides; ``diff`` = |a - b| there (0 elsewhere); ``close``: within atol + rtol|b|
    where finite, else the same non-finite value on both sides (NaN only with
    ``equal_nan``). The one place this rule is written (comparisons, sweep rows)."""

    finite: np.ndarray
    diff: np.ndarray
    abs_b: np.ndarray
    close: np.ndarray

    @classmethod
    def of(cls, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> Closeness:
        finite = np.isfinite(a) & np.isfinite(b)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.where(finite, np.abs(a - b), 0.0)
        abs_b = np.where(finite, np.abs(b), 0.0)
        same_nonfinite = (a == b) | (tol.equal_nan & np.isnan(a) & np.isnan(b))
        close = np.where(finite, diff <= tol.atol + tol.rtol * abs_b, same_nonfinite)
        return cls(finite, diff, abs_b, close)
