"""The distribution metrics of a head's logits, TF against the reference, for a
cross-check's report (docs/quantised.md): over the vocabulary per token for an LM head,
over the labels per sequence (or per token) for a classifier.

They describe; they do not decide a float model's verdict (the float64 referee does).
A ``--kl-budget`` decides through :mod:`tfparity.compare.bootstrap`, over the batches'
sequences as items. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

from ...architectures.heads import (
    CLASS_HEADS,
    DISTRIBUTION_HEADS,
    NEXT_TOKEN_HEADS,
    SAME_TOKEN_HEADS,
    Head,
)
from ...compare.bootstrap import BootstrapVerdict, Limit, bootstrap_verdict
from ...compare.distribution import PositionMetrics, concatenate, position_metrics, summarise
from ...compare.record import Comparison
from ...errors import TfparityError
from ...inputs import Batch
from ...trace import Trace

LOGITS = "logits"


def next_token_targets(batch: Batch) -> np.ndarray:
    """Each position's next token, -1 where it or its successor is padding (left or
    right padding alike) and at the last position."""
    ids, mask = np.asarray(batch.input_ids), np.asarray(batch.attention_mask, bool)
    targets = np.full(ids.shape, -1, np.int64)
    follows = mask[:, :-1] & mask[:, 1:]
    targets[:, :-1] = np.where(follows, ids[:, 1:], -1)
    return targets


def own_token_targets(batch: Batch) -> np.ndarray:
    """A teacher-forced seq2seq decoder's targets: the decoder is fed each row's start
    token and its ids but the last, at the real positions, so position t chose the
    batch's own id at t; -1 at padding."""
    ids, mask = np.asarray(batch.input_ids), np.asarray(batch.attention_mask, bool)
    return np.where(mask, ids, -1).astype(np.int64)


def _targets(batch: Batch, head: Head | None) -> np.ndarray | None:
    """The token each position is scored at (Δp, NLL), or None (Δp at the reference's
    top token, no NLL: a masked LM, a token classifier)."""
    if head in NEXT_TOKEN_HEADS:
        return next_token_targets(batch)
    if head in SAME_TOKEN_HEADS:
        return own_token_targets(batch)
    return None


def lm_distribution(
    tf: Sequence[Trace], pt: Sequence[Trace], batches: Sequence[Batch], head: Head | None
) -> PositionMetrics | None:
    """Per-position metrics of every batch's ``logits`` (PyTorch the reference), each
    sequence one item: per token for an LM head (a seq2seq LM's: the teacher-forced
    decoder's, under the decoder's mask, which is the batch's) or a token classifier, one
    position per sequence for a sequence classifier. None for a head without such logits, or where
    either side lacks them or they differ in shape (a failed comparison already)."""
    if head not in DISTRIBUTION_HEADS | CLASS_HEADS or not tf or not pt:
        return None
    parts, offset = [], 0
    for actual, expected, batch in zip(tf, pt, batches, strict=True):
        a, e = actual.get(LOGITS), expected.get(LOGITS)
        if a is None or e is None or np.shape(a) != np.shape(e) or np.ndim(a) not in (2, 3):
            return None
        if np.ndim(a) == 2:  # one label per sequence: no mask to apply
            parts.append(position_metrics(e, a, None, None, offset))
            offset += np.shape(a)[0]
            continue
        targets = _targets(batch, head)
        parts.append(position_metrics(e, a, batch.attention_mask, targets, offset))
        offset += np.shape(a)[0]
    metrics = concatenate(parts)
    return metrics if metrics.kl.size else None


def details(
    metrics: PositionMetrics | None,
    verdict: BootstrapVerdict | None,
    head: Head | None = None,
    *,
    items: str = "sequences",
    positions: str = "positions",
) -> dict:
    """The report's ``details["distribution"]`` (empty where there are none); ``over``
    says what the softmax runs over (a classifier's labels, else the vocabulary);
    ``items_are`` and ``positions_are`` what the bootstrap resamples and what each
    scored row is (``generate``: prompts, teacher-forced steps)."""
    if metrics is None:
        return {}
    found: dict[str, Any] = {"distribution": asdict(summarise(metrics))}
    found["distribution"] |= {
        "over": "labels" if head in CLASS_HEADS else "vocabulary",
        "items_are": items,
        "positions_are": positions,
    }
    if verdict is not None:
        found["distribution"]["budget"] = verdict.details()
    return found


def lacking_reference(tf: Sequence[Trace], pt: Sequence[Trace], reference: str) -> str:
    """Why a ``--kl-budget`` cannot be judged where the TF side has logits and the
    reference has none (a golden file saved from a model without this head): what is
    missing, in words; empty otherwise (the general refusal of :func:`judged` stands)."""
    if not tf or LOGITS not in tf[0] or (pt and LOGITS in pt[0]):
        return ""
    return (
        f"--kl-budget judges the logits against the reference's, and {reference} holds "
        "none (stored outputs saved from a model without this head?): save them again "
        "with --save-outputs from the model with its head, or drop --kl-budget."
    )


def judged(
    metrics: PositionMetrics | None, limits: Sequence[Limit] | None, missing: str = ""
) -> BootstrapVerdict | None:
    """The bootstrap verdict where a budget was set; exit 2 where it was set on a run
    with no logits to judge (``missing``: why, in words)."""
    if not limits:
        return None
    if metrics is None:
        raise TfparityError(
            missing
            or "--kl-budget judges an LM head's logits per token (masked-lm, causal-lm or "
            "seq2seq-lm), "
            "and this run compared none; drop it, or load the model with its LM head."
        )
    return bootstrap_verdict(metrics, limits)


def failures(verdict: BootstrapVerdict | None, items: str = "sequences") -> list[Comparison]:
    """The verdict's failing rows (:meth:`BootstrapVerdict.failures`), named for the
    logits they judge: ``distribution kl_mean (logits)``; none without a budget."""
    return (
        []
        if verdict is None
        else verdict.failures(f"distribution {{metric}} ({LOGITS})", items=items)
    )
