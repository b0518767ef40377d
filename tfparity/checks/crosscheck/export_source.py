"""The export against its source: exporting should change nothing.

The export and the TF model it was exported from run the same batches; every tensor
the export returns is compared with the source's. Both compute in float32 on the same
weights, so the bar is the one the modes check sets for graph against eager (the same
model run another way, :func:`~tfparity.checks.modes.mode_tolerance`): float32's rtol
and an atol of a few float32 roundings of the tensor's scale. A weight changed or
dropped on export, a branch frozen at trace time, or a wrong signature input moves
outputs far beyond that. Where the export returns hidden states the divergence is
localised to the first layer that differs; otherwise it is placed at the outputs.

With the export against PyTorch and the source against PyTorch (the cross-check), this
is the third side of the export's parity (:func:`export_verdict` reads the three).

A quantised export (a dynamic-range int8 flatbuffer, a Keras-quantised ``.keras``)
differs from its float source by design: it is held to the budgets of its quantisation
(:func:`~.budgeted.budget_of`, ``--budget`` too), as a quantised side is against
PyTorch, never to float32's bar.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...adapters.interfaces.sides import TFSide
from ...compare import BudgetJudge, Comparison, Tolerance, compare_output_batches
from ...compare.budgets import judged_by_budget
from ...inputs import Batch, note_inputs
from ...results import Divergence, Report
from ...trace import Trace, hidden_state_index, layer_of, layer_text
from ...validation import NothingComparedError
from ..embeds import ensure_finite
from ..modes import mode_tolerance, reference_magnitudes
from .budgeted import budget_of

LABEL = "export-vs-source"
SOURCE_LABEL = "crosscheck-source"
NO_INTERMEDIATES = (
    "No hidden states were compared (an export that returns none, a model of your own "
    "without a layer map), so the divergence cannot be placed at a layer (export "
    "hidden_states_<k>, or pass layers=, to localise it)."
)


def check_export_vs_source(
    export: TFSide,
    source: TFSide,
    batches: Sequence[Batch],
    tolerance: Tolerance | None = None,
    export_traces: Sequence[Trace] | None = None,
    budget: Any = None,
) -> Report:
    """Compare ``export``'s outputs with ``source``'s on ``batches`` (``export_traces``:
    the export's runs when the caller already has them). A quantised export (one its
    source is not) is judged by its quantisation's budgets, ``budget`` (``--budget``)
    put in."""
    actual = list(export_traces) if export_traces is not None else [export.run(b) for b in batches]
    expected = []
    for trace, batch in zip(actual, batches, strict=True):
        full = source.run(batch)
        ensure_finite(full, f"the source model {source.name}")
        expected.append(Trace({k: v for k, v in full.items() if k in trace}))
    if not expected or not expected[0]:
        raise NothingComparedError(
            f"None of {export.name}'s outputs ({', '.join(actual[0]) if actual else 'none'}) "
            f"has a counterpart in its source {source.name}'s: nothing would be compared."
        )
    masks = [b.attention_mask for b in batches]
    magnitudes = reference_magnitudes(expected, masks)

    def bar(name: str) -> Tolerance:
        return tolerance or mode_tolerance("float32", magnitudes[name])

    comparisons = compare_output_batches(
        actual, expected, masks=masks, tolerance=bar, check_dtype=False
    )
    kind = export.quantisation if export.quantisation != source.quantisation else None
    budgeted = budget_of(kind, budget) if kind is not None and tolerance is None else None
    if budgeted is not None:
        comparisons = [judged_by_budget(c, budgeted) for c in comparisons]
    passed = all(c.passed for c in comparisons)
    report = Report(
        check=LABEL,
        model=export.name,
        passed=passed,
        comparisons=comparisons,
        first_divergence=None if passed else localise(comparisons, source.name),
        notes=list(export.notes),
        details={
            "compares": f"the export (actual) vs its source {source.name} (expected), same inputs",
            "source": source.name,
            "judge": BudgetJudge(budgeted, kind).describe()
            if budgeted is not None
            else "tolerance"
            if tolerance
            else "float32 rtol, atol 4 x rtol x max|source| (as graph vs eager)",
            "batches": len(batches),
            "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
            **export.execution.describe(),
        },
    )
    return note_inputs(report, batches)


def localise(comparisons: list[Comparison], source: str) -> Divergence:
    """The first hidden state the export changed, or its outputs where it has none."""
    failing = [c for c in comparisons if not c.passed]
    hidden = sorted(k for c in failing if (k := hidden_state_index(c.name)) is not None)
    if not hidden:
        if all(hidden_state_index(c.name) is None for c in comparisons):
            return Divergence(None, "output", None, NO_INTERMEDIATES)
        where = "pooler" if any(c.name.startswith("pooler") for c in failing) else "head"
        hint = f"Every hidden state agrees with {source}'s; only the final outputs differ."
        return Divergence(None, where, where, hint)
    k = hidden[0]
    layer, where = layer_of(k), layer_text(k)
    return Divergence(
        k,
        layer,
        None,
        f"The export computes {where} differently from its source {source}: a weight "
        "changed or dropped on export, or a branch fixed when the signature was traced.",
    )


def export_verdict(reports: Sequence[Report]) -> str | None:
    """What the three comparisons of an export say together (None without them)."""
    by = {r.check: r.passed for r in reports}
    if LABEL not in by or SOURCE_LABEL not in by or "crosscheck" not in by:
        return None
    export_ok, pt_ok, source_ok = by[LABEL], by["crosscheck"], by[SOURCE_LABEL]
    if export_ok and pt_ok and source_ok:
        return "export parity: the export matches its source, and both match PyTorch."
    if not export_ok:
        return (
            "export parity: the export differs from its source, so the export step "
            f"changed the model (source vs PyTorch: {'PASS' if source_ok else 'FAIL'})."
        )
    if not source_ok:
        return (
            "export parity: the export matches its source, and the source already differs "
            "from PyTorch: the port is at fault, not the export."
        )
    return (
        "export parity: the export matches its source and the source matches PyTorch, "
        "yet the export vs PyTorch fails: the differences add up past the referee's bar."
    )
