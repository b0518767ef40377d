"""Text for the gradients check: the hidden states' gradients walked from the top, the
embeddings' and the word matrix's, and the weights whose gradients differ most
(Report.details and comparisons only; no numpy, no frameworks)."""

from __future__ import annotations

from typing import Any

from ..results import Report
from .sections import table
from .text import divergence_lines, failing_summary, verdict_line


def render_gradients(report: Report, *, verbose: bool = False) -> str:
    d = report.details
    lines = [f"tfparity {report.check} · {report.model}"]
    lines += [f"  {k}: {v}" for k, v in d.items() if isinstance(v, (str, int, float))]
    rows = [_hidden_row(r) for r in reversed(d.get("hidden_states") or [])]
    if rows:
        header = (
            "gradient w.r.t.",
            "forward",
            "max abs diff",
            "cosine",
            "TF rmse/fp64",
            "PT rmse/fp64",
            "verdict",
        )
        lines += ["", *table(header, rows)]
    loss = next((c for c in report.comparisons if c.name == "loss"), None)
    if loss is not None:
        lines += [
            "",
            f"loss: max abs diff {loss.max_abs_diff:.3g} ({'ok' if loss.passed else 'FAIL'})",
        ]
    lines += _weights_lines(report)
    lines += [f"note: {n}" for n in report.notes]
    lines += divergence_lines(report)
    if report.failures and verbose:
        lines += ["", *(c.message() + "\n" for c in report.failures)]
    elif report.failures:
        lines += ["", failing_summary(report)]
    return "\n".join([*lines, "", verdict_line(report)])


def _num(x: Any, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def _hidden_row(r: dict[str, Any]) -> tuple[str, ...]:
    forward = r["forward_ok"]
    return (
        r["gradient"],
        "-" if forward is None else ("ok" if forward else "DIFFERS"),
        _num(r["max_abs_diff"]),
        _num(r["cosine"], ".6f"),
        _num(r["rmse_vs_fp64"]),
        _num(r["reference_rmse_vs_fp64"]),
        "ok" if r["passed"] else "FAIL",
    )


def _weights_lines(report: Report) -> list[str]:
    """The weights' verdicts in one line, the ones that differ most below it; the word
    matrix's row of the ids-vs-embeds report."""
    d = report.details
    weights = d.get("weights")
    if weights is None:
        word = next(
            (c for c in report.comparisons if c.name == f"grad:{d.get('word_embeddings')}"), None
        )
        if word is None:
            return []
        what = "ok" if word.passed else f"FAIL: {word.problem or 'differs'}"
        name = d["word_embeddings"]
        return [f"word-embedding matrix {name}: max abs diff {word.max_abs_diff:.3g} ({what})"]
    lines = [f"weights: {weights['passed']} of {weights['compared']} gradients agree"]
    lines += [f"  {w['name']}: {w['how']}" for w in weights["differing_most"][:5]]
    return lines
