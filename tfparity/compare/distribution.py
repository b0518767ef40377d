"""Distribution metrics over a vocabulary, as the quantisation field reports them.

A quantised (or otherwise approximate) language model is judged everywhere by the
statistics llama.cpp's ``perplexity --kl-divergence`` prints (ggml-org/llama.cpp
PR#5076 and PR#5081): per scored position the KL divergence KL(P_ref || P_actual) of
the two softmaxed logit rows, its mean, median, 99th percentile and maximum; the share
of positions where both sides' top token is the same ("same top p"); the RMS of Δp,
the change in probability of one token; and ln(PPL(Q)/PPL(base)) from the mean
next-token NLL. Using their definitions lets a figure here sit beside theirs.

Two deliberate differences, both documented in docs/quantised.md: the reference's
log-probabilities are exact float64 (llama.cpp stores them in 16 bits and drops
tokens below log p = -16), and where no next-token target is known (a masked LM) Δp
is taken at the reference's top token instead of the target.

Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DP_AT_TARGET = "target"  # llama.cpp's: the next token of the text
DP_AT_TOP = "reference top-1"  # where no target is known


@dataclass(frozen=True)
class PositionMetrics:
    """Per scored position: ``kl``, ``same_top`` (argmax agreement), ``dp`` (Δp) and,
    with targets, both sides' NLL of the target; ``item`` says which item (sentence or
    prompt) each position belongs to, for the bootstrap over items."""

    kl: np.ndarray
    same_top: np.ndarray
    dp: np.ndarray
    item: np.ndarray
    dp_at: str
    nll_ref: np.ndarray | None = None
    nll_actual: np.ndarray | None = None

    @property
    def items(self) -> int:
        return int(np.unique(self.item).size)


@dataclass(frozen=True)
class DistributionStats:
    """The summary llama.cpp prints, over every scored position."""

    positions: int
    items: int
    kl_mean: float
    kl_median: float
    kl_p99: float
    kl_max: float
    same_top1: float
    rms_dp: float
    dp_at: str
    ln_ppl_ratio: float | None = None


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """float64 log-softmax over the last axis, shifted by the row maximum so no exp
    overflows (llama.cpp shifts the same way)."""
    x = np.asarray(logits, np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def position_metrics(
    reference: np.ndarray,
    actual: np.ndarray,
    mask: np.ndarray | None = None,
    targets: np.ndarray | None = None,
    item_offset: int = 0,
) -> PositionMetrics:
    """Metrics of each scored position of logits ``[items, seq, vocab]`` (or
    ``[items, vocab]``: one position per item). ``mask`` (``[items, seq]``) marks real
    tokens; ``targets`` the next token at each position, negative where there is none:
    then only positions with a target are scored, as llama.cpp scores them."""
    ref, act = np.asarray(reference), np.asarray(actual)
    if ref.shape != act.shape:
        raise ValueError(f"logits differ in shape: {ref.shape} vs {act.shape}")
    if ref.ndim == 2:
        ref, act = ref[:, None, :], act[:, None, :]
    keep = np.ones(ref.shape[:2], bool) if mask is None else np.asarray(mask, bool)
    keep = keep.reshape(ref.shape[:2])
    if targets is not None:
        keep = keep & (np.asarray(targets).reshape(ref.shape[:2]) >= 0)
    rows, cols = np.nonzero(keep)
    lp_ref, lp_act = log_softmax(ref[rows, cols]), log_softmax(act[rows, cols])
    kl = (np.exp(lp_ref) * (lp_ref - lp_act)).sum(axis=1)
    top_ref = lp_ref.argmax(axis=1)
    same = top_ref == lp_act.argmax(axis=1)
    nll_ref = nll_act = None
    if targets is not None:
        at = np.asarray(targets).reshape(ref.shape[:2])[rows, cols].astype(np.int64)
        nll_ref, nll_act = -_pick(lp_ref, at), -_pick(lp_act, at)
        dp_at = DP_AT_TARGET
    else:
        at, dp_at = top_ref, DP_AT_TOP
    dp = np.exp(_pick(lp_act, at)) - np.exp(_pick(lp_ref, at))
    return PositionMetrics(kl, same, dp, rows + item_offset, dp_at, nll_ref, nll_act)


def _pick(log_probs: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.take_along_axis(log_probs, index[:, None], axis=1)[:, 0]


def concatenate(parts: Sequence[PositionMetrics]) -> PositionMetrics:
    """Batches' metrics as one run's (their items already numbered apart)."""
    if not parts:
        raise ValueError("no positions to concatenate")
    with_nll = all(p.nll_ref is not None for p in parts)
    joined = {
        name: np.concatenate([getattr(p, name) for p in parts])
        for name in ("kl", "same_top", "dp", "item")
    }
    nll = (
        {n: np.concatenate([getattr(p, n) for p in parts]) for n in ("nll_ref", "nll_actual")}
        if with_nll
        else {}
    )
    dp_at = parts[0].dp_at if len({p.dp_at for p in parts}) == 1 else "mixed"
    return PositionMetrics(**joined, dp_at=dp_at, **nll)


def percentile(values: np.ndarray, fraction: float) -> float:
    """llama.cpp's percentile: sorted values, linear interpolation at
    ``fraction * (n - 1)`` (numpy's default "linear" method)."""
    v = np.sort(np.asarray(values, np.float64))
    if fraction <= 0:
        return float(v[0])
    if fraction >= 1:
        return float(v[-1])
    p = fraction * (v.size - 1)
    i = int(p)
    return float((1 - (p - i)) * v[i] + (p - i) * v[min(i + 1, v.size - 1)])


def summarise(m: PositionMetrics) -> DistributionStats:
    """The llama.cpp summary of ``m`` (the median is the middle value, or the mean of
    the middle two, as theirs)."""
    if m.kl.size == 0:
        raise ValueError("no scored positions")
    ratio = None
    if m.nll_ref is not None and m.nll_actual is not None:
        ratio = float(m.nll_actual.mean() - m.nll_ref.mean())
    return DistributionStats(
        positions=int(m.kl.size),
        items=m.items,
        kl_mean=float(m.kl.mean()),
        kl_median=float(np.median(m.kl)),
        kl_p99=percentile(m.kl, 0.99),
        kl_max=float(m.kl.max()),
        same_top1=float(m.same_top.mean()),
        rms_dp=float(np.sqrt(np.mean(m.dp**2))),
        dp_at=m.dp_at,
        ln_ppl_ratio=ratio,
    )


def metric_value(m: PositionMetrics, metric: str) -> float | None:
    """One named statistic of ``m`` (a :class:`DistributionStats` field)."""
    return getattr(summarise(m), metric)


def select(m: PositionMetrics, positions: np.ndarray) -> PositionMetrics:
    """The positions ``positions`` of ``m`` (a bootstrap resample)."""
    nll = {}
    if m.nll_ref is not None and m.nll_actual is not None:
        nll = {"nll_ref": m.nll_ref[positions], "nll_actual": m.nll_actual[positions]}
    return PositionMetrics(
        m.kl[positions],
        m.same_top[positions],
        m.dp[positions],
        m.item[positions],
        m.dp_at,
        **nll,
    )
