"""Task-level agreement beside the numbers: do the two sides pick the same labels, spans
and tokens? A port can pass every tensor and still flip a label at a near-tie, or fail
a tensor by a bias no prediction notices; users decide on both.

Numpy only. A flip is a *near-tie* when both sides' margins (their top logit minus the
other side's choice) are within ``noise``, the per-element difference the judge allows
there: then rounding alone can flip it, and it is reported as one, not as a defect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ...architectures.heads import LABEL_OUTPUTS, SPAN_OUTPUTS
from ...trace import Trace

MAX_FLIPS = 5  # flips listed per measure (all are counted)


@dataclass(frozen=True)
class Flip:
    """One position where the sides disagree, with each side's margin for its choice
    over the other side's."""

    where: tuple[int, ...]
    tf: int
    pt: int
    tf_margin: float
    pt_margin: float
    near_tie: bool


@dataclass
class Agreement:
    """One measure over one output: ``agree`` of ``total`` positions."""

    output: str
    measure: str  # "label", "span", "top-1", "top-5 overlap"
    agree: float
    total: int
    flips: list[Flip] = field(default_factory=list)
    flip_count: int = 0
    near_ties: int = 0

    @property
    def rate(self) -> float:
        return self.agree / self.total if self.total else 1.0


def task_agreement(
    tf: Sequence[Trace],
    pt: Sequence[Trace],
    masks: Sequence[np.ndarray],
    *,
    language_model: bool,
    noise: dict[str, float],
) -> list[Agreement]:
    """The measures the head's outputs call for (none for a base model's outputs)."""
    found = []
    names = {n for n in set(pt[0]) & set(tf[0]) if _same_shapes(n, tf, pt)} if pt else set()
    for name in LABEL_OUTPUTS:
        if name in names:
            found += _labels(name, tf, pt, masks, language_model, noise.get(name, 0.0))
    if all(n in names for n in SPAN_OUTPUTS):
        found.append(_spans(tf, pt, masks))
    return found


def _same_shapes(name: str, tf: Sequence[Trace], pt: Sequence[Trace]) -> bool:
    """Whether both sides give ``name`` in one shape in every batch: a shape mismatch is
    a failed comparison already, and argmaxes over other class counts mean nothing."""
    return all(np.shape(a[name]) == np.shape(b[name]) for a, b in zip(tf, pt, strict=True))


def _positions(logits: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One batch's logits as [positions, classes] in their own dtype (LM logits are
    [tokens, vocab]: no float64 copy), and each position's index in the batch; for
    [batch, seq, classes] only the non-padding tokens."""
    x = np.asarray(logits)
    if x.ndim == 3:
        rows, cols = np.nonzero(np.asarray(mask, bool))
        return x[rows, cols], np.stack([rows, cols], axis=1)
    return x.reshape(x.shape[0], -1), np.arange(x.shape[0])[:, None]


def _labels(name, tf, pt, masks, language_model, noise) -> list[Agreement]:
    """Argmax agreement batch by batch; margins only where the sides flip."""
    agree = total = flips = near = 0
    overlap, wide = 0.0, False  # wide: more than 5 classes, so top-5 means something
    listed: list[Flip] = []
    for b, (ta, tr, mask) in enumerate(zip(tf, pt, masks, strict=True)):
        a, where = _positions(ta[name], mask)
        r, _ = _positions(tr[name], mask)
        la, lr = a.argmax(axis=1), r.argmax(axis=1)
        agree += int((la == lr).sum())
        total += len(la)
        for i in np.nonzero(la != lr)[0]:
            tf_margin = float(a[i, la[i]]) - float(a[i, lr[i]])
            pt_margin = float(r[i, lr[i]]) - float(r[i, la[i]])
            tie = tf_margin <= noise and pt_margin <= noise
            flips, near = flips + 1, near + tie
            if len(listed) < MAX_FLIPS:
                at = (b, *(int(j) for j in where[i]))
                listed.append(Flip(at, int(la[i]), int(lr[i]), tf_margin, pt_margin, tie))
        wide = a.shape[1] > 5
        if language_model and wide:
            top_a = np.argpartition(-a, 5, axis=1)[:, :5]
            top_r = np.argpartition(-r, 5, axis=1)[:, :5]
            overlap += sum(len(set(x) & set(y)) for x, y in zip(top_a, top_r, strict=True)) / 5
    measure = "top-1" if language_model else "label"
    found = [Agreement(name, measure, agree, total, listed, flips, near)]
    if language_model and wide:
        # agree / total: the mean share of each side's 5 top tokens the other shares
        found.append(Agreement(name, "top-5 overlap", overlap, total))
    return found


def _spans(tf, pt, masks) -> Agreement:
    """Argmax start and end per sequence, over its non-padding tokens."""
    agree = total = 0
    for trace_a, trace_r, mask in zip(tf, pt, masks, strict=True):
        valid = np.asarray(mask, bool)
        picks = []
        for trace in (trace_a, trace_r):
            s, e = (
                np.where(valid, np.asarray(trace[n], np.float64), -np.inf) for n in SPAN_OUTPUTS
            )
            picks.append((s.argmax(axis=1), e.argmax(axis=1)))
        (sa, ea), (sr, er) = picks
        agree += int(((sa == sr) & (ea == er)).sum())
        total += len(sa)
    return Agreement("start_logits/end_logits", "span", agree, total)


def _masked(logits, valid: np.ndarray) -> np.ndarray:
    return np.where(valid, np.asarray(logits, np.float64), -np.inf)
