"""Text for ``tfparity backends --quantize`` (or a quantised ``.keras``): the layer x
backend table of the backends against each other on the quantised model, then the
mode's budget line, each backend's quantised output against the float model's float64
referee. Reads Report.details only; no numpy, no frameworks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..results import Report
from .quantisation import backend_distribution_line
from .sections import table

# The caption of the layer table.
CAPTION = "each cell: max abs diff to the nearest other backend, RMSE / RMS, verdict"


def render_quantised_backends(report: Report, cell: Callable[[Any], str]) -> str:
    """The whole text report (see :mod:`tfparity.cross_backend.quantised`); ``cell``
    writes one backend's cell of the layer table (the float report's)."""
    d = report.details
    q = d["quantisation"]
    lines = [
        f"tfparity backends · {report.model}",
        f"  backends: {', '.join(d['backends'])}",
        f"  quantisation: keras {q['mode']}, quantised {q['quantised']}; every backend "
        "runs the same quantised file",
        f"  judge: {d['judge']}",
        "",
        CAPTION,
    ]
    rows = [
        (row["layer"], *(cell(row["backends"].get(b)) for b in d["backends"]))
        for row in d["layers"]
    ]
    lines += table(("layer", *d["backends"]), rows)
    lines += [*budget_lines(d), *divergence_lines(d)]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join([*lines, "", quantised_verdict(report)])


def budget_lines(d: dict[str, Any]) -> list[str]:
    """The budget section: each backend's quantised output against the float referee."""
    q = d["quantisation"]
    lines = ["", _budget_heading(q, d["referee"])]
    if q["judged"]:
        lines += table(
            ("backend", "against", "max abs diff", "mean abs diff", "cosine", "verdict"),
            [_row(j) for j in q["judged"]],
        )
        lines += [backend_distribution_line(j) for j in q["judged"] if j.get("distribution")]
    return lines


def divergence_lines(d: dict[str, Any]) -> list[str]:
    """The first divergence (a backend and layer, or the budget) and its hints."""
    f = d["first_divergence"]
    if not f:
        return []
    named = f"backend {f['backend']}, layer {f['layer']} ({f['kind']})" if "layer" in f else ""
    return [
        "",
        f"first divergence: {named or f['text']}",
        *(f"  hint: {h}" for h in f.get("hints", [])),
    ]


def _budget_heading(q: dict[str, Any], referee: dict[str, Any] | None) -> str:
    """The budget line: what judges the quantisation's own error, and against what."""
    output = q["output"] + (" (logits over the vocabulary)" if q["logits"] else "")
    if not referee:
        return (
            f"{q['mode']} budget: not judged (the file holds no float model to judge the "
            f"quantisation by); output {output}"
        )
    return (
        f"{q['mode']} budget, quantised vs the float model at float64 on "
        f"{referee['backend']}, at the output {output}: {q['budget']}"
    )


def _row(j: dict[str, Any]) -> tuple[str, ...]:
    cosine = "n/a" if j["cosine"] is None else f"{j['cosine']:.6f}"
    return (
        j["backend"],
        j["against"],
        f"{j['max_abs_diff']:.3g}",
        f"{j['mean_abs_diff']:.3g}",
        cosine,
        "ok" if j["passed"] else "FAIL",
    )


def quantised_verdict(report: Report) -> str:
    """``PASS backends: ...`` or ``FAIL backends: ...`` naming backend and layer."""
    d = report.details
    q = d["quantisation"]
    if report.passed:
        taps = sum(1 for row in d["layers"] if row.get("parent"))
        layers = f"{len(d['layers']) - taps} layers" + (f" and {taps} sublayers" if taps else "")
        budget = (
            f", and its output is within the {q['mode']} budgets of the float model"
            if d["referee"]
            else ""
        )
        return (
            f"PASS backends: {', '.join(d['backends'])} compute the same keras {q['mode']} "
            f"model at {layers}{budget}"
        )
    return f"FAIL backends: {(d['first_divergence'] or {}).get('text', 'see above')}"
