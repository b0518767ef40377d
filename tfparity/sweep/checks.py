"""The checks a sweep runs on each fixed-shape batch, one RowResult per real row.

Each check reuses the TF ``input_ids`` run (computed once per batch) and adds what it
needs: the embeds check the ``inputs_embeds`` run; the cross-check PyTorch fp32 and the
float64 referee; the positions check explicit position ids and one seeded permutation
per item (seeded by the item's index, so it does not depend on the batch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..checks.positions import EQUIVARIANCE_TOLERANCE
from ..compare import Referee, Tolerance
from ..trace import Trace
from .bucketing import PaddedBatch
from .itemcheck import RowResult, judged, referee_verdicts, row_comparisons, top1_counts

CHECKS = ("embeds", "crosscheck", "positions")


@dataclass
class BatchContext:
    """What the checks share for one batch: the padded batch and the TF ids run."""

    padded: PaddedBatch
    tf_ids: Trace

    @property
    def mask(self) -> np.ndarray:
        return self.padded.batch.attention_mask

    @property
    def rows(self) -> range:
        return range(self.padded.real_rows)


@dataclass
class SweepChecks:
    """The runners (TF, PyTorch) and settings behind the per-row checks."""

    runner_model: Any  # adapters.execution.ExecutedModel
    tf_model: Any
    pt_model: Any = None
    head: Callable[[np.ndarray], np.ndarray] | None = None
    tolerance: Tolerance | None = None
    referee: Referee = Referee()
    seed: int = 0

    def run(self, name: str, ctx: BatchContext) -> list[RowResult]:
        return getattr(self, f"_{name}")(ctx)

    def _with_top1(self, results: list[RowResult], actual: Trace, ctx: BatchContext):
        if self.head is None or "last_hidden_state" not in actual:
            return results
        agree, tokens = top1_counts(self.head, actual, ctx.tf_ids, ctx.mask)
        return [
            replace(r, top1_agree=int(agree[i]), top1_tokens=int(tokens[i]))
            for i, r in enumerate(results)
        ]

    def _embeds(self, ctx: BatchContext) -> list[RowResult]:
        batch = ctx.padded.batch
        actual = self.runner_model.run_gathered(replace(batch, position_ids=None))
        results = [
            judged(row_comparisons(actual, ctx.tf_ids, ctx.mask, r, tolerance=self.tolerance))
            for r in ctx.rows
        ]
        return self._with_top1(results, actual, ctx)

    def _crosscheck(self, ctx: BatchContext) -> list[RowResult]:
        batch = ctx.padded.batch
        pt, pt64 = self.pt_model.run(batch), None
        if self.tolerance is None:
            pt64 = self.pt_model.run(batch, float64=True)
        results = []
        for r in ctx.rows:
            comparisons = row_comparisons(
                ctx.tf_ids, pt, ctx.mask, r, tolerance=self.tolerance, names=_shared(pt, ctx)
            )
            verdicts = (
                None
                if pt64 is None
                else referee_verdicts(ctx.tf_ids, pt, pt64, ctx.mask, r, self.referee)
            )
            results.append(judged(comparisons, verdicts))
        if self.head is None:
            return results
        # Top-1 of the same (TF) head applied to each side's last hidden state.
        agree, tokens = top1_counts(self.head, ctx.tf_ids, pt, ctx.mask)
        return [
            replace(res, top1_agree=int(agree[i]), top1_tokens=int(tokens[i]))
            for i, res in enumerate(results)
        ]

    def _positions(self, ctx: BatchContext) -> list[RowResult]:
        from ..adapters.embedding_parts import default_position_ids, position_facts

        facts = position_facts(self.tf_model)
        if not facts.takes_position_ids or facts.kind != "absolute" or facts.causal:
            note = (
                f"positions: equivariance does not apply ({facts.kind} positions"
                f"{', causal' if facts.causal else ''}"
                f"{'' if facts.takes_position_ids else ', no position_ids argument'})"
            )
            return [RowResult(None, 0.0, None, note=note) for _ in ctx.rows]
        batch = ctx.padded.batch
        base = replace(batch, position_ids=default_position_ids(self.tf_model, batch.input_ids))
        s1 = self.runner_model.run(base)
        perms = self._permutations(ctx)
        s4 = self.runner_model.run(_permute(base, perms))
        inverse = np.argsort(perms, axis=1)
        s4_back = Trace({"s4_vs_s1:last_hidden_state": _take(s4["last_hidden_state"], inverse)})
        s1_named = Trace({"s4_vs_s1:last_hidden_state": s1["last_hidden_state"]})
        results = []
        for r in ctx.rows:
            explicit = row_comparisons(s1, ctx.tf_ids, ctx.mask, r)
            for c in explicit:
                c.name = f"explicit_position_ids:{c.name}"
            equi = row_comparisons(s4_back, s1_named, ctx.mask, r, tolerance=EQUIVARIANCE_TOLERANCE)
            results.append(judged(explicit + equi))
        return results

    def _permutations(self, ctx: BatchContext) -> np.ndarray:
        rows, length = ctx.padded.batch.input_ids.shape
        perms = np.tile(np.arange(length), (rows, 1))
        for r, item in enumerate(ctx.padded.items):
            perms[r] = np.random.default_rng([self.seed, item.index]).permutation(length)
        return perms


def _shared(pt: Trace, ctx: BatchContext) -> list[str]:
    return [n for n in pt if n in ctx.tf_ids]


def _take(x: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``x[r, index[r]]`` for every row (along the sequence axis)."""
    shaped = index.reshape(index.shape + (1,) * (x.ndim - 2))
    return np.take_along_axis(x, shaped, axis=1)


def _permute(batch, perms: np.ndarray):
    tt, pos = batch.token_type_ids, batch.position_ids
    return replace(
        batch,
        input_ids=_take(batch.input_ids, perms),
        attention_mask=_take(batch.attention_mask, perms),
        token_type_ids=None if tt is None else _take(tt, perms),
        position_ids=None if pos is None else _take(pos, perms),
    )
