"""Render a modes Report: a table of tensor x mode -> max abs diff and verdict, then one
line per mode (how it ran, its tolerance rule, its time)."""

from __future__ import annotations

from typing import Any

from ..results import Report
from .text import failing_summary, verdict_line


def render_modes(report: Report, *, verbose: bool = False) -> str:
    details = report.details
    modes: list[dict[str, Any]] = details.get("modes", [])
    lines = [f"tfparity {report.check} · {report.model}"]
    for key in ("reference", "batches", "sequences", "tokens", "seconds"):
        if key in details:
            lines.append(f"  {key}: {details[key]}")
    if modes:
        lines += ["", *_diff_table(report, modes), "", *_mode_table(modes)]
    else:
        lines += ["", "no mode to run (see the notes)"]
    lines += [f"note: {n}" for n in report.notes]
    failing = report.failures
    if failing and verbose:
        lines.extend(["", *(c.message() + "\n" for c in failing)])
    elif failing:
        lines.extend(["", failing_summary(report)])
    lines += ["", verdict_line(report)]
    return "\n".join(lines)


def _diff_table(report: Report, modes: list[dict[str, Any]]) -> list[str]:
    """Rows: tensors; columns: modes; cells: max abs diff and ok/FAIL."""
    cells = {c.name: c for c in report.comparisons}
    header = ["tensor", *(m["mode"] for m in modes)]
    rows = []
    for tensor in report.details.get("outputs", []):
        row = [tensor]
        for m in modes:
            c = cells.get(f"{m['mode']}:{tensor}")
            row.append("-" if c is None else f"{c.max_abs_diff:.2e} {'ok' if c.passed else 'FAIL'}")
        rows.append(row)
    return _aligned([header, *rows])


def _mode_table(modes: list[dict[str, Any]]) -> list[str]:
    header = ["mode", "device", "run", "precision", "tf32", "tolerance", "seconds", "verdict"]
    rows = [
        [
            m["mode"],
            m["device"],
            m["execution"],
            m["precision"],
            m["tf32"],
            m["tolerance"],
            f"{m['seconds']:.2f}",
            "ok" if m["passed"] else f"FAIL ({m['failed']} tensors)",
        ]
        for m in modes
    ]
    return _aligned([header, *rows])


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
