"""Render a runtimes Report: one row per run (kernel set at a thread count) with its
verdict and, where it parts, the first tensor, the op there and the evidence; the
verdict line names the runs that part."""

from __future__ import annotations

from typing import Any

from ..results import Report
from .text import divergence_text

_HEADER = ("run", "tensors", "verdict", "first parting tensor")
_FACTS = ("runtime", "judge", "reference", "batches", "sequences", "seconds")


def render_runtimes(report: Report, *, verbose: bool = False) -> str:
    details = report.details
    lines = [f"tfparity {report.check} · {report.model}"]
    lines += [f"  {k}: {details[k]}" for k in _FACTS if details.get(k) is not None]
    runs: list[dict[str, Any]] = details.get("runs", [])
    if runs:
        lines += ["", *_aligned([list(_HEADER), *(_cells(r) for r in runs)])]
    if report.first_divergence is not None:
        lines.append(
            f"first divergence against PyTorch: {divergence_text(report.first_divergence)}"
        )
        if report.first_divergence.hint:
            lines.append(f"hint: {report.first_divergence.hint}")
    lines += [f"note: {n}" for n in report.notes]
    if verbose:
        lines += ["", *(c.message() + "\n" for c in report.failures)]
    lines += ["", verdict(report)]
    return "\n".join(lines)


def verdict(report: Report) -> str:
    """``PASS runtimes: 5 runs agree (...)`` or ``FAIL runtimes: broken@1 parts at
    '<tensor>' (op SOFTMAX), max abs diff 0.0016``."""
    runs = report.details.get("runs", [])
    if report.passed:
        worst = max(report.tensors, key=lambda c: c.max_abs_diff, default=None)
        most = f"; largest difference {worst.max_abs_diff:.3g} ({worst.name})" if worst else ""
        reference = report.details.get("reference")
        agree = f"pass against {reference}" if reference else "agree"
        return f"PASS {report.check}: {len(runs)} runs {agree}{most}"
    parted = [r for r in runs if not r["passed"]]
    said = []
    for r in parted:
        p = r.get("parting")
        said.append(
            f"{r['run']} parts at '{p['tensor']}' (op {p['op']}), max abs diff "
            f"{p['max_abs_diff']:.3g}"
            if p
            else f"{r['run']} fails against the reference"
        )
    return f"FAIL {report.check}: {'; '.join(said)}"


def rows(report: Report) -> list[str]:
    """The assertion message's body: the runs' table and the notes (the partings)."""
    runs = report.details.get("runs", [])
    return [*_aligned([list(_HEADER), *(_cells(r) for r in runs)]), *report.notes]


def _cells(run: dict[str, Any]) -> list[str]:
    p = run.get("parting")
    where = "-"
    if p:
        where = (
            f"{p['position']}/{p['of']} {p['tensor']} (op {p['op']}): max abs diff "
            f"{p['max_abs_diff']:.3g} at {p['worst_index']} vs {p['against']}"
        )
    count, shared = run["tensors"], run.get("compared", run["tensors"])
    tensors = str(count) if shared >= count else f"{count} ({shared} shared)"
    return [run["run"], tensors, "ok" if run["passed"] else "FAIL", where]


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
