"""Numerical comparison of nested model outputs (numpy only).

A comparison is split into small steps, in the spirit of ``torch.testing``:
flatten both sides into named leaves, check each leaf's shape and dtype, compute the
closeness ``|a - b| <= atol + rtol * |b|`` over the positions that matter (padding
excluded), summarise the error, and build one readable message when it fails.

``actual`` is the side under test (e.g. the ``inputs_embeds`` path, or TensorFlow),
``expected`` the reference (e.g. the ``input_ids`` path, or PyTorch).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import TfparityError


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
    names = [_dtype_name(d) for d in dtypes]
    floats = [n for n in names if n in _DEFAULTS]
    if not floats:
        return Tolerance(atol=0.0, rtol=0.0)
    loosest = max(floats, key=lambda n: _DEFAULTS[n][1])
    atol, rtol = _DEFAULTS[loosest]
    return Tolerance(atol=atol, rtol=rtol)


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, type) and issubclass(dtype, np.generic):  # np.float32, not its dtype
        dtype = np.dtype(dtype)
    name = getattr(dtype, "name", None) or str(dtype)
    return str(name).replace("tf.", "").replace("torch.", "")


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


# ----------------------------------------------------------------------------- flattening


def to_numpy(x: Any) -> np.ndarray:
    """Convert a TF/torch/numpy tensor to numpy without importing a framework."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            return x.float().numpy()
        return x.numpy()
    if hasattr(x, "numpy"):  # tf
        # TF's __array__ reads a CPU tensor in place (read-only); its .numpy() copies
        # (every output: 70 MB in a minilm cross-check).
        return np.asarray(x) if hasattr(x, "__array__") else np.asarray(x.numpy())
    return np.asarray(x)


def flatten(tree: Any, prefix: str = "") -> dict[str, np.ndarray]:
    """Named leaves of a nested output, in order: ``hidden_states[3]``, ``past[0].key``.

    Mappings (including Hugging Face ``ModelOutput``) give ``name`` or ``prefix.name``;
    sequences give ``prefix[i]``; ``None`` leaves are dropped.
    """
    out: dict[str, np.ndarray] = {}
    if tree is None:
        return out
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(tree, (tuple, list)):
        for i, value in enumerate(tree):
            out.update(flatten(value, f"{prefix}[{i}]"))
    else:
        out[prefix] = to_numpy(tree)
    return out


# ----------------------------------------------------------------------------- one leaf


def valid_positions(shape: Sequence[int], mask: np.ndarray | None) -> np.ndarray | None:
    """Broadcast an attention mask ``[batch, seq]`` over a leaf of ``shape``.

    The mask applies to leaves shaped ``[batch, seq, ...]`` only (hidden states,
    logits); a pooled output ``[batch, hidden]`` has no padded positions.
    Returns a boolean array of ``shape`` or ``None`` when the mask does not apply.
    """
    if mask is None:
        return None
    mask = np.asarray(mask).astype(bool)
    if len(shape) < 2 or tuple(shape[:2]) != mask.shape:
        return None
    expanded = mask.reshape(mask.shape + (1,) * (len(shape) - 2))
    return np.broadcast_to(expanded, tuple(shape))


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
    dtype_a, dtype_b = _dtype_name(a_list[0].dtype), _dtype_name(b_list[0].dtype)
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
            return _failed_early(base, problem)
    if check_dtype and dtype_a != dtype_b:
        return _failed_early(base, f"Dtype mismatch: {dtype_a} vs expected {dtype_b}.")
    if any(np.iscomplexobj(x) for x in a_list + b_list):
        # float64 conversion would drop the imaginary part (with only a warning) and
        # pass tensors whose imaginary parts differ.
        raise TypeError(
            f"{name or 'the tensors'}: complex arrays are not compared (the imaginary part "
            "would be dropped); compare x.real and x.imag as two tensors."
        )

    layout = _Layout.of(a_list, masks)
    padding = _padding(a_list, b_list, layout.keeps)
    if layout.total == 0 and padding.count:
        return _failed_early(
            base,
            f"Nothing compared: the mask excludes all {padding.count} elements "
            "(an attention mask of zeros only?). A comparison of nothing does not pass.",
        )
    stats = _fused_stats(a_list, b_list, layout, tol)  # None: NaN or Inf somewhere
    if stats is None:
        stats = _general_stats(_gather_valid(a_list, b_list, layout), tol)
    return _summarise(base, stats, layout, padding, a_list, b_list)


@dataclass
class _Layout:
    """Where each batch's valid elements sit among the leaf's valid elements, flattened
    in order: a statistic's index maps back to ``(sample, ...)`` through it."""

    shapes: list[tuple[int, ...]]
    # Per batch: which of its ``batch * seq`` token rows are valid (None: all elements).
    keeps: list[np.ndarray | None]
    offsets: np.ndarray  # start of each batch among the valid elements
    total: int

    @classmethod
    def of(cls, arrays: Sequence[np.ndarray], masks: Sequence[Any]) -> _Layout:
        keeps = _valid_keeps(arrays, masks)
        sizes = [
            x.size if k is None else int(np.count_nonzero(k)) * _row_width(x)
            for x, k in zip(arrays, keeps, strict=True)
        ]
        offsets = np.array([0, *itertools.accumulate(sizes[:-1])], dtype=np.int64)
        return cls([x.shape for x in arrays], keeps, offsets, int(sum(sizes)))

    def rows(self, x: np.ndarray, batch: int) -> np.ndarray:
        """Batch ``batch``'s valid elements of ``x``, flattened (a view when none is
        padded: selecting rows would copy the whole batch)."""
        keep = self.keeps[batch]
        if keep is None:
            return x.reshape(-1)
        return _token_rows(x, keep)[keep].reshape(-1)

    def locate(self, k: int) -> tuple[int, tuple[int, ...]]:
        """The batch holding valid element ``k``, and the element's index in it."""
        batch = int(np.searchsorted(self.offsets, k, side="right") - 1)
        shape, keep = self.shapes[batch], self.keeps[batch]
        flat = k - int(self.offsets[batch])
        if keep is not None:
            inner = math.prod(shape[2:])
            row, col = divmod(flat, inner)
            flat = int(np.flatnonzero(keep)[row]) * inner + col
        return batch, tuple(int(i) for i in np.unravel_index(flat, shape))

    def index_of(self, k: int) -> list[int]:
        batch, index = self.locate(k)
        out = list(index)
        if out:
            out[0] += sum(s[0] for s in self.shapes[:batch])
        return out


@dataclass
class _Valid:
    """The valid elements of all batches, gathered and flattened (the general path)."""

    a: np.ndarray
    b: np.ndarray
    layout: _Layout

    def index_of(self, k: int) -> list[int]:
        return self.layout.index_of(k)


@dataclass
class _Padding:
    count: int = 0  # padded elements left out
    max_diff: float = 0.0  # their largest finite |a - b| (0.0 when none)


def _valid_keeps(arrays: Sequence[np.ndarray], masks: Sequence[Any]) -> list[np.ndarray | None]:
    """Per batch, which token rows (``[batch, seq]`` flattened) are unpadded; None when
    the mask does not apply (see :func:`valid_positions`) or keeps them all. Rows, not
    elements: selecting whole token rows copies contiguous memory, several times faster
    than an element mask."""
    keeps = []
    for x, mask in zip(arrays, masks, strict=True):
        applies = mask is not None and x.ndim >= 2 and tuple(x.shape[:2]) == np.shape(mask)
        keep = np.asarray(mask, dtype=bool).reshape(-1) if applies else None
        keeps.append(None if keep is None or keep.all() else keep)  # None: nothing padded
    return keeps


def _row_width(x: np.ndarray) -> int:
    return math.prod(x.shape[2:])  # not np.prod: 15 us a call, on every batch of a leaf


def _token_rows(x: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``x`` as ``[batch * seq, rest]`` (``rest`` 1 for a ``[batch, seq]`` leaf)."""
    return x.reshape(keep.size, _row_width(x))


def _valid_values(arrays: Sequence[np.ndarray], layout: _Layout) -> np.ndarray:
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
            d = np.subtract(_token_rows(a, keep)[padded], _token_rows(b, keep)[padded], dtype=float)
            found.count += d.size
            largest = float(np.abs(d, out=d).max(initial=0.0))
            if not np.isfinite(largest):  # NaN or Inf in the padding: the finite ones
                largest = float(np.max(d, where=np.isfinite(d), initial=0.0))
            found.max_diff = max(found.max_diff, largest)
    return found


def _gather_valid(a_list, b_list, layout: _Layout) -> _Valid:
    return _Valid(_valid_values(a_list, layout), _valid_values(b_list, layout), layout)


def failed_comparison(name: str, problem: str, shape: list[int], dtype: str) -> Comparison:
    """A failed comparison that compared no values, for a problem found another way
    (e.g. NaN in a weight the outputs never reach)."""
    base = dict(
        name=name,
        shape=shape,
        expected_shape=shape,
        dtype=dtype,
        expected_dtype=dtype,
        atol=0.0,
        rtol=0.0,
    )
    return _failed_early(base, problem)


def _failed_early(base: dict, problem: str) -> Comparison:
    nan = 0.0
    return Comparison(
        **base,
        passed=False,
        total=0,
        mismatched=0,
        max_abs_diff=nan,
        mean_abs_diff=nan,
        median_abs_diff=nan,
        p99_abs_diff=nan,
        max_rel_diff=nan,
        worst_index=None,
        worst_actual=None,
        worst_expected=None,
        cosine=None,
        required_atol=nan,
        problem=problem,
    )


_TINY, _HUGE = np.finfo(np.float64).tiny, float(np.finfo(np.float64).max)


def _summarise(
    base: dict, stats: dict, layout: _Layout, padding: _Padding, a_list: list, b_list: list
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
    Summed in x's own precision, at least float32: a float64 sum of float32 converts
    every element on the way, twice the time of the scan itself."""
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(x, dtype=np.result_type(x.dtype, np.float32))):
            return True
    return bool(np.isfinite(x).all())


# Elements per block of the fast path: its five buffers then stay in a core's L2 cache
# (16K was the fastest of 4K-64K on minilm's leaves). Whole-leaf temporaries streamed
# through memory, and two threads doing so contended for it: threads ran slower than one.
_BLOCK = 1 << 14


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
    a_list: list, b_list: list, layout: _Layout, tol: Tolerance
) -> dict[str, Any] | None:
    """The all-finite case in one pass over each batch's valid elements, in blocks
    converted to float64 in cache (no gathered copy of the leaf): the element rule's
    totals, |a - b| into one array (for the mean, median and p99) and the cosine's sums.
    None when a difference is not finite (NaN or Inf on a side, or an overflow): the
    general path decides those."""
    diff = np.empty(layout.total)
    blocks = _Blocks(min(_BLOCK, max((a.size for a in a_list), default=0)), tol)
    with np.errstate(invalid="ignore", over="ignore"):
        for i, (a, b) in enumerate(zip(a_list, b_list, strict=True)):
            av, bv = layout.rows(a, i), layout.rows(b, i)
            start = int(layout.offsets[i])
            for s in range(0, av.size, _BLOCK):
                e = min(s + _BLOCK, av.size)
                blocks.add(av[s:e], bv[s:e], diff[start + s : start + e], start + s)
        mean = float(diff.mean()) if diff.size else 0.0  # before the median reorders diff
    if not np.isfinite(mean):
        return None
    totals, sums = blocks.totals, blocks.sums
    median, p99 = _median_p99(diff, diff) if diff.size else (0.0, 0.0)
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
        x, y = _as_float64(a, self.x[:n]), _as_float64(b, self.y[:n])
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


def _as_float64(x: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """``x`` itself when float64, else converted into ``buffer``."""
    if x.dtype == np.float64:
        return x
    np.copyto(buffer, x, casting="unsafe")
    return buffer


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
    """``np.percentile(d, [50, 99])`` (linear interpolation, numpy's own formula), from
    two single-index partitions: numpy's partition with several indices at once was
    6x slower than one. The median's partition of the whole comes first, so that p99's
    runs on the upper half only (1.5 passes, not 2). ``scratch``: a float64 array of
    d's size to partition in (else a copy is made; d stays in order), or ``d`` itself
    to partition it in place."""
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


# ----------------------------------------------------------------------------- nested


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


POOLED_OUTPUTS = ("pooler_output", "pooled_output")


def compare_output_batches(
    actual: Sequence[Any],
    expected: Sequence[Any],
    *,
    masks: Sequence[np.ndarray | None] | None = None,
    tolerance: Tolerance | Callable[[str], Tolerance] | None = None,
    check_dtype: bool = True,
    unmasked: Collection[str] = POOLED_OUTPUTS,
    compare: Callable[..., Comparison] = compare_batches,
) -> list[Comparison]:
    """Compare nested outputs over several batches; one :class:`Comparison` per leaf.

    Masks apply by shape (:func:`valid_positions`), except to the leaves named in
    ``unmasked``: a pooled ``[batch, hidden]`` output has no token axis, even when its
    width happens to equal the sequence length.

    ``tolerance`` may be one Tolerance, a function of the leaf name (when the allowed
    error depends on the tensor), or None for the dtype defaults. A leaf missing from
    any batch of one side is a failed comparison with a problem that says so.
    ``compare``: what compares one leaf present on both sides (takes
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
            masks=None if name in unmasked else masks,
            tolerance=tolerance(name) if callable(tolerance) else tolerance,
            check_dtype=check_dtype,
        )

    # In the calling thread: two threads comparing large leaves contended for memory
    # and ran slower than one (measured on 2 cores, minilm's 9 leaves).
    return [one(name) for name in names]


def _missing(name: str, side: str, a: np.ndarray | None, b: np.ndarray | None) -> Comparison:
    present = a if a is not None else b
    tol = default_tolerance(present.dtype)
    base = dict(
        name=name,
        shape=list(a.shape) if a is not None else [],
        expected_shape=list(b.shape) if b is not None else [],
        dtype=_dtype_name(a.dtype) if a is not None else "",
        expected_dtype=_dtype_name(b.dtype) if b is not None else "",
        atol=tol.atol,
        rtol=tol.rtol,
    )
    return _failed_early(base, f"Output '{name}' is missing from the {side} side.")


def failure_message(comparisons: Sequence[Comparison]) -> str:
    """All failing leaves' blocks, worst first, for an assertion error."""
    failing = [c for c in comparisons if not c.passed]
    if not failing:
        return "All outputs are close."
    failing.sort(key=lambda c: (c.problem is None, -c.max_abs_diff))
    head = f"{len(failing)} of {len(comparisons)} outputs differ."
    return "\n\n".join([head] + [c.message() for c in failing])


# ----------------------------------------------------------------------------- referee


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


@dataclass
class RefereeResult:
    name: str
    actual_rmse: float
    reference_rmse: float
    allowed_rmse: float
    ratio: float | None  # actual_rmse / reference_rmse
    passed: bool


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
        sums.add(a, r, t, mask)
    result = sums.result(name, referee)
    if result is None:
        raise ValueError(f"{name}: the three sides differ in shape; nothing to referee.")
    return result


@dataclass
class RefereeSums:
    """One leaf's referee, summed batch by batch as the float64 runs arrive, so that
    they need not be kept: a minilm cross-check of 256 sentences kept 140 MB of
    float64 outputs, fresh memory whose page faults cost ~4% of its run. In float64
    over the valid elements (padding excluded by ``mask``, as in comparisons): the
    squares of ``a - t`` (candidate), ``r - t`` (reference) and ``t`` (truth)."""

    at: float = 0.0
    rt: float = 0.0
    tt: float = 0.0
    n: int = 0
    batches: int = 0
    usable: bool = True  # False once a batch's three sides differed in shape
    _buffers: list = field(default_factory=list, init=False, repr=False, compare=False)

    def add(self, actual: Any, reference: Any, truth: Any, mask: np.ndarray | None) -> None:
        """One batch of the three sides; a mask applies as in comparisons (by shape)."""
        a, r, t = (to_numpy(x) for x in (actual, reference, truth))
        self.batches += 1
        if not a.shape == r.shape == t.shape or any(np.iscomplexobj(x) for x in (a, r, t)):
            self.usable = False
            return
        layout = _Layout.of([t], [mask])
        av, rv, tv = (layout.rows(x, 0) for x in (a, r, t))
        x, y, z = self._buffers_of(min(_BLOCK, av.size))
        with np.errstate(invalid="ignore", over="ignore"):
            for s in range(0, av.size, _BLOCK):
                e = min(s + _BLOCK, av.size)
                k = e - s
                truth_block = _as_float64(tv[s:e], z[:k])
                candidate = np.subtract(_as_float64(av[s:e], x[:k]), truth_block, out=x[:k])
                reference = np.subtract(_as_float64(rv[s:e], y[:k]), truth_block, out=y[:k])
                self.at += _unthreaded_squares(candidate)
                self.rt += _unthreaded_squares(reference)
                self.tt += _unthreaded_squares(truth_block)
        self.n += av.size

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
        return _verdict(name, a, r, t, referee)


def _unthreaded_squares(d: np.ndarray) -> float:
    """The sum of ``d``'s squares without BLAS. These sums run between PyTorch's
    float64 batches, and BLAS threads spin for a while after each call: fighting
    PyTorch's threads for 2 cores they made its float64 pass twice as slow."""
    return float(np.einsum("i,i->", d, d))


def _verdict(
    name: str, actual_rmse: float, reference_rmse: float, scale: float, referee: Referee
) -> RefereeResult:
    """Pass when the candidate's error to the truth is within ``factor`` times the
    reference's own, plus ``floor`` times the truth's RMS (``scale``)."""
    allowed = referee.factor * reference_rmse + referee.floor * scale
    passed = bool(np.isfinite(actual_rmse) and actual_rmse <= allowed)
    ratio = actual_rmse / reference_rmse if reference_rmse > 0 else None
    return RefereeResult(name, actual_rmse, reference_rmse, allowed, ratio, passed)


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    """Root mean square difference in float64 (0.0 for empty arrays)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        if a.shape != b.shape:  # broadcasting
            return float(np.sqrt(np.mean((a - b) ** 2)))
        a, b = a.reshape(-1), b.reshape(-1)
        buffer, total = np.empty(min(a.size, _BLOCK)), 0.0
        for start in range(0, a.size, _BLOCK):  # blocks: no whole-size temporaries
            d = np.subtract(
                a[start : start + _BLOCK],
                b[start : start + _BLOCK],
                out=buffer[: min(_BLOCK, a.size - start)],
            )
            total += float(np.dot(d, d))
        return float(np.sqrt(total / a.size))


@dataclass
class LazyReferee:
    """Which rows need the float64 pass: the :class:`Referee`'s verdict, decided from the
    float32 runs where a margin makes the float64 run unable to change it.

    Per leaf and row, ``d`` is TF's RMSE to PyTorch in the run's precision (known from
    float32), ``e_r`` PyTorch's own RMSE to float64 and ``e_a`` TF's (both unknown), and
    ``rho`` the cosine between TF's deviation from PyTorch and PyTorch's own error, so
    that ``e_a**2 = d**2 + e_r**2 + 2 rho d e_r`` exactly. Two bounds, each measured on
    every row the float64 pass runs for and only ever widened, decide a row without it:
    ``e_r >= low / margin`` (PyTorch's relative rounding error has a hard lower tail)
    and ``rho <= alignment`` (TF's deviation is not PyTorch's own error amplified; clean
    ports measure about -0.6, a TF-side fault about 0). A sure pass when even those
    worst cases pass, a sure fail by the triangle inequality with ``e_r`` bounded above;
    float64 decides the rest. The derivation is in docs/sweep.md.

    Why the cosine: with ``rho`` taken as 1 (the triangle inequality alone) a sure pass
    needs ``d <= 2 e_r``, while two independent float32 roundings already put ``d`` at
    about ``1.4 e_r`` (oneDNN's kernels), so nearly every row went to float64 unless
    TF's and PyTorch's kernels happened to round alike (Eigen's: ``d`` about ``1.1 e_r``).

    Later batches also run float64 on a *sentinel*, the row decided "pass" with the
    least room; a sentinel that broke a bound is counted in ``violations``, one whose
    float64 verdict disagreed with the decision in ``disagreements``.
    """

    referee: Referee = field(default_factory=Referee)
    margin: float = 1.25
    upper_margin: float = 4.0
    alignment: float = 0.5
    low: dict[str, float] = field(default_factory=dict)
    high: dict[str, float] = field(default_factory=dict)
    items: int = 0
    items_fp64: int = 0
    violations: int = 0
    disagreements: int = 0

    @property
    def calibrated(self) -> bool:
        return bool(self.low)

    def decide(self, name: str, d: float, s_r: float, a_finite: bool) -> tuple[bool | None, float]:
        """``(verdict or None when float64 must decide, room)``; ``room`` is how far below
        the allowed RMSE the worst-case TF error lies, relative to it (for the sentinel)."""
        if not a_finite:
            return False, 0.0
        if not (np.isfinite(d) and np.isfinite(s_r)) or name not in self.low:
            return None, 0.0
        F, f = self.referee.factor, self.referee.floor
        e_r = self.low[name] / self.margin * s_r
        # The worst case sits at the smallest e_r: allowed minus worst grows with e_r.
        worst = np.sqrt(d * d + e_r * e_r + 2.0 * min(self.alignment, 1.0) * d * e_r)
        allowed = F * e_r + f * (s_r - e_r)
        if worst <= allowed:
            return True, (1.0 - worst / allowed) if allowed > 0 else 0.0
        if d > (F + 1 + f) * self.high[name] * self.upper_margin * s_r + f * s_r:
            return False, 0.0
        return None, 0.0

    def learn(self, name: str, e_r: float, s_r: float, d: float, e_a: float) -> bool:
        """Widen the bounds with one float64 row's measured errors; False when the row
        broke one of them."""
        if not all(np.isfinite(x) for x in (e_r, s_r, d, e_a)):
            return True
        rel = e_r / s_r if s_r > 0 else 0.0
        held = name not in self.low or rel >= self.low[name] / self.margin
        self.low[name] = min(self.low.get(name, rel), rel)
        self.high[name] = max(self.high.get(name, rel), rel)
        if d > 0 and e_r > 0:
            rho = (e_a * e_a - d * d - e_r * e_r) / (2.0 * d * e_r)
            held = held and rho <= self.alignment
            self.alignment = max(self.alignment, rho)
        return held

    def stats(self) -> dict[str, Any]:
        return {
            "referee": "lazy",
            "items": self.items,
            "items_fp64": self.items_fp64,
            "assumption_violations": self.violations,
            "disagreements": self.disagreements,
        }


def row_rms(x: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Per row of ``x`` ([batch, ...]): the RMS over its valid elements (float64); the
    ``[batch, seq]`` mask applies to leaves of rank 3 or more, as in comparisons."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        sq = (x**2).reshape(x.shape[0], x.shape[1] if x.ndim >= 3 else 1, -1).sum(axis=2)
    if x.ndim >= 3 and mask is not None:
        m = np.asarray(mask, bool)
        total = np.where(m, sq, 0.0).sum(axis=1)
        count = m.sum(axis=1) * int(np.prod(x.shape[2:]))
    else:
        total = sq.sum(axis=1)
        count = np.full(x.shape[0], int(np.prod(x.shape[1:])))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.sqrt(total / np.maximum(count, 1)), 0.0)
