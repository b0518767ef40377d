"""What the two checkpoints hold decides what the cross-check judges.

- Weights the model needs that neither checkpoint holds (the pooler of a
  token-classification checkpoint checked as a base model): each loader made them up,
  differently, so the outputs that depend on them are not judged, and a note says why.
- Weights the port lacks and the reference holds: the port is incomplete, a failure
  named first.
- Weights the reference lacks and the port holds: the reference cannot judge them,
  exit 2.
- Body weights neither holds: nothing downstream could be judged, exit 2.

An export (SavedModel, ``.keras``, LiteRT) holds every weight it computes with, so it
lacks nothing; whether its pooler was made up before it was exported it cannot say, so
a reference lacking only the pooler leaves the outputs after it unjudged, as above.

Weights of the body (embeddings, layers) feed every output; others (the pooler, the
task head) feed only the outputs past the last hidden state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...adapters.sources.holdings import Holdings, listed
from ...compare import failed_comparison
from ...errors import TfparityError
from ...results import Divergence
from ...trace import Trace, hidden_state_index
from .hints import COMPUTATION_NOTE


@dataclass(frozen=True)
class Gaps:
    unjudged: tuple[str, ...] = ()  # head weights neither checkpoint holds
    port_lacks: tuple[str, ...] = ()  # weights the reference holds and the port lacks
    causes: tuple[str, ...] = ()  # why the port lacks them, where its loader knows


def checkpoint_gaps(tf_holdings: Holdings | None, pt_holdings: Holdings | None) -> Gaps:
    """The gaps between the two checkpoints; nothing is known (no gaps) where a side's
    loader did not say what it held (a model built in memory, TF weights)."""
    if tf_holdings is None or pt_holdings is None:
        return Gaps()
    pt_missing = set(pt_holdings.missing)
    # held by the port but perhaps made up too (an export's pooler): as if both lacked it
    unsure = {n for n in pt_missing if tf_holdings.may_be_made_up(n)}
    tf_missing = set(tf_holdings.missing) | unsure
    reference_lacks = sorted(pt_missing - tf_missing)
    if reference_lacks:
        raise TfparityError(
            "The PyTorch reference's checkpoint lacks weights that the TF port holds, so "
            f"it cannot judge them: {listed(reference_lacks)}. Give a reference checkpoint "
            "of the same model class (or --head for the class both hold)."
        )
    both = sorted(tf_missing & pt_missing)
    body = pt_holdings.body_weights(both)
    if body:
        raise TfparityError(
            "Neither checkpoint holds these weights of the model's body, so every output "
            f"would be computed from random numbers: {listed(body)}. The checkpoints do "
            "not describe this model (another class or config?)."
        )
    lacks = tuple(sorted(tf_missing - pt_missing))
    return Gaps(tuple(both), lacks, tf_holdings.causes if lacks else ())


def is_past_the_body(name: str) -> bool:
    """An output computed after the last hidden state (pooler, logits)."""
    return hidden_state_index(name) is None and name != "last_hidden_state"


def judged(trace: Trace, gaps: Gaps) -> Trace:
    """``trace`` without the outputs that depend on weights neither checkpoint holds."""
    if not gaps.unjudged:
        return trace
    return Trace({n: trace[n] for n in trace if is_judged(n, gaps)})


def is_judged(name: str, gaps: Gaps) -> bool:
    """Whether the output ``name`` is judged: not computed from weights neither
    checkpoint holds."""
    return not gaps.unjudged or not is_past_the_body(name)


def gap_notes(gaps: Gaps, dropped: list[str]) -> list[str]:
    if not gaps.unjudged or not dropped:
        return []
    return [
        f"Not judged: {', '.join(dropped)}: computed from weights neither checkpoint holds "
        f"({listed(gaps.unjudged)}), which each loader made up at random."
    ]


def name_lacking(divergence: Divergence | None, gaps: Gaps) -> None:
    """A hint on weights the port lacks says so first, instead of calling each one a
    weight that "differs": its value is the loader's random one, not a wrong port."""
    if divergence is None or not gaps.port_lacks:
        return
    lacking = f"the port lacks {listed(gaps.port_lacks)} (its loader made them up at random)"
    if gaps.causes:  # the loader knows why (a TF class's own names for them)
        lacking = "; ".join(gaps.causes)
    kept = [
        p
        for p in divergence.hint.split("; ")
        if p and not _names_any(p, gaps.port_lacks) and p != COMPUTATION_NOTE
    ]  # random weights: "config and weights agree" is not so
    divergence.hint = "; ".join([lacking, *kept])
    divergence.cause = lacking  # the verdict line's fact: the port's gap, not a "differs"


def _names_any(hint: str, weights: tuple[str, ...]) -> bool:
    """Whether ``hint`` describes one of ``weights`` (``weight NAME differs...``)."""
    return any(hint.startswith((f"weight {w} ", f"weight {w}:")) for w in weights)


def gap_failures(gaps: Gaps) -> list[Any]:
    """A failure naming the weights the port lacks (they are random in the port)."""
    if not gaps.port_lacks:
        return []
    return [
        failed_comparison(
            "weights:missing from the port",
            f"The TF port lacks weights the PyTorch reference holds: {'; '.join(gaps.causes)}."
            if gaps.causes
            else f"The TF port lacks weights the PyTorch reference holds: "
            f"{listed(gaps.port_lacks)} (its loader made them up at random). Port them.",
            [len(gaps.port_lacks)],
            "float32",
        )
    ]
