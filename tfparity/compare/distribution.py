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
    at = None if targets is None else np.asarray(targets).reshape(ref.shape[:2])[rows, cols]
    step = max(1, CHUNK_ELEMENTS // max(ref.shape[-1], 1))
    scratch = np.empty((3, min(step, len(rows)), ref.shape[-1]))  # reused by every block
    parts = []
    for k in range(0, len(rows), step):
        block = (rows[k : k + step], cols[k : k + step])
        picked = None if at is None else at[k : k + step]
        parts.append(_scored(ref[block], act[block], picked, scratch))
    kl, same, dp, nll_ref, nll_act = (
        np.concatenate([p[i] for p in parts]) if parts else np.zeros(0) for i in range(5)
    )
    dp_at = DP_AT_TOP if targets is None else DP_AT_TARGET
    if targets is None:
        nll_ref = nll_act = None
    return PositionMetrics(kl, same.astype(bool), dp, rows + item_offset, dp_at, nll_ref, nll_act)


# Logits scored at once (positions x vocabulary: 2 MB of float64, which caches hold), in
# buffers allocated once per call: whole-batch temporaries (GBs at a 50k vocabulary)
# cost page faults several times the arithmetic (docs/benchmarks.md, (q)).
CHUNK_ELEMENTS = 1 << 18


def _scored(
    ref: np.ndarray, act: np.ndarray, at: np.ndarray | None, scratch: np.ndarray
) -> tuple[np.ndarray, ...]:
    """One block of positions: KL, same top-1, Δp and both NLLs (zeros without
    targets), in float64. KL(P||Q) = Σ p (x_p - x_q) - lse_p + lse_q, with x the logits
    shifted by their row maximum and lse the log-sum-exp of the shifted logits: two exps
    per logit. ``scratch``: three float64 buffers at least this block's size."""
    n = len(ref)
    x, y, e = scratch[0, :n], scratch[1, :n], scratch[2, :n]
    x[...] = ref  # float32 to float64 is exact: the argmax and max agree with these
    y[...] = act
    top_ref, top_act = np.argmax(ref, axis=1), np.argmax(act, axis=1)
    x -= np.max(ref, axis=1, keepdims=True)
    y -= np.max(act, axis=1, keepdims=True)
    lse_y = np.log(np.exp(y, out=e).sum(axis=1))
    sum_p = np.exp(x, out=e).sum(axis=1)
    e /= sum_p[:, None]  # p
    lse_x = np.log(sum_p)
    index = top_ref if at is None else np.asarray(at, np.int64)
    lp_ref, lp_act = _pick(x, index) - lse_x, _pick(y, index) - lse_y
    x -= y  # x_p - x_q
    # rounding can leave an exact match a hair below zero; a divergence is never negative
    kl = np.maximum(np.einsum("ij,ij->i", e, x) - lse_x + lse_y, 0.0)
    dp = np.exp(lp_act) - np.exp(lp_ref)
    zeros = np.zeros(n)
    nll = (-lp_ref, -lp_act) if at is not None else (zeros, zeros)
    return kl, top_ref == top_act, dp, *nll


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
