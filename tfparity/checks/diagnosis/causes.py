"""Why a tensor that comes from this model and these ids matches no stage as given:
its rows in another order, its tokens shifted by padding on the other side, a
sentence pair's token types left out, every value multiplied by one factor, or its
values rounded through a half-precision dtype. Each finder answers with the fact and
its size, or None.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...adapters.interfaces.embeddings import EmbeddingParts
from ...adapters.interfaces.sides import TFSide
from ...inputs import Batch
from .stages import EMBEDDING_STAGES, MATCH_DISTANCE, distance, layer_norm, positions_of

# Where a token's vector does not depend on its position, a shifted row still matches.
SHIFTABLE = ("word_embeddings", "scaled_word_embeddings")


@dataclass(frozen=True)
class RowLayout:
    """The tensor is ``stage`` with its rows reordered (``rows[b]``: the ids row that
    row b holds) or each row shifted along the sequence (``shifts[b]`` positions; +p:
    p positions later, as in a left-padded row)."""

    stage: str
    kind: str  # "permuted" | "shifted"
    rows: list[int] | None = None
    shifts: list[int] | None = None
    padding: list[int] | None = None  # each row's padding count in the ids


@dataclass(frozen=True)
class TokenTypes:
    """The token types that make the tensor match ``stage`` (padding: the given ones)."""

    stage: str
    types: np.ndarray
    distance: float


@dataclass(frozen=True)
class Scale:
    """The tensor is ``stage`` with every value multiplied by one ``factor`` (other than
    1), at relative ``distance`` once the factor is divided out."""

    stage: str
    factor: float
    distance: float


@dataclass(frozen=True)
class Rounding:
    """Values that are all exactly ``dtype`` numbers, near a stage that is not: the
    stage rounded through ``dtype`` (largest and relative L2 error)."""

    dtype: str
    max_abs: float
    relative: float


# ---------------------------------------------------------------------- row order


def row_layout(
    embeds: np.ndarray, tensors: dict[str, np.ndarray | None], valid: np.ndarray
) -> RowLayout | None:
    """The first stage whose rows, reordered or shifted, the tensor is."""
    for name, stage in tensors.items():
        if stage is not None and (rows := _permutation(embeds, stage, valid)) is not None:
            return RowLayout(name, "permuted", rows=rows)
    for name in SHIFTABLE:
        stage = tensors.get(name)
        if stage is not None and (shifts := _shifts(embeds, stage, valid)) is not None:
            padding = [int(n) for n in (~valid).sum(axis=1)]
            return RowLayout(name, "shifted", shifts=shifts, padding=padding)
    return None


def _permutation(embeds: np.ndarray, stage: np.ndarray, valid: np.ndarray) -> list[int] | None:
    """rows[b] = c where embeds row b is stage row c (over c's real tokens), if that is
    a permutation other than the identity."""
    n = len(embeds)
    rows = []
    for b in range(n):
        fits = [
            c
            for c in range(n)
            if valid[c].any() and _close(embeds[b][valid[c]], stage[c][valid[c]])
        ]
        if not fits:
            return None
        rows.append(b if b in fits else fits[0])
    if sorted(rows) != list(range(n)) or rows == list(range(n)):
        return None
    return rows


def _shifts(embeds: np.ndarray, stage: np.ndarray, valid: np.ndarray) -> list[int] | None:
    """shifts[b] = d where embeds[b, j + d] is stage[b, j] for every real token j."""
    seq = embeds.shape[1]
    shifts = []
    for b in range(len(embeds)):
        real = np.flatnonzero(valid[b])
        if real.size == 0:
            shifts.append(0)
            continue
        ds = sorted(range(-int(real.min()), seq - int(real.max())), key=abs)
        found = next((d for d in ds if _close(embeds[b][real + d], stage[b][real])), None)
        if found is None:
            return None
        shifts.append(found)
    return shifts if any(shifts) else None


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    scale = np.linalg.norm(b)
    return bool(np.linalg.norm(a - b) <= MATCH_DISTANCE * max(scale, 1e-12))


# ---------------------------------------------------------------------- one factor


def constant_scale(
    embeds: np.ndarray, tensors: dict[str, np.ndarray | None], valid: np.ndarray
) -> Scale | None:
    """The first rebuilt stage the tensor is up to one constant factor: the least-squares
    factor over the real tokens, a match once it is divided out (a factor near 1 is the
    stage itself, found before this is asked)."""
    for name in EMBEDDING_STAGES:
        stage = tensors.get(name)
        if stage is None:
            continue
        norm = float((stage[valid] ** 2).sum())
        if norm == 0.0:
            continue
        factor = float((embeds[valid] * stage[valid]).sum() / norm)
        d = distance(embeds, factor * stage, valid)
        if d is not None and d <= MATCH_DISTANCE and abs(factor - 1.0) > MATCH_DISTANCE:
            return Scale(name, factor, d)
    return None


# ---------------------------------------------------------------------- token types


def token_types(
    embeds: np.ndarray, model: TFSide, parts: EmbeddingParts, batch: Batch, valid: np.ndarray
) -> TokenTypes | None:
    """Per token, the type whose stage is nearest; a match only if the whole tensor
    then is that stage (``post_layernorm`` or ``word_plus_position_plus_type``)."""
    table = parts.token_type
    positions = positions_of(model, parts, batch)
    if table is None or len(table) < 2 or positions is None:
        return None
    base = parts.word.astype(np.float64)[batch.input_ids] + positions
    given = batch.token_type_ids
    stages = ["word_plus_position_plus_type"]
    if parts.layer_norm is not None:
        stages.insert(0, "post_layernorm")
    for stage in stages:
        options = [base + table[t].astype(np.float64) for t in range(len(table))]
        if stage == "post_layernorm":
            options = [layer_norm(o, parts) for o in options]
        per_token = np.stack(
            [np.linalg.norm(embeds - o, axis=-1) / np.linalg.norm(o, axis=-1) for o in options]
        )
        types = np.argmin(per_token, axis=0)
        types = np.where(valid, types, 0 if given is None else given)
        chosen = np.take_along_axis(np.stack(options), types[None, ..., None], axis=0)[0]
        d = distance(embeds, chosen, valid)
        used = np.zeros_like(types) if given is None else given
        if d is not None and d <= MATCH_DISTANCE and (types[valid] != used[valid]).any():
            return TokenTypes(stage, types.astype(np.int64), d)
    return None


def describe_types(types: np.ndarray, valid: np.ndarray) -> str:
    """``row 0: type 1 at positions 12-20; row 1: ...`` for the rows with a type other
    than 0 (at most four rows named)."""
    parts = []
    for b in range(len(types)):
        spans = _spans(np.flatnonzero((types[b] != 0) & valid[b]))
        if spans:
            where = ", ".join(f"{s}-{e}" if e > s else f"{s}" for s, e in spans)
            kinds = sorted({int(t) for t in types[b][(types[b] != 0) & valid[b]]})
            parts.append(f"row {b}: type {'/'.join(map(str, kinds))} at positions {where}")
    more = f"; and {len(parts) - 4} more rows" if len(parts) > 4 else ""
    return "; ".join(parts[:4]) + more


def _spans(positions: np.ndarray) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for p in positions.tolist():
        if spans and p == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], p)
        else:
            spans.append((p, p))
    return spans


# ---------------------------------------------------------------------- precision


def rounding(embeds: np.ndarray, stage: np.ndarray, valid: np.ndarray) -> Rounding | None:
    """Name a half-precision round trip: every real value is a bfloat16 (or float16)
    number while the stage's float32 values are not, and they lie within that
    dtype's rounding of each other."""
    e32 = np.asarray(embeds[valid], dtype=np.float32)
    s32 = np.asarray(stage[valid], dtype=np.float32)
    for name, representable, unit in (
        ("bfloat16", _is_bfloat16, 2.0**-8),
        ("float16", _is_float16, 2.0**-11),
    ):
        if representable(e32) and not representable(s32):
            err = np.abs(e32.astype(np.float64) - s32)
            # within half a unit in the last place, relative (or float16's subnormal step)
            if (err <= unit * np.abs(s32) + 2.0**-24).all():
                rel = float(np.linalg.norm(err) / max(np.linalg.norm(s32), 1e-30))
                return Rounding(name, float(err.max()), rel)
    return None


def _is_bfloat16(x: np.ndarray) -> bool:
    return bool((x.view(np.uint32) & 0xFFFF == 0).all())


def _is_float16(x: np.ndarray) -> bool:
    with np.errstate(over="ignore"):
        return bool((x.astype(np.float16).astype(np.float32) == x).all())
