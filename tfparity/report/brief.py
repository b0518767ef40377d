"""A tensor check's part of the assertion helpers' failure message: what a red CI run
prints (:func:`tfparity.report.assertion_message` puts the parts together).

The first divergence comes first, then the verdict and the model (pytest's one-line
summary shows the first line, cut at the terminal's width), then the hint, the layers
around the divergence, the failing outputs and the first divergence's block, each
tensor once; then where the full report is. About 25 lines, however deep the model:
the full report (every row, every block, the notes) is a path away, not in the log.
"""

from __future__ import annotations

from collections.abc import Callable

from ..results import Divergence, Report
from .text import (
    comparison_table,
    failing_summary,
    grouped,
    layer_table,
    named,
    verdict_line,
    worst_first,
)

MAX_LAYER_ROWS = 3  # the layer table around the first divergence (the JSON has all)
MAX_TENSOR_ROWS = 2  # failing outputs listed (the JSON has all)
_FACTS = ("judge", "reference", "device", "execution", "precision")


def rows(report: Report, *, verdict: Callable[[Report], str] = verdict_line) -> list[str]:
    """The message's body for a tensor check's failed ``report``, from its rows: the
    hint, what failed and by whose judgement, the layer table's rows around the first
    divergence, the failing outputs and the first divergence's block. ``verdict``: the
    check's verdict line (default: the tensor checks')."""
    lines = []
    d = report.first_divergence
    if d is not None and d.hint:
        lines.append(f"hint: {d.hint}")
    lines.append(_facts(report, verdict))
    layers = report.details.get("layers") or []
    window, left_out = _layer_window(layers)
    if window:
        lines += ["", *layer_table(window)]
    rows = _tensor_rows(report, layers)
    if rows:
        shown = [named(c, names[1:], first=names[0]) for c, names in rows[:MAX_TENSOR_ROWS]]
        lines += ["", *comparison_table(shown)]
    more = left_out + _count(len(rows) - MAX_TENSOR_ROWS, "more failing tensor")
    if more:
        lines.append(f"(in the full report: {'; '.join(more)})")
    block = _block(report)
    if block:
        lines += ["", *block]
    return lines


def headline(report: Report, verdict: Callable[[Report], str] = verdict_line) -> str:
    """``layer 1 intermediate diverges (hidden_states[2]): FAIL crosscheck, tiny:bert``;
    without a localised divergence, the verdict line. The divergence comes first, most
    specific first, and the model last: pytest's one-line summary cuts the line at the
    terminal's width after its own ``FAILED path::test - AssertionError:`` prefix, and
    at 80 columns the layer and component must still be in it."""
    d = report.first_divergence
    if d is not None:
        return f"{divergence_headline(d)}: FAIL {report.check}, {report.model}"
    return f"{verdict(report)} ({report.model})"


def divergence_headline(d: Divergence) -> str:
    """``layer 1 intermediate diverges (hidden_states[2])``, ``embeddings diverge
    (hidden_states[0])``, ``head diverges (past the last hidden state)``: the place,
    then the tensor that shows it (or why none does)."""
    if d.layer == "output":
        return "the outputs diverge (no hidden state compared, so not localised to a layer)"
    place = f"layer {d.layer}" if isinstance(d.layer, int) else str(d.layer)
    if d.component and d.component != d.layer:  # not "embeddings embeddings"
        place += f" {d.component}"
    if d.hidden_state is not None:
        shown = f"hidden_states[{d.hidden_state}]"
        if isinstance(d.layer, int) and not d.component:
            shown += "; sub-layers not tapped"
    elif d.layer in ("head", "pooler"):
        shown = "past the last hidden state"
    else:  # the decoder, the weights (gradients): the hint says where
        shown = ""
    verb = "diverge" if place.endswith("s") else "diverges"
    return f"{place} {verb} ({shown})" if shown else f"{place} {verb}"


def _facts(report: Report, verdict: Callable[[Report], str]) -> str:
    """How many tensors differ (what failed), and by whose judgement, on one line."""
    summary = verdict(report).split(": ", 1)[1]
    facts = [f"{k}: {report.details[k]}" for k in _FACTS if k in report.details]
    if "reference" not in report.details and "compares" in report.details:
        facts.insert(0, f"compares: {report.details['compares']}")
    return "; ".join([summary, *facts])


def _layer_window(layers: list[dict]) -> tuple[list[dict], list[str]]:
    """The per-layer rows from the one before the first failing row, MAX_LAYER_ROWS at
    most, and what the rest hold (for the "in the full report" line)."""
    first = next((i for i, r in enumerate(layers) if not r["passed"]), len(layers) - 1)
    start = max(0, min(first - 1, len(layers) - MAX_LAYER_ROWS))
    window = layers[start : start + MAX_LAYER_ROWS]
    outside = layers[:start] + layers[start + MAX_LAYER_ROWS :]
    if not outside:
        return window, []
    failing = sum(not r["passed"] for r in outside)
    return window, [f"{_count(len(outside), 'more hidden state')[0]}, {failing} failing"]


def _count(n: int, what: str) -> list[str]:
    return [f"{n} {what}{'s' if n > 1 else ''}"] if n > 0 else []


def _tensor_rows(report: Report, layers: list) -> list:
    """The failing tensors, each once (``last_hidden_state = hidden_states[2]``), worst
    first; where the layer table shows the hidden states, the other outputs only."""
    rows = []
    for c, twins in grouped(report.failures):
        names = [c.name, *twins]
        if layers and all(n.startswith("hidden_states[") for n in names):
            continue
        if layers:  # an output identical to a hidden state: named after the output
            names.sort(key=lambda n: n.startswith("hidden_states["))
        rows.append((c, names))
    return sorted(rows, key=lambda row: worst_first(row[0]))


def _block(report: Report) -> list[str]:
    """The first divergence's failure block (else the worst tensor's), without the
    blank line under its head; none where no comparison failed (a check that failed
    by its details: the verdict line says why)."""
    if not report.failures:
        return []
    lines = failing_summary(report).splitlines()
    if len(lines) > 1 and not lines[1]:
        del lines[1]
    return lines
