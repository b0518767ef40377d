"""The judges: what decides whether a compared tensor passes, each in one place.

Four judges, one shape (as Polygraphy's pluggable compare functions, and as
``torch.testing`` puts every pair through one ``Pair``): ``judge(name, actual, expected,
...) -> Comparison`` and ``describe() -> str``, the line a report's ``judge`` detail says.

- :class:`ToleranceJudge`: ``|a - e| <= atol + rtol |e|`` element by element
  (:class:`.tolerance.Closeness`);
- :class:`Referee`: the float64 referee, ``rmse(a, t) <= factor x rmse(e, t) + floor x
  rms(t)`` with ``t`` the float64 truth; its rule (:meth:`Referee.allowed`), its refusal of
  non-finite errors (:func:`within`), its text (:meth:`Referee.describe`) and the exact
  bound that lets the cross-check skip float64 runs (:meth:`Referee.settled`) live here
  and nowhere else;
- :class:`BudgetJudge`: a quantised side's largest/mean error and cosine
  (:class:`.budgets.Budget`);
- :class:`CrossBackendReferee`: one Keras backend's output against the float64 truth,
  the other backends standing in for the referee's float32 reference, under a ceiling
  (``tfparity backends``, :mod:`tfparity.cross_backend.judge`).

A check's compared tensors reach their judge through ``judge(...)``; where a check needs
the referee's numbers, not a comparison (the taps, generation's steps), through
:meth:`Referee.batches`; the sweep applies :meth:`Referee.allowed` to every row at once
(thousands of items, one vector).

The known difference of a port (where its divergence is expected, and why) is matched
against a localised divergence here too (:func:`known_difference_note`), for the
cross-check's localisation and the gradients' alike. Numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from .budgets import Budget, judged_by_budget
from .record import Comparison
from .referee import RefereeResult, RefereeSums, unthreaded_rmse
from .stats import compare_batches
from .tolerance import Tolerance

_ROUNDING = 1e-9  # relative: far above float64 sums' rounding, far below any margin

# Per number of values n: the square root of the F(n, n) distribution's 1 - 1e-4
# quantile (scipy.stats.f.ppf(1 - 1e-4, n, n), rounded up), i.e. the ratio of two RMSEs
# over n values of the same rounding noise that one clean leaf in 10^4 exceeds. Past 16
# values it is below the default factor of 3.
SMALL_LEAF_FACTORS = {
    1: 6366.2, 2: 100.0, 3: 25.68, 4: 13.11, 5: 8.77, 6: 6.7, 7: 5.52, 8: 4.77,
    9: 4.24, 10: 3.86, 11: 3.57, 12: 3.34, 13: 3.15, 14: 3.0, 15: 2.87, 16: 2.76,
}  # fmt: skip


Batches = Sequence[Any]  # one tensor's arrays, batch by batch
Masks = Sequence[np.ndarray | None] | None  # the batches' attention masks


class Judge(Protocol):
    """What decides one compared tensor. ``actual``/``expected``: the tensor's batches
    on the side under test and the reference; ``truth``: the float64 reference's, where
    the judge needs one (its batches, or their :class:`.referee.RefereeSums` where a
    caller summed them as they came); ``masks``: the attention masks (padding is not
    judged); ``slack``: an RMSE allowed beyond the judge's bound, where a caller knows of
    rounding the reference's own error does not show (judges with no RMSE bound, a
    tolerance or a budget, have none to widen)."""

    def judge(
        self,
        name: str,
        actual: Batches,
        expected: Batches,
        *,
        masks: Masks = None,
        truth: Batches | RefereeSums | None = None,
        slack: float = 0.0,
    ) -> Comparison: ...

    def describe(self) -> str: ...


def within(error: Any, allowed: Any) -> Any:
    """``error <= allowed``, refusing a non-finite error (NaN compares False anyway, but
    an infinite ``allowed`` would pass an infinite error): elementwise for arrays. The
    one place every judge that bounds an RMSE refuses NaN and Inf."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(error) & (np.asarray(error) <= allowed)
    return bool(ok) if np.ndim(ok) == 0 else ok


@dataclass(frozen=True)
class ToleranceJudge:
    """A fixed tolerance (None: the dtypes' defaults, as ``torch.testing``)."""

    tolerance: Tolerance | None = None
    check_dtype: bool = True

    def judge(
        self, name: str, actual: Batches, expected: Batches, *, masks: Masks = None, **_: Any
    ) -> Comparison:
        return compare_batches(
            actual,
            expected,
            name=name,
            masks=masks,
            tolerance=self.tolerance,
            check_dtype=self.check_dtype,
        )

    def describe(self) -> str:
        return "tolerance"


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

    def allowed(self, reference_rmse: Any, scale: Any, n: Any = None) -> Any:
        """The rule: the RMSE to the truth a candidate may have, given the reference's
        own (``reference_rmse``) and the truth's RMS (``scale``), over ``n`` values (the
        factor widens for few; None: the plain factor). Arrays give one bound each."""
        if n is None:
            factor: Any = self.factor
        elif np.ndim(n):
            factor = np.array([self.factor_for(k) for k in np.ravel(n)]).reshape(np.shape(n))
        else:
            factor = self.factor_for(n)
        return factor * reference_rmse + self.floor * scale

    def describe(self, scope: str = "") -> str:
        """The judge line: ``float64 referee (factor 3, floor 1e-07 x RMS)``; ``scope``
        says what it judges one by one (``per step``)."""
        where = f" {scope}" if scope else ""
        return f"float64 referee{where} (factor {self.factor:g}, floor {self.floor:g} x RMS)"

    def verdict(
        self, name: str, actual_rmse: float, reference_rmse: float, scale: float, n: Any = None
    ) -> RefereeResult:
        """The verdict of one leaf from its three RMSEs (``scale``: the truth's RMS)."""
        factor = self.factor if n is None else self.factor_for(n)
        allowed = float(self.allowed(reference_rmse, scale, n))
        ratio = actual_rmse / reference_rmse if reference_rmse > 0 else None
        passed = within(actual_rmse, allowed)
        return RefereeResult(name, actual_rmse, reference_rmse, allowed, ratio, passed, factor)

    def result(self, name: str, sums: RefereeSums) -> RefereeResult | None:
        """The verdict on a leaf's summed batches; None when a batch could not be
        refereed (the three sides differ in shape)."""
        if not sums.usable:
            return None
        a, r, t = sums.rmses()
        return self.verdict(name, a, r, t, sums.n)

    def settled(self, sums: RefereeSums) -> bool:
        """True when no float64 run of the batches not yet refereed can change the
        verdict: the referee passes whatever they hold. Exact, no assumption: with ``K``
        the batches refereed and ``U`` the rest, ``a = (a_K, d_U) + (0, r_U)`` (``d`` the
        candidate minus the reference, ``r`` the reference's own error), so
        ``|a| <= |(a_K, d_U)| + |r_U|``, while ``F |r| - |r_U|`` is at least
        ``sqrt(F^2 - 1) |r_K|`` (its minimum over ``|r_U|``); ``|(a_K, d_U)|`` below
        that, plus the floor on the refereed truth, is a pass. Derivation in
        docs/crosscheck.md ("Float64 only where it decides")."""
        rest = sums.differences[sums.batches :]
        if not sums.usable or not rest or self.factor <= 1.0:
            return False
        worst = math.sqrt(sums.at + math.fsum(rest))
        bound = math.sqrt(self.factor**2 - 1.0) * math.sqrt(sums.rt)
        bound += self.floor * math.sqrt(sums.tt)
        return bool(worst <= bound * (1.0 - _ROUNDING))  # float64 sums: room for their rounding

    def batches(
        self,
        name: str,
        actual: Sequence[Any],
        reference: Sequence[Any],
        truth: Sequence[Any],
        masks: Sequence[np.ndarray | None] | None = None,
    ) -> RefereeResult:
        """Referee one named tensor over batches (padding excluded, as in comparisons)."""
        masks = list(masks) if masks is not None else [None] * len(actual)
        sums = RefereeSums()
        for a, r, t, mask in zip(actual, reference, truth, masks, strict=True):
            sums.add(a, r, t, mask, name=name)
        result = self.result(name, sums)
        if result is None:
            raise ValueError(f"{name}: the three sides differ in shape; nothing to referee.")
        return result

    def judge(
        self,
        name: str,
        actual: Batches,
        expected: Batches,
        *,
        masks: Masks = None,
        truth: Batches | RefereeSums | None = None,
        slack: float = 0.0,
    ) -> Comparison:
        """The comparison of ``actual`` and ``expected`` judged by the float64 ``truth``
        (the allowed RMSE widened by ``slack``); without a truth, or with sums that
        could not be refereed (:meth:`result`), by the dtypes' default tolerance. A
        comparison that found a problem (shapes, NaN) keeps its verdict."""
        c = compare_batches(actual, expected, name=name, masks=masks, check_dtype=False)
        if truth is None or c.problem:
            return c
        if isinstance(truth, RefereeSums):
            r = self.result(name, truth)
        else:
            r = self.batches(name, actual, expected, truth, masks)
        if r is not None and slack:
            allowed = r.allowed_rmse + slack
            r = replace(r, allowed_rmse=allowed, passed=within(r.actual_rmse, allowed))
        return judged_by_referee(c, r, self)


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


@dataclass(frozen=True)
class BudgetJudge:
    """A quantised or reduced-precision side's budget (``quantisation``: its kind, None
    for a float32 side judged by a budget on request)."""

    budget: Budget
    quantisation: str | None = None

    def judge(
        self, name: str, actual: Batches, expected: Batches, *, masks: Masks = None, **_: Any
    ) -> Comparison:
        c = compare_batches(actual, expected, name=name, masks=masks, check_dtype=False)
        return judged_by_budget(c, self.budget)

    def describe(self) -> str:
        kind = self.quantisation
        what = f"quantised ({kind})" if kind else "float32"
        return f"{what}: judged by budgets: {self.budget.text()}; not by the float64 referee" + (
            " (a quantised model differs from float32 by design)" if kind else ""
        )


# The cross-backend rule's ceiling: a relative RMSE (float32's epsilon is 1.2e-7).
DEFAULT_CEILING = 1e-4


@dataclass(frozen=True)
class CrossBackendReferee:
    """One Keras backend's output of a layer against the float64 truth (``expected``:
    the truth itself; ``truth`` and ``masks`` are not read: a layer is judged whole).
    With ``e`` its RMSE to the truth and ``s`` the truth's RMS (or ``scale``), it passes
    when

        e <= min(factor x min(others) + floor x s,  ceiling x s)

    ``others``: the other backends' RMSEs to the truth. The first term is
    :class:`Referee`'s rule, the other backends standing in for its float32 reference:
    each has float32 rounding of its own, so the smallest of theirs is how much one
    float32 run of this layer may honestly err. Taking the others' (not a median over
    all) keeps a faulty backend from widening its own bound, and works with two
    backends. It cannot fail every backend at once (the best one is always within
    ``factor`` of the rest), so the second term, a ``ceiling`` on the relative error
    that float32 rounding does not come near in a small model, catches backends that
    agree with each other but not with the truth (a layer that computes differently at
    float64, or a fault shared by every backend). With no others the ceiling judges."""

    referee: Referee = Referee()
    ceiling: float = DEFAULT_CEILING
    others: tuple[float, ...] = ()
    # The RMS the floor and the ceiling are measured in (None: the truth's; a gradient
    # that is zero in exact arithmetic is measured in its layer's other gradients).
    scale: float | None = None

    def judge(
        self, name: str, actual: Batches, expected: Batches, *, slack: float = 0.0, **_: Any
    ) -> Comparison:
        c = compare_batches(actual, expected, name=name, check_dtype=False)
        if c.problem:  # a shape or non-finite problem keeps its own verdict
            return c
        a, t = (np.concatenate([np.ravel(x) for x in side]) for side in (actual, expected))
        referee = self.referee
        scale = unthreaded_rmse(t, 0.0) if self.scale is None else self.scale
        cap = self.ceiling * scale + referee.floor * scale
        reference = min(self.others) if self.others else cap / referee.factor
        r = referee.verdict(name, unthreaded_rmse(a, t), reference, scale, t.size)
        allowed = min(r.allowed_rmse, cap) + slack
        r = replace(r, allowed_rmse=allowed, passed=within(r.actual_rmse, allowed))
        return judged_by_referee(c, r, referee)

    def describe(self) -> str:
        return (
            f"{self.referee.describe()}, the other backends as the float32 reference; "
            f"ceiling {self.ceiling:g} x RMS"
        )


class KnownPlace(Protocol):
    """Where a port's known difference shows (the registry's ``KnownDifference``): the
    fields and methods :func:`known_difference_note` reads."""

    hidden_state: int
    layer: int | str
    component: str | None
    finding: str

    def reproduced_by(self, config: Any) -> bool: ...

    def rerun(self) -> str: ...


def known_difference_note(
    known: KnownPlace | None,
    reference_config: Any,
    hidden_state: int | None,
    layer: Any,
    component: str | None = None,
) -> str:
    """``"; a known difference of this port: ..."`` when a divergence localised to
    (``hidden_state``, ``layer``, ``component``) is the port's ``known`` difference, else
    ``""``. The hidden state and layer must match; the component too, unless the
    localisation named none (no sub-layer taps, or the gradients check, which localises
    to the layer): it then does not contradict the finding. Not where the reference
    already computes as the port does (built with the finding's ``reference_config``): a
    divergence there is something else."""
    if known is None or (known.hidden_state, known.layer) != (hidden_state, layer):
        return ""
    if component is not None and known.component != component:
        return ""
    if known.reproduced_by(reference_config):
        return ""
    return f"; a known difference of this port: {known.finding}{known.rerun()}"
