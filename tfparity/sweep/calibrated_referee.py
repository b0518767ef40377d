"""The sweep's calibrated float64 referee (``--referee calibrated``): the cross-check
referee's verdict from the float32 runs wherever margins calibrated on float64 rows say
float64 could not change it (numpy only). Not the cross-check's ``--referee lazy``,
whose exact bound needs float64 on part of what one verdict covers: a sweep's verdict
covers one item, and an item without float64 has no part to bound the rest by."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..compare import Referee


@dataclass
class CalibratedReferee:
    """Which rows need the float64 pass: the :class:`Referee`'s verdict, decided from the
    float32 runs where a margin makes the float64 run unable to change it.

    Per leaf and row: ``d`` TF's RMSE to PyTorch (known from float32), ``e_r`` PyTorch's
    own RMSE to float64 and ``rho`` the cosine between their errors. Two bounds, measured
    on the rows float64 runs for and only ever widened (``low``/``high`` per leaf for
    ``e_r``, ``alignment`` for ``rho``), give a sure pass or a sure fail; float64 decides
    the rest. Each later batch's *sentinel* (the sure pass with the least room) runs
    float64 too, counted in ``violations`` when it broke a bound and in
    ``disagreements`` when its verdict differed. The derivation, and why the cosine, are
    in docs/sweep.md ("The float64 referee, only where it decides")."""

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

    def decide(
        self, name: str, d: float, s_r: float, a_finite: bool, values: int
    ) -> tuple[bool | None, float]:
        """``(verdict or None when float64 must decide, room)``; ``room`` is how far below
        the allowed RMSE the worst-case TF error lies, relative to it (for the sentinel).
        ``values``: the row's valid values in the leaf (the referee's factor widens for
        few, :meth:`Referee.factor_for`)."""
        if not a_finite:
            return False, 0.0
        if not (np.isfinite(d) and np.isfinite(s_r)) or name not in self.low:
            return None, 0.0
        F, f = self.referee.factor_for(values), self.referee.floor
        e_r = self.low[name] / self.margin * s_r
        # The worst case sits at the smallest e_r: allowed minus worst grows with e_r.
        worst = np.sqrt(d * d + e_r * e_r + 2.0 * min(self.alignment, 1.0) * d * e_r)
        allowed = self.referee.allowed(e_r, s_r - e_r, values)  # a bound, before any float64
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
            "referee": "calibrated",
            "items": self.items,
            "items_fp64": self.items_fp64,
            "assumption_violations": self.violations,
            "disagreements": self.disagreements,
        }
