"""The embeddings check: tying of input/output embeddings, round trips, inversion risk.

Three questions people ask of an embedding matrix: is the LM head's output matrix the
input matrix itself (one variable, so training one trains the other), can tokens be
read back from their embeddings (and by which method; the LM head's transform is why
``output_embeddings(input_embeddings(ids))`` is not the identity), and how much noise
it takes before they cannot (embeddings are as sensitive as the text they encode).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import validation
from ..adapters.interfaces.embeddings import LMHead
from ..adapters.interfaces.sides import TFSide
from ..inputs import Batch, note_inputs
from ..results import Report
from ..validation import nonfinite_weights

NOISE_SCALES = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
AXIS_NOTE = (
    "Logits are [batch, seq, vocab]: softmax and argmax run over the last axis "
    "(axis=-1, the vocabulary) to pick a token per position; over axis=1 they would "
    "pick a position, not a token."
)
_CHUNK = 1024


@dataclass(frozen=True)
class TyingOptions:
    """``noise_scales``: noise norm relative to each embedding's norm; ``seed`` fixes it."""

    noise_scales: tuple[float, ...] = NOISE_SCALES
    seed: int = 0

    @classmethod
    def from_arguments(
        cls, *, noise_scales: str | Sequence[float] | None = None, seed: int = 0
    ) -> TyingOptions:
        """The options :func:`tfparity.check_tying` and ``tfparity embeddings`` were
        given, checked once for both before any model loads (exit 2 for a bad one).
        ``noise_scales``: numbers, or ``--noise-scales``'s comma-separated text; None:
        :data:`NOISE_SCALES`."""
        validation.seed(seed)
        if noise_scales is None:
            return cls(seed=seed)
        text = noise_scales if isinstance(noise_scales, str) else None
        try:
            parts = text.split(",") if text is not None else list(noise_scales)
            scales = tuple(float(s) for s in parts if not isinstance(s, str) or s.strip())
        except (TypeError, ValueError) as exc:
            raise validation.ArgumentError(
                f"--noise-scales (noise_scales=) must be numbers separated by commas: {exc}"
            ) from exc
        if not scales or any(not math.isfinite(s) or s < 0 for s in scales):
            shown = text if text is not None else ",".join(map(str, scales))
            raise validation.ArgumentError(
                f"--noise-scales '{shown}' (noise_scales=): give at least one scale, each a "
                "finite number >= 0 (NaN noise makes every round trip fail, Inf is no scale)."
            )
        return cls(noise_scales=scales, seed=seed)


def check_tying(
    model: TFSide, batches: Sequence[Batch], options: TyingOptions = TyingOptions()
) -> Report:
    head = model.lm_head()  # exit 2 on a side that does not expose it
    word = model.word_matrix().astype(np.float64)
    ids = np.concatenate([b.input_ids[b.attention_mask.astype(bool)] for b in batches])
    embeds = word[ids]
    output = word if head is None else head.output_matrix.astype(np.float64)
    roundtrip = {
        "dot": _rate(np.argmax(_scores(embeds, output), axis=-1), ids),
        "cosine": _rate(nearest_cosine(embeds, word), ids),
        "lm_head": _lm_head_rate(head, embeds, ids),
    }
    noise = [
        {"scale": s, "recovered": _rate(nearest_cosine(_noisy(embeds, s, options.seed), word), ids)}
        for s in options.noise_scales
    ]
    config_tie = getattr(model.config, "tie_word_embeddings", None)
    tied = None if head is None else head.tied
    consistent = tied is None or config_tie is None or tied == bool(config_tie)
    details: dict[str, Any] = {
        "tokens": int(len(ids)),
        "vocab_size": int(word.shape[0]),
        "tied": tied,
        "config_tie_word_embeddings": config_tie,
        "head_transform": _transform_text(head),
        "roundtrip": roundtrip,
        "argmax_axis": AXIS_NOTE,
        "noise": noise,
    }
    broken = nonfinite_weights(
        model.named_weights()
    )  # a NaN row is broken even if no input reaches it
    report = Report(
        check="embeddings",
        model=model.name,
        passed=roundtrip["cosine"] == 1.0 and consistent and not broken,
        comparisons=broken,
        details=details,
        notes=list(model.notes)
        + [c.problem for c in broken if c.problem]
        + _notes(head, tied, config_tie, roundtrip),
    )
    return note_inputs(report, batches)


def nearest_cosine(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each vector in ``x``, the index of the row of ``rows`` with the highest cosine."""
    unit = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return np.concatenate(
        [np.argmax(x[i : i + _CHUNK] @ unit.T, axis=-1) for i in range(0, len(x), _CHUNK)]
    )


def _scores(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Raw logits ``x @ rows.T``: [tokens, vocab]; the argmax runs over the vocab axis."""
    return x @ rows.T


def _rate(predicted: np.ndarray, ids: np.ndarray) -> float:
    return float(np.mean(predicted == ids)) if len(ids) else 1.0


def _lm_head_rate(head: LMHead | None, embeds: np.ndarray, ids: np.ndarray) -> float | None:
    if head is None or head.logits is None:
        return None
    logits = head.logits(embeds[None].astype(np.float32))  # [1, tokens, vocab]
    return _rate(np.argmax(logits[0], axis=-1), ids)


def _noisy(embeds: np.ndarray, scale: float, seed: int) -> np.ndarray:
    """Gaussian noise whose norm is ``scale`` times each embedding's norm (on average)."""
    rng = np.random.default_rng(seed)
    norms = np.linalg.norm(embeds, axis=1, keepdims=True) / np.sqrt(embeds.shape[1])
    return embeds + scale * norms * rng.standard_normal(embeds.shape)


def _transform_text(head: LMHead | None) -> str | None:
    return None if head is None else head.transform


def _notes(head: LMHead | None, tied, config_tie, roundtrip: dict) -> list[str]:
    notes = []
    if head is None:
        notes.append(
            "No LM head in this checkpoint (a base model): tied and the lm_head round "
            "trip do not apply; the dot round trip uses the input matrix, as a tied head would."
        )
    elif tied is not None and config_tie is not None and tied != bool(config_tie):
        notes.append(
            f"config.tie_word_embeddings is {config_tie}, but the TF model's output matrix "
            f"{'is' if tied else 'is not'} the input matrix: the TF class "
            f"{'ties regardless of the config' if tied else 'did not tie as configured'}, "
            "so it cannot match a reference that follows the config."
        )
    if roundtrip["lm_head"] is not None and roundtrip["lm_head"] < 1.0 and head.transform:
        notes.append(
            "The LM head does not give the ids back from their own embeddings because of "
            f"what sits before the output matrix: {head.transform}."
        )
    return notes
