"""``generate --quantize MODE``: a Keras-quantised copy of a keras-hub causal LM,
generating against PyTorch, judged as a quantised model is (docs/quantised.md); the
same for a keras-hub causal LM stored quantised (a ``.keras`` file saved after
``model.quantize``), read as it is.

A quantised model differs from float32 by design, so the float64 referee's per-step
verdict would fail it at its first flip, and flips at near ties are what quantisation
does. Here the tokens are reported (how many agree before the first divergence; the
teacher-forced same-top-1 share), not judged one by one; the verdict is the mode's
distribution budget (:mod:`tfparity.compare.budgets`, ``--kl-budget`` overrides
it) on the teacher-forced steps, by a bootstrap interval over the prompts. The TF
cache against its own recomputation is still judged: both run the same quantised
kernels. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...compare.bootstrap import Limit
from ...compare.budgets import budgets_for
from ...compare.quantisation import keras_kind, keras_mode
from ...results import Divergence


@dataclass(frozen=True)
class QuantisedGeneration:
    """The mode the TF side was quantised to and the limits its steps are held to."""

    mode: str
    limits: Sequence[Limit]
    origin: str  # where the limits come from: the mode's default, or --kl-budget
    stored: bool = False  # quantised in the file (read as it is), not by --quantize

    @classmethod
    def of(
        cls, mode: str, given: Sequence[Limit] | None, stored: bool = False
    ) -> QuantisedGeneration:
        limits, origin = budgets_for(keras_kind(mode)).kl_limits(given)
        return cls(mode, limits, origin, stored)

    @classmethod
    def stored_in(cls, side: Any, given: Sequence[Limit] | None) -> QuantisedGeneration | None:
        """The judgement of ``side`` where it is stored quantised by Keras (a ``.keras``
        file saved after ``quantize``: kind ``keras int8``), in its own mode; else None."""
        mode = keras_mode(side.quantisation)
        return None if mode is None else cls.of(mode, given, True)

    def judge_line(self) -> str:
        budget = ", ".join(map(str, self.limits))
        return (
            f"the {self.mode} distribution budget ({budget}; {self.origin}) on the "
            "teacher-forced steps, a bootstrap interval over the prompts; tokens reported, "
            "not judged per step (a quantised model flips at near ties by design)"
        )

    def details(self, rows: Sequence[dict]) -> dict[str, Any]:
        """``details["quantisation"]``: the mode, budget and token agreement."""
        agreed = sum(r["tokens_agreed"] for r in rows)
        total = sum(r["new_tokens"] for r in rows)
        return {
            "mode": self.mode,
            "quantised": (
                f"stored quantised ({self.mode}), read as it is"
                if self.stored
                else f"Keras model.quantize({self.mode!r}) on a copy of the float model"
            ),
            "budget": ", ".join(map(str, self.limits)) + f" ({self.origin})",
            "tokens_agreed": agreed,
            "tokens": total,
            "prompts_all_agreed": sum(r["tokens_agreed"] == r["new_tokens"] for r in rows),
        }

    def divergence(self, over_budget: bool) -> Divergence:
        """Where a quantised generation fails: its steps' distribution over the budget
        (the layer to blame is ``crosscheck --attribute``'s to find), else its cache
        against its own recomputation."""
        what = (
            "the teacher-forced steps' distribution is over its budget"
            if over_budget
            else "its cached steps differ from its own recomputation (a cache defect)"
        )
        return Divergence(
            None,
            "head",
            None,
            f"quantised {self.mode}: {what}; `tfparity crosscheck MODEL --quantize "
            f"{self.mode} --attribute` ranks the layers by what each, quantised alone, moves",
        )
