"""Text for ``tfparity backends --quantize`` (or a quantised ``.keras``): each backend's
quantised output against the anchor's run and the float model's float64 referee, by
the mode's budgets. Reads Report.details only; no numpy, no frameworks."""

from __future__ import annotations

from typing import Any

from ..results import Report
from .quantisation import term_text, too_few_text
from .sections import table


def render_quantised_backends(report: Report) -> str:
    """The whole text report (see :mod:`tfparity.checks.backends_quantised`)."""
    d = report.details
    q = d["quantisation"]
    referee = d["referee"]
    lines = [
        f"tfparity backends · {report.model}",
        f"  backends: {', '.join(d['backends'])}",
        f"  quantisation: keras {q['mode']}, quantised {q['quantised']}; every backend "
        "runs the same quantised file",
        "  referee: "
        + (
            f"the float model at float64 on {referee['backend']}"
            if referee
            else "none (the file holds no float model): the backends against each other"
        ),
        f"  judge: {d['judge']}",
        f"  output: {q['output']}" + (" (logits over the vocabulary)" if q["logits"] else ""),
        "",
    ]
    rows = [_row(j) for j in q["judged"]]
    lines += table(
        ("backend", "against", "max abs diff", "mean abs diff", "cosine", "verdict"), rows
    )
    lines += [_distribution(j) for j in q["judged"] if j.get("distribution")]
    f = d["first_divergence"]
    if f:
        lines += ["", f"first divergence: {f['text']}"]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join([*lines, "", _verdict(report)])


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


def _distribution(j: dict[str, Any]) -> str:
    s = j["distribution"]
    terms = "; ".join(term_text(t, 0.95, limit=False) for t in s["budget"])
    return (
        f"distribution {j['backend']} vs {j['against']} ({s['positions']} positions over "
        f"{s['items']} rows): KL mean {s['kl_mean']:.3g}, max {s['kl_max']:.3g}; same top-1 "
        f"{100 * s['same_top1']:.1f}%; budget {s['budget_verdict']}"
        f"{too_few_text(s, 'rows')}: {terms}"
    )


def _verdict(report: Report) -> str:
    d = report.details
    q = d["quantisation"]
    if report.passed:
        against = (
            f"{q['anchor']}'s quantised run and the float64 referee"
            if d["referee"]
            else f"{q['anchor']}'s quantised run"
        )
        return (
            f"PASS backends: {', '.join(d['backends'])} compute the same keras {q['mode']} "
            f"model, within its budgets of {against}"
        )
    return f"FAIL backends: {(d['first_divergence'] or {}).get('text', 'see above')}"
