"""The checks a sweep runs on each bucketed batch, one RowResult per real row.

Each check reuses the TF ``input_ids`` run (computed once per batch) and adds what it
needs: the embeds check the ``inputs_embeds`` run; the cross-check PyTorch fp32 and the
float64 referee; the positions check explicit position ids and one seeded permutation
per item (seeded by the item's index, so it does not depend on the batch). The generate
check (:mod:`.generate`) runs each item's prompt alone, unpadded, and needs none of it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..adapters.interfaces.sides import TFSide
from ..architectures.heads import NEXT_TOKEN_HEADS, Head
from ..checks.crosscheck.distribution import next_token_targets
from ..checks.positions import EQUIVARIANCE_TOLERANCE, Answer
from ..compare import Referee, Tolerance, row_counts, row_rms
from ..compare.distribution import position_metrics
from ..errors import TfparityError
from ..trace import Trace
from .bucketing import PaddedBatch
from .calibrated_referee import CalibratedReferee
from .distribution import item_values
from .generate import GenerateCheck
from .itemcheck import (
    RowResult,
    compared_rows,
    judged,
    leaf_rows,
    referee_verdicts,
    top1_counts,
)

CHECKS = ("embeds", "crosscheck", "positions")


@dataclass
class BatchContext:
    """What the checks share for one batch: the padded batch and the TF ids run."""

    padded: PaddedBatch
    tf_ids: Trace | None  # None: only the generate check runs, which does not use it

    @property
    def mask(self) -> np.ndarray:
        return self.padded.batch.attention_mask

    @property
    def rows(self) -> range:
        return range(self.padded.real_rows)


@dataclass
class SweepChecks:
    """The runners (TF, PyTorch) and settings behind the per-row checks."""

    runner_model: TFSide  # the TF side under its execution
    tf_model: Any
    pt_model: Any = None
    # A run's logits (an LM head on its last hidden state, or a head model's own
    # ``logits``) for top-1 agreement; None: not measured (the setup's note says why).
    head: Callable[[Trace], np.ndarray] | None = None
    # Which head gives those logits: next-token targets (NLL, Δp at the target) for a
    # causal LM's, none for a masked LM's or a classifier's.
    logits_head: Head | None = None
    tolerance: Tolerance | None = None
    referee: Referee = Referee()
    seed: int = 0
    # "calibrated": float64 only for the rows whose verdict calibrated margins cannot
    # settle (CalibratedReferee); "full": a float64 pass for every row.
    referee_mode: str = "calibrated"
    calibrated_referee: CalibratedReferee | None = None
    # The generate check (``--generate N``), which runs each item's prompt alone.
    generate: GenerateCheck | None = None

    def __post_init__(self) -> None:
        if self.calibrated_referee is None:
            self.calibrated_referee = CalibratedReferee(referee=self.referee)

    def referee_stats(self) -> dict | None:
        """How many items the float64 pass ran for (None: judged by a tolerance)."""
        if self.tolerance is not None or self.pt_model is None:
            return None
        if self.referee_mode == "full":
            return {"referee": "full", "items": self._full_items, "items_fp64": self._full_items}
        return self.calibrated_referee.stats()

    _full_items: int = 0

    def run(self, name: str, ctx: BatchContext) -> list[RowResult]:
        return getattr(self, f"_{name}")(ctx)

    def _with_top1(self, results: list[RowResult], actual: Trace, ctx: BatchContext):
        if self.head is None:
            return results
        agree, tokens = top1_counts(self.head, actual, ctx.tf_ids, ctx.mask)
        return [
            replace(r, top1_agree=int(agree[i]), top1_tokens=int(tokens[i]))
            for i, r in enumerate(results)
        ]

    def _embeds(self, ctx: BatchContext) -> list[RowResult]:
        batch = ctx.padded.batch
        actual = self.runner_model.run_gathered(replace(batch, position_ids=None))
        leaves = compared_rows(actual, ctx.tf_ids, ctx.mask, tolerance=self.tolerance)
        results = [judged(leaves, r) for r in ctx.rows]
        return self._with_top1(results, actual, ctx)

    def _crosscheck(self, ctx: BatchContext) -> list[RowResult]:
        real = list(ctx.rows)
        batch = _rows(ctx.padded.batch, real)  # PyTorch runs any shape: no dummy rows
        tf = _trace_rows(ctx.tf_ids, real)
        mask = batch.attention_mask
        pt = self.pt_model.run(batch)
        names = [n for n in pt if n in tf]
        verdicts: list[dict[str, bool] | None] = [None] * len(real)
        fp64_rows: list[int] = []
        if self.tolerance is None and self.referee_mode == "full":
            pt64 = self.pt_model.run(batch, float64=True)
            verdicts = referee_verdicts(tf, pt, pt64, mask, self.referee)
            fp64_rows = real
            self._full_items += len(real)
        elif self.tolerance is None:
            verdicts, fp64_rows = self._calibrated_verdicts(batch, tf, pt, names)
        leaves = compared_rows(tf, pt, mask, tolerance=self.tolerance, names=names)
        results = []
        for r in real:
            result = judged(leaves, r, verdicts[r])
            if self.tolerance is None:
                result = replace(result, fp64=r in fp64_rows)
            results.append(result)
        if self.head is None:
            return results
        # Top-1 of each side's logits (the same TF LM head on each last hidden state).
        agree, tokens = top1_counts(self.head, tf, pt, mask)
        spread = self._distribution(tf, pt, batch)
        return [
            replace(
                res,
                top1_agree=int(agree[i]),
                top1_tokens=int(tokens[i]),
                distribution=spread[i] or None,
            )
            for i, res in enumerate(results)
        ]

    def _distribution(self, tf: Trace, pt: Trace, batch: Any) -> list[dict]:
        """Per row, the KL statistics' sums of the logits (PyTorch's the reference),
        over real tokens, scored at the next token for a causal LM."""
        rows = batch.input_ids.shape[0]
        expected, actual = self.head(pt), self.head(tf)
        if np.shape(expected) != np.shape(actual) or np.ndim(actual) not in (2, 3):
            return [{} for _ in range(rows)]
        mask = batch.attention_mask if np.ndim(actual) == 3 else None
        causal = self.logits_head in NEXT_TOKEN_HEADS and np.ndim(actual) == 3
        targets = next_token_targets(batch) if causal else None
        return item_values(position_metrics(expected, actual, mask, targets), rows)

    def _calibrated_verdicts(
        self, batch: Any, tf: Trace, pt: Trace, names: list[str]
    ) -> tuple[list[dict[str, bool] | None], list[int]]:
        """Per row: the referee's verdicts per leaf, from float32 where the margin decides
        (see :class:`tfparity.sweep.calibrated_referee.CalibratedReferee`), else from a
        float64 pass over just the undecided rows (plus the calibration batch and one
        sentinel row)."""
        calib, mask = self.calibrated_referee, batch.attention_mask
        rows = range(batch.input_ids.shape[0])
        decided: list[dict[str, bool]] = [{} for _ in rows]
        undecided: set[int] = set()
        room = [1.0 for _ in rows]
        s_r = {n: row_rms(pt[n], mask, n) for n in names}
        for n in names:
            d = row_rms(tf[n].astype(np.float64) - pt[n], mask, n)
            a_ok = np.isfinite(row_rms(tf[n], mask, n))
            values = row_counts(pt[n].shape, mask, n)
            for r in rows:
                row = (float(d[r]), float(s_r[n][r]), bool(a_ok[r]), int(values[r]))
                verdict, margin = calib.decide(n, *row)
                if verdict is None:
                    undecided.add(r)
                else:
                    decided[r][n] = verdict
                    if verdict:
                        room[r] = min(room[r], margin)
        calibrating = not calib.calibrated
        need = set(rows) if calibrating else set(undecided)
        sure_passes = [r for r in rows if r not in undecided and all(decided[r].values())]
        sentinel = min(sure_passes, key=lambda r: room[r]) if sure_passes else None
        if sentinel is not None and not calibrating:
            need.add(sentinel)
        need_rows = sorted(need)
        verdicts: list[dict[str, bool] | None] = list(decided)
        if need_rows:
            sub = _rows(batch, need_rows)
            pt64 = self.pt_model.run(sub, float64=True)
            tf_s, pt_s = _trace_rows(tf, need_rows), _trace_rows(pt, need_rows)
            fulls = referee_verdicts(tf_s, pt_s, pt64, sub.attention_mask, self.referee)
            errors = {n: _row_errors(n, tf_s[n], pt_s[n], pt64[n], sub) for n in names if n in pt64}
            for j, r in enumerate(need_rows):
                full = fulls[j]
                held = True
                for n, (e_r, d, e_a) in errors.items():
                    row = (float(e_r[j]), float(s_r[n][r]), float(d[j]), float(e_a[j]))
                    held = calib.learn(n, *row) and held
                if r == sentinel and not calibrating:
                    calib.violations += not held
                    calib.disagreements += any(full.get(n) != v for n, v in decided[r].items())
                verdicts[r] = full
        calib.items += len(rows)
        calib.items_fp64 += len(need_rows)
        return verdicts, need_rows

    def _generate(self, ctx: BatchContext) -> list[RowResult]:
        return self.generate.run(ctx.padded)

    def _positions(self, ctx: BatchContext) -> list[RowResult]:
        try:
            facts = self.tf_model.position_facts()
        except TfparityError as refused:  # a side that does not expose them (keras-hub)
            # one item's note, not the sweep's end: the other checks still judge it
            note = f"positions: not checked: {refused}"
            return [RowResult(None, 0.0, None, note=note) for _ in ctx.rows]
        if not facts.takes_position_ids or facts.kind != "absolute" or facts.causal:
            note = (
                f"positions: equivariance does not apply ({facts.kind} positions"
                f"{', causal' if facts.causal else ''}"
                f"{'' if facts.takes_position_ids else ', no position_ids argument'})"
            )
            return [RowResult(None, 0.0, None, note=note) for _ in ctx.rows]
        batch = ctx.padded.batch
        answer = Answer.of(self.tf_model.head)  # what the model answers with: compared
        base = replace(batch, position_ids=self.tf_model.default_position_ids(batch.input_ids))
        s1 = self.runner_model.run(base)
        perms = self._permutations(ctx, answer)
        s4 = self.runner_model.run(_permute(base, perms))
        inverse = np.argsort(perms, axis=1)
        mask = answer.mask(ctx.mask)
        explicit = [
            replace(leaf, name=f"explicit_position_ids:{leaf.name}")
            for leaf in compared_rows(s1, ctx.tf_ids, ctx.mask)
        ]
        equi = [
            leaf_rows(
                _take(s4[name], inverse) if answer.per_token else s4[name],
                s1[name],
                mask,
                f"s4_vs_s1:{name}",
                EQUIVARIANCE_TOLERANCE,
            )
            for name in answer.names
        ]
        return [judged(explicit + equi, r) for r in ctx.rows]

    def _permutations(self, ctx: BatchContext, answer: Answer) -> np.ndarray:
        rows, length = ctx.padded.batch.input_ids.shape
        perms = np.tile(np.arange(length), (rows, 1))
        for r, item in enumerate(ctx.padded.items):
            perms[r] = answer.permutation(np.random.default_rng([self.seed, item.index]), length)
        return perms


def _rows(batch: Any, rows: list[int]) -> Any:
    """The batch's rows ``rows`` (all of them: the batch itself)."""
    if rows == list(range(batch.input_ids.shape[0])):
        return batch

    def take(x):
        return None if x is None else x[rows]

    return replace(
        batch,
        input_ids=batch.input_ids[rows],
        attention_mask=batch.attention_mask[rows],
        token_type_ids=take(batch.token_type_ids),
        position_ids=take(batch.position_ids),
        texts=None,
    )


def _row_errors(name: str, tf: np.ndarray, pt: np.ndarray, pt64: np.ndarray, batch: Any) -> tuple:
    """Per row of the leaf ``name``: PyTorch's RMSE to float64, TF's to PyTorch and
    TF's to float64."""
    mask = batch.attention_mask
    tf64, pt32 = tf.astype(np.float64), pt.astype(np.float64)
    errors = (pt32 - pt64, tf64 - pt32, tf64 - pt64)
    return tuple(row_rms(e, mask, name) for e in errors)


def _trace_rows(trace: Trace, rows: list[int]) -> Trace:
    """Every leaf's rows ``rows`` (leaves are [batch, ...])."""
    return Trace({name: trace[name][rows] for name in trace})


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
