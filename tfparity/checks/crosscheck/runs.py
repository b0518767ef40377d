"""The cross-check's runs: the TF and PyTorch passes over the batches, one framework at
a time, the float64 truth folded into per-leaf referee sums as it arrives (its outputs
are not kept; by default it stops once the batches left could not change a verdict),
and, where asked, the sub-layer taps and isolated runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...adapters.interfaces.sides import Reference, TFSide
from ...compare import Referee, RefereeSums
from ...inputs import Batch
from ...trace import Trace
from .. import DEFAULT_REFEREE_RUNS
from ..embeds import ensure_finite


@dataclass
class Runs:
    """Per-batch results of the TF and PyTorch runs, the float64 run's referee sums
    per leaf (its outputs are not kept) over the first ``float64_batches`` batches, and
    the sub-layer records."""

    tf: list[Trace] = field(default_factory=list)
    pt: list[Trace] = field(default_factory=list)
    referee: dict[str, RefereeSums] = field(default_factory=dict)
    tf_taps: list[dict] = field(default_factory=list)
    pt_taps: list[dict] = field(default_factory=list)
    pt64_taps: list[dict] = field(default_factory=list)
    isolated: list[dict] = field(default_factory=list)
    float64_batches: int = 0


@dataclass(frozen=True)
class Float64Runs:
    """Which batches the float64 PyTorch pass runs for. ``lazy``: in batch order, until
    every leaf that ``waits_for`` is settled (:meth:`Referee.settled`: the batches
    left cannot change its verdict); else every batch. ``none``: no float64 at all (a
    side judged by budgets)."""

    mode: str = DEFAULT_REFEREE_RUNS  # or another of REFEREE_RUNS, or "none"
    referee: Referee = Referee()
    waits_for: Callable[[str], bool] = lambda name: True


def run_all(
    tf_model: TFSide,
    pt_model: Reference,
    batches: Sequence[Batch],
    tapped: bool,
    tf_traces: Sequence[Trace] | None = None,
    float64: Float64Runs = Float64Runs(),
) -> Runs:
    runs = Runs()
    if tapped:  # taps record Python-side layer calls: the runs are eager
        truths = iter([add_tapped_run(runs, tf_model, pt_model, batch) for batch in batches])
    else:
        # One framework at a time: switching between TensorFlow's and PyTorch's thread
        # pools batch by batch slows both (each spins after its work, holding cores).
        runs.tf = list(tf_traces) if tf_traces is not None else [tf_model.run(b) for b in batches]
        runs.pt = [pt_model.run(b) for b in batches]
        truths = (pt_model.run(b, float64=True) for b in batches)  # one at a time, lazily
    for i in range(len(runs.pt)):
        ensure_finite(runs.pt[i], "the PyTorch reference")
        runs.pt[i] = outputs_of(tf_model, runs.pt[i])
        runs.tf[i] = tf_model.outputs_compared(runs.tf[i], runs.pt[i])
    if float64.mode == "none":
        return runs
    lazy = float64.mode == "lazy" and not tapped
    if lazy:
        add_differences(runs, batches)
    for i, truth in enumerate(truths):
        add_truth(runs, i, outputs_of(tf_model, truth), batches[i].attention_mask)
        if lazy and settled(runs, float64):
            break
    return runs


def add_differences(runs: Runs, batches: Sequence[Batch]) -> None:
    """Every batch's TF-vs-PyTorch squares, per leaf: what bounds the batches that the
    float64 run has not reached."""
    for i, batch in enumerate(batches):
        for name in runs.tf[i]:
            if name in runs.pt[i]:
                sums = runs.referee.setdefault(name, RefereeSums())
                sums.add_difference(runs.tf[i][name], runs.pt[i][name], batch.attention_mask, name)


def settled(runs: Runs, float64: Float64Runs) -> bool:
    """No float64 run still to come can change a verdict that ``float64`` waits for."""
    waited = [s for name, s in runs.referee.items() if float64.waits_for(name)]
    return all(float64.referee.settled(s) for s in waited)


def add_truth(runs: Runs, i: int, truth: Trace, mask: Any) -> None:
    """Batch ``i``'s float64 run, added to each leaf's referee sums and then let go."""
    runs.float64_batches += 1
    for name in truth:
        if name in runs.tf[i] and name in runs.pt[i]:
            sums = runs.referee.setdefault(name, RefereeSums())
            sums.add(runs.tf[i][name], runs.pt[i][name], truth[name], mask, name=name)


def add_tapped_run(runs: Runs, tf_model: TFSide, pt_model: Reference, batch: Batch) -> Trace:
    """One batch with sub-layer taps on all three sides, and the TF isolated runs; the
    float64 run is returned, for its referee sums."""
    tf_trace, tf_rec = tf_model.tapped_run(batch)
    pt, pt_rec = pt_model.recorded(batch, tapped=True)
    pt64, pt64_rec = pt_model.recorded(batch, float64=True, tapped=True)
    runs.tf.append(tf_trace)
    runs.pt.append(pt)
    runs.tf_taps.append(tf_rec)
    runs.pt_taps.append(pt_rec)
    runs.pt64_taps.append(pt64_rec)
    runs.isolated.append(tf_model.isolated(pt_rec, pt.hidden_states, batch))
    return pt64


def outputs_of(tf_model: TFSide, trace: Trace) -> Trace:
    """The reference's tensors that the TF side produces at all: a keras-hub backbone
    has no counterpart of some HF outputs (RoBERTa's pooler); HF TF models compare all."""
    names = tf_model.output_names(trace)
    if names is None:
        return trace
    return Trace({k: v for k, v in trace.items() if k in names})
