"""What a diagnosis found about one embeddings tensor (numpy and plain values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .causes import Rounding, RowLayout, Scale, TokenTypes


@dataclass(frozen=True)
class Diagnosis:
    """The stage a tensor is (``verdict``, or ``unknown``), its distance to each
    candidate, the ids it encodes, and the facts that explain a mismatch: rows in
    another order or shifted (``layout``), token types left out (``token_types``), one
    factor on every value (``scale``), half-precision rounding (``rounding``).
    ``fix`` is the advice and its code line."""

    verdict: str
    candidates: dict[str, float | None]
    ids: np.ndarray
    recovered: np.ndarray
    valid: np.ndarray
    mismatches: dict[str, Any]
    outputs_match: bool
    layout: RowLayout | None = None
    token_types: TokenTypes | None = None
    scale: Scale | None = None
    rounding: Rounding | None = None
    fix: dict[str, str] = field(default_factory=dict)

    @property
    def ids_match(self) -> np.ndarray:
        return self.recovered[self.valid] == self.ids[self.valid]

    @property
    def ids_all_match(self) -> bool:
        return bool(self.ids_match.all())

    @property
    def hint(self) -> str:
        """The advice with its code, as one line for a divergence."""
        code = self.fix.get("code", "")
        return self.fix["advice"] + (f" {code}" if code else "")

    def details(self) -> dict[str, Any]:
        """The JSON fields of a diagnose report that come from the diagnosis."""
        match = self.ids_match
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "candidates": self.candidates,
            "recovered_ids_match": float(match.mean()) if match.size else 1.0,
            "recovered_ids_mismatched": int((~match).sum()),
            "tokens": int(self.valid.sum()),
            "id_mismatches": self.mismatches["first"],
            "id_offset": self.mismatches["offset"],
            "outputs_match": self.outputs_match,
            "row_layout": None,
            "token_type_ids": None,
            "scale": None,
            "rounding": None,
        }
        if self.layout is not None:
            lay = self.layout
            out["row_layout"] = {"stage": lay.stage, "kind": lay.kind, "rows": lay.rows}
            out["row_layout"].update(shifts=lay.shifts, padding=lay.padding)
        if self.token_types is not None:
            out["token_type_ids"] = self.token_types.types.tolist()
            out["token_types_distance"] = self.token_types.distance
        if self.scale is not None:
            s = self.scale
            out["scale"] = {"stage": s.stage, "factor": s.factor, "distance": s.distance}
        if self.rounding is not None:
            r = self.rounding
            out["rounding"] = {"dtype": r.dtype, "max_abs": r.max_abs, "relative": r.relative}
        return out
