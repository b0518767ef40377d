"""Nested outputs compared leaf by leaf: flatten both sides into named leaves, compare
each leaf present on both (:func:`.stats.compare_batches`), fail the ones missing from
a side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..trace import flatten
from .record import Comparison
from .stats import compare_batches
from .tolerance import Tolerance, default_tolerance, dtype_name


def compare_outputs(
    actual: Any,
    expected: Any,
    *,
    mask: np.ndarray | None = None,
    tolerance: Tolerance | None = None,
    check_dtype: bool = True,
) -> list[Comparison]:
    """Compare two nested outputs leaf by leaf (one batch)."""
    return compare_output_batches(
        [actual], [expected], masks=[mask], tolerance=tolerance, check_dtype=check_dtype
    )


def compare_output_batches(
    actual: Sequence[Any],
    expected: Sequence[Any],
    *,
    masks: Sequence[np.ndarray | None] | None = None,
    tolerance: Tolerance | Callable[[str], Tolerance] | None = None,
    check_dtype: bool = True,
    compare: Callable[..., Comparison] = compare_batches,
) -> list[Comparison]:
    """Compare nested outputs over several batches; one :class:`Comparison` per leaf.

    Masks apply to each leaf by its shape and name (:func:`.masks.leaf_mask`: not to a
    pooled output). ``tolerance`` may be one Tolerance, a function of the leaf name
    (when the allowed error depends on the tensor), or None for the dtype defaults. A
    leaf missing from any batch of one side is a failed comparison with a problem that
    says so. ``compare``: what compares one leaf present on both sides (takes
    :func:`compare_batches`' arguments; the cross-check referees there too).
    """
    flat_a = [flatten(x) for x in actual]
    flat_b = [flatten(x) for x in expected]
    masks = list(masks) if masks is not None else [None] * len(flat_a)
    names = list(flat_b[0]) + [n for n in flat_a[0] if n not in flat_b[0]]

    def one(name: str) -> Comparison:
        in_a, in_b = all(name in f for f in flat_a), all(name in f for f in flat_b)
        if not (in_a and in_b):
            side = "actual" if not in_a else "expected"
            return _missing(name, side, flat_a[0].get(name), flat_b[0].get(name))
        return compare(
            [f[name] for f in flat_a],
            [f[name] for f in flat_b],
            name=name,
            masks=masks,
            tolerance=tolerance(name) if callable(tolerance) else tolerance,
            check_dtype=check_dtype,
        )

    # In the calling thread: threads comparing large leaves contend for memory bandwidth.
    return [one(name) for name in names]


def _missing(name: str, side: str, a: np.ndarray | None, b: np.ndarray | None) -> Comparison:
    present = a if a is not None else b
    tol = default_tolerance(present.dtype)
    return Comparison.failed(
        f"Output '{name}' is missing from the {side} side.",
        name=name,
        shape=list(a.shape) if a is not None else [],
        expected_shape=list(b.shape) if b is not None else [],
        dtype=dtype_name(a.dtype) if a is not None else "",
        expected_dtype=dtype_name(b.dtype) if b is not None else "",
        atol=tol.atol,
        rtol=tol.rtol,
    )
