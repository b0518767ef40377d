"""The positions check: are explicit position_ids honoured, and is the model
permutation-equivariant the way an absolute-position encoder must be?

For seeded permutations ``p`` of the sequence axis, four runs with explicit
position_ids: s1 baseline; s2 positions permuted; s3 tokens (and mask, type ids)
permuted; s4 both. Outputs of s3 and s4 are un-permuted so that every comparison
lines up token by token. A bidirectional encoder whose only notion of order is an
absolute position table gives s1 == s4 (each token keeps its position); s2 and s3
put tokens at other positions and differ, except for permutations that are their own
inverse. Decoders (causal mask) and relative-position models do not have the s1 == s4
property; for them the check reports what it measured and does not fail.

The check judges what the model answers with (:func:`~..architectures.heads.answer_outputs`):
a base model's ``last_hidden_state``, a head's ``logits`` (QA: the span logits). Per-token
answers are un-permuted token by token; a sequence classifier's logits have no token
axis, and every permutation keeps the token its head reads in place
(:data:`~..architectures.heads.POOLED_TOKEN`), so s4 still pools the same token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np

from .. import validation
from ..adapters.interfaces.sides import TFSide
from ..architectures.heads import PER_SEQUENCE_LABEL_HEADS, POOLED_TOKEN, Head, answer_outputs
from ..compare import Comparison, Tolerance, compare_batches, compare_output_batches
from ..inputs import Batch, note_inputs
from ..results import Report

SCENARIOS = ("s1", "s2", "s3", "s4")
# Reordering tokens reorders the attention sums, so s1 and s4 agree only up to float
# rounding, for which the exact-path default (1e-5/1.3e-6) is too tight.
EQUIVARIANCE_TOLERANCE = Tolerance(atol=1e-4, rtol=1e-4)


@dataclass(frozen=True)
class Answer:
    """The outputs the check compares, read off the model's head kind: their names,
    whether they lie on the token axis (``[batch, seq, ...]``), and the token a
    per-sequence head reads (None: none), which every permutation keeps in place."""

    names: tuple[str, ...]
    per_token: bool
    pooled: int | None

    @classmethod
    def of(cls, head: Head) -> Answer:
        return cls(
            answer_outputs(head), head not in PER_SEQUENCE_LABEL_HEADS, POOLED_TOKEN.get(head)
        )

    def permutation(self, rng: np.random.Generator, length: int) -> np.ndarray:
        """A seeded permutation of ``length`` positions, the pooled token left in place."""
        if self.pooled is None:
            return rng.permutation(length)
        rest = np.delete(np.arange(length), self.pooled)
        return np.insert(rng.permutation(rest), self.pooled, self.pooled)

    def aligned(self, trace: Any, inverse: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The answer's outputs, un-permuted by ``inverse`` along the token axis."""
        if inverse is None or not self.per_token:
            return {n: trace[n] for n in self.names}
        return {n: trace[n][:, inverse] for n in self.names}

    def mask(self, mask: np.ndarray) -> np.ndarray | None:
        """The attention mask where it applies (per-token outputs); None otherwise."""
        return mask if self.per_token else None

    @property
    def compared(self) -> str:
        return ", ".join(self.names)


@dataclass(frozen=True)
class PositionsOptions:
    permutations: int = 10
    seed: int = 0
    tolerance: Tolerance | None = None

    @classmethod
    def from_arguments(
        cls, *, permutations: int = 10, seed: int = 0, tolerance: Tolerance | None = None
    ) -> PositionsOptions:
        """The options :func:`tfparity.check_positions` and ``tfparity positions`` were
        given, checked once for both before any model loads (exit 2 for a bad one)."""
        if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
            raise validation.ArgumentError(
                f"permutations (--permutations) must be an int >= 1, not {permutations!r}."
            )
        validation.seed(seed)
        validation.tolerance(tolerance)
        return cls(permutations=permutations, seed=seed, tolerance=tolerance)


def check_positions(
    model: TFSide, batches: Sequence[Batch], options: PositionsOptions = PositionsOptions()
) -> Report:
    facts = model.position_facts()  # exit 2 on a side that does not expose them
    answer = Answer.of(model.head)
    rng = np.random.default_rng(options.seed)
    explicit = facts.takes_position_ids
    aligned: dict[str, list[dict[str, np.ndarray]]] = {s: [] for s in SCENARIOS}
    masks: list[np.ndarray | None] = []
    involutions = 0
    for batch in batches:
        positions = model.default_position_ids(batch.input_ids) if explicit else None
        base = replace(batch, position_ids=positions)
        s1 = answer.aligned(model.run(base))
        for _ in range(options.permutations):
            perm = answer.permutation(rng, batch.input_ids.shape[1])
            involutions += bool(np.array_equal(perm[perm], np.arange(len(perm))))
            runs = _scenario_runs(model, answer, base, perm, explicit)
            for name, out in {"s1": s1, **runs}.items():
                aligned[name].append(out)
            masks.append(answer.mask(batch.attention_mask))
    scenarios = _pairwise(aligned, masks)
    tolerance = options.tolerance or EQUIVARIANCE_TOLERANCE
    equivariance = _equivariance(aligned, masks, tolerance, facts, explicit)
    explicit_cmp = _explicit_vs_default(model, batches) if explicit else []
    explicit_match = all(c.passed for c in explicit_cmp) if explicit else None
    equivariant = None if equivariance is None else all(c.passed for c in equivariance)
    passed = equivariant is not False and explicit_match is not False
    details: dict[str, Any] = {
        "position_kind": facts.kind,
        "causal": facts.causal,
        "local_window": None
        if facts.window_kind is None
        else {"kind": facts.window_kind, "tokens": facts.window},
        "takes_position_ids": facts.takes_position_ids,
        "permutations": options.permutations,
        "self_inverse_permutations": involutions,
        "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
        "compared": answer.compared,
        "per_token": answer.per_token,
        "pooled_token": answer.pooled,
        "scenarios": scenarios,
        "equivariant": equivariant,
        "explicit_positions_match": explicit_match,
        "tolerance": {"atol": tolerance.atol, "rtol": tolerance.rtol},
    }
    comparisons = (equivariance or []) + explicit_cmp
    report = Report(
        check="positions",
        model=model.name,
        passed=passed,
        comparisons=comparisons,
        details=details,
        notes=list(model.notes) + _notes(facts, explicit, scenarios),
    )
    return note_inputs(report, batches)


def _scenario_runs(
    model: TFSide, answer: Answer, base: Batch, perm: np.ndarray, explicit: bool
) -> dict[str, dict[str, np.ndarray]]:
    """s2..s4 for one permutation, each aligned back to token order."""
    inverse = np.argsort(perm)
    tokens = _permute_tokens(base, perm)
    runs = {"s3": answer.aligned(model.run(tokens), inverse)}
    if explicit:
        moved = base.position_ids[:, perm]
        runs["s2"] = answer.aligned(model.run(replace(base, position_ids=moved)))
        runs["s4"] = answer.aligned(model.run(replace(tokens, position_ids=moved)), inverse)
    return runs


def _permute_tokens(batch: Batch, perm: np.ndarray) -> Batch:
    """Tokens, mask and type ids reordered by ``perm``; position ids left as they are."""
    tt = batch.token_type_ids
    return replace(
        batch,
        input_ids=batch.input_ids[:, perm],
        attention_mask=batch.attention_mask[:, perm],
        token_type_ids=None if tt is None else tt[:, perm],
    )


def _pairwise(
    aligned: dict[str, list[dict[str, np.ndarray]]], masks: list[np.ndarray | None]
) -> dict[str, dict[str, float] | None]:
    """Mean and max abs diff per pair of scenarios, over every compared output at real
    tokens (a per-sequence output: every element) of all permutations."""
    out: dict[str, dict[str, float] | None] = {}
    for a, b in combinations(SCENARIOS, 2):
        if not aligned[a] or not aligned[b]:
            out[f"{a}_{b}"] = None
            continue
        diffs = [
            np.abs(x[n] - y[n]) if m is None else np.abs(x[n] - y[n])[m.astype(bool)]
            for x, y, m in zip(aligned[a], aligned[b], masks, strict=True)
            for n in x
        ]
        flat = np.concatenate([d.ravel() for d in diffs])
        out[f"{a}_{b}"] = {"mean_abs_diff": float(flat.mean()), "max_abs_diff": float(flat.max())}
    return out


def _equivariance(aligned, masks, tolerance, facts, explicit) -> list[Comparison] | None:
    """s4 (aligned) against s1, one comparison per compared output: the verdict, where
    the property applies."""
    if not explicit or facts.kind != "absolute" or facts.causal or facts.window_kind:
        return None
    return [
        compare_batches(
            [x[name] for x in aligned["s4"]],
            [x[name] for x in aligned["s1"]],
            name=f"s4_vs_s1:{name}",
            masks=masks,
            tolerance=tolerance,
        )
        for name in aligned["s1"][0]
    ]


def _explicit_vs_default(model: TFSide, batches: Sequence[Batch]) -> list[Comparison]:
    """``position_ids`` = the model's default positions, passed explicitly, vs omitted."""
    explicit = [
        model.run(replace(b, position_ids=model.default_position_ids(b.input_ids))) for b in batches
    ]
    default = [model.run(replace(b, position_ids=None)) for b in batches]
    results = compare_output_batches(explicit, default, masks=[b.attention_mask for b in batches])
    for c in results:
        c.name = f"explicit_position_ids:{c.name}"
    return results


def _notes(facts, explicit: bool, scenarios: dict) -> list[str]:
    if facts.kind in ("relative", "rotary"):
        return [
            f"Positions are {facts.kind} (inside attention), not a table added to the "
            "embeddings, "
            "so there are no position_ids to permute and the s1 == s4 property does not "
            "apply. Measured instead: s1 vs s3 (tokens permuted, outputs un-permuted), how "
            "much the output depends on token order."
        ]
    if not explicit:
        return [
            "This model's call takes no position_ids, so s2 and s4 cannot be built; "
            "measured: s1 vs s3 only. Equivariance does not apply."
        ]
    if facts.causal:
        return [
            "A decoder: the causal mask follows sequence order whatever the position_ids "
            "say, so s1 and s4 differ by design; equivariance does not apply."
        ]
    if facts.window_kind is not None:
        size = f" ({facts.window} tokens)" if facts.window is not None else ""
        return [
            f"{facts.window_kind.capitalize()}{size}: how it mixes tokens follows sequence "
            "order whatever the position_ids say, so s1 and s4 differ by design; "
            "equivariance does not apply."
        ]
    pair = scenarios.get("s2_s3")
    if pair is not None and pair["max_abs_diff"] == 0.0:
        return ["s2 and s3 are identical: every permutation drawn was its own inverse."]
    return []
