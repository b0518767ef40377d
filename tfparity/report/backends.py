"""Text for the cross-backend check: the layer x backend table, the first divergence and
the verdict line. Reads Report.details only; no numpy, no frameworks."""

from __future__ import annotations

from typing import Any

from ..compare.rounding import compute_dtype
from ..results import Report
from .backends_quantised import CAPTION as QUANTISED_CAPTION
from .backends_quantised import budget_lines, divergence_lines, render_quantised_backends
from .sections import table

# The rows of the layer table an assertion message shows before and after the first
# divergence (the whole table of a keras-hub model, with its sublayers, runs to hundreds).
WINDOW = 3
# The caption of the float report's layer table.
CAPTION = "each cell: max abs diff to the referee, RMSE / referee RMS, verdict"


def _cell(cell: dict[str, Any] | None) -> str:
    """``1.2e-07 3.4e-08 ok``: max abs diff, RMSE / the truth's RMS, verdict."""
    if cell is None:
        return "missing"
    if cell["problem"]:
        return "FAIL (" + cell["problem"].split(";")[0][:40] + ")"
    relative = "n/a" if cell["relative_rmse"] is None else f"{cell['relative_rmse']:.2g}"
    return f"{cell['max_abs_diff']:.2g} {relative} {'ok' if cell['passed'] else 'FAIL'}"


def verdict(report: Report) -> str:
    """``PASS backends: ...`` or ``FAIL backends: ...`` naming backend and layer."""
    d = report.details
    taps = sum(1 for row in d["layers"] if row.get("parent"))  # sublayers inside a layer
    n = len(d["layers"]) - taps
    backends = ", ".join(d["backends"])
    g = d.get("gradients")
    if report.passed:
        grads = f" and {len(g['rows'])} gradients" if g else ""
        hf = d.get("hf_referee")
        also = (
            f" and with {hf['referee']['label']} at {len(hf['layers'])} hidden states" if hf else ""
        )
        return (
            f"PASS backends: {backends} agree with the float64 referee at {n} layers"
            f"{f' and {taps} sublayers' if taps else ''}{grads}{also}"
        )
    f = d["first_divergence"] or (g or {}).get("first_divergence") or {}
    return f"FAIL backends: {f.get('text', 'see above')}"


def render_quantised(report: Report, *, verbose: bool = False) -> str:
    """The text report of a quantised run (:mod:`.backends_quantised`), with the float
    report's cells; ``verbose`` changes nothing (every row is shown)."""
    return render_quantised_backends(report, _cell)


def rows(report: Report) -> list[str]:
    """``tfparity.assert_backends``'s failure, from the report's rows: the layer table's
    rows around the first divergence, the sections below the table (the Hugging Face
    referee, the first divergence with its hints, the gradients) and the notes."""
    return _shown(_window(report, CAPTION) + _below_table(report.details) + _notes(report))


def quantised_rows(report: Report) -> list[str]:
    """A quantised run's failure: the layer table's rows around the first divergence,
    the quantisation's budget, the first divergence with its hints and the notes."""
    d = report.details
    return _shown(
        _window(report, QUANTISED_CAPTION) + budget_lines(d) + divergence_lines(d) + _notes(report)
    )


def _window(report: Report, caption: str) -> list[str]:
    """The layer table's caption and its rows from WINDOW before the first divergence
    to WINDOW after it."""
    d = report.details
    layers = d["layers"]
    names = [row["layer"] for row in layers]
    first = d["first_divergence"] or {}
    at = names.index(first["layer"]) if first.get("layer") in names else 0
    window = layers[max(0, at - WINDOW) : at + WINDOW + 1]
    cells = [
        (row["layer"], *(_cell(row["backends"].get(b)) for b in d["backends"])) for row in window
    ]
    return [caption, *table(("layer", *d["backends"]), cells)]


def _shown(lines: list[str]) -> list[str]:
    """The message's lines without the report's blank ones (it stays short)."""
    return [line for line in lines if line]


def _notes(report: Report) -> list[str]:
    return [f"note: {n}" for n in report.notes]


def render_report(report: Report, *, verbose: bool = False) -> str:
    """Either kind of ``tfparity backends`` report as the command prints it: the one its
    ``details.variant`` declares (``quantised``), else the float run's layer table."""
    if report.details.get("variant") == "quantised":
        return render_quantised(report)
    return render_backends(report)


def render_backends(report: Report, *, verbose: bool = False) -> str:
    """The whole text report of a float ``tfparity backends`` run; ``verbose`` changes
    nothing (every row is shown)."""
    d = report.details
    referee = d["referee"]
    lines = [
        f"tfparity backends · {report.model}",
        f"  backends: {', '.join(d['backends'])}",
        f"  referee: float64 on {referee['backend']}",
        *policy_lines(d.get("dtype_policies", {})),
        f"  judge: {d['judge']}",
        *(f"  precision {b}: {precision_text(facts)}" for b, facts in d["precision"].items()),
        "",
        CAPTION,
    ]
    rows = [
        (row["layer"], *(_cell(row["backends"].get(b)) for b in d["backends"]))
        for row in d["layers"]
    ]
    lines += table(("layer", *d["backends"]), rows)
    lines += _below_table(d)
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join([*lines, "", verdict(report)])


def _below_table(d: dict[str, Any]) -> list[str]:
    """The float report's sections under the layer table: the Hugging Face referee's
    table, the first divergence with its hints, the gradients."""
    lines = _hf_section(d["hf_referee"], d["backends"]) if d.get("hf_referee") else []
    f = d["first_divergence"]
    if f:
        who = f"backend {f['backend']}" if f["backend"] else "every backend"
        lines += ["", f"first divergence: {who}, layer {f['layer']} ({f['kind']})"]
        lines += [f"  hint: {h}" for h in f.get("hints", [])]
    if d.get("gradients"):
        lines += _gradients(d["gradients"], d["backends"])
    return lines


def policy_lines(policies: dict[str, int]) -> list[str]:
    """``  dtype policy: mixed_float16 (12 layers), float32 (1 layer)``: the layers'
    own policies (the precision lines give the process's global one, float32); none
    where every layer computes in float32."""
    if all(compute_dtype(p) == "float32" for p in policies):
        return []
    ranked = sorted(policies.items(), key=lambda kv: -kv[1])
    return ["  dtype policy: " + ", ".join(f"{p} ({n} layer{'s' * (n > 1)})" for p, n in ranked)]


def precision_text(facts: dict[str, Any]) -> str:
    """``dtype_policy float32, devices cpu``: one backend's precision facts (an empty
    list reads ``none``: ``float64_shortfalls none`` on TensorFlow)."""
    return ", ".join(f"{k} {_fact(v)}" for k, v in facts.items())


def _fact(value: Any) -> str:
    if isinstance(value, list):
        return "/".join(map(str, value)) or "none"
    return str(value)


def _gradients(g: dict[str, Any], backends: list[str]) -> list[str]:
    """The gradient rows (backwards: the last layer first) and their first divergence."""
    lines = ["", f"gradients of {g['scalar']}, counted backwards:"]
    rows = [(_marked(row), *(_cell(row["backends"].get(b)) for b in backends)) for row in g["rows"]]
    lines += table(("gradient w.r.t.", *backends), rows)
    zeros = [(row["gradient"], row["zero"]) for row in g["rows"] if "zero" in row]
    if zeros:
        lines.append(
            "* zero in exact arithmetic (float64 RMS below 1e-10 of the other gradients of "
            "its layer): its RMSE is relative to, and its floor and ceiling scaled by, those "
            "gradients' largest RMS: "
            + ", ".join(
                f"{name} (RMS {z['rms']:.2g} against {z['scale']:.2g} of {z['of']})"
                for name, z in zeros
            )
        )
    f = g["first_divergence"]
    if f:
        who = f"backend {f['backend']}" if f["backend"] else "every backend"
        lines += [
            "",
            f"first gradient divergence: {who}, gradient {f['gradient']}, "
            f"backward pass of layer {', '.join(f['layers'])} ({f['kind']})",
            *(f"  hint: {h}" for h in f.get("hints", [])),
        ]
    return lines


def _marked(row: dict[str, Any]) -> str:
    """A gradient row's name, with ``*`` where it is zero in exact arithmetic."""
    return row["gradient"] + (" *" if "zero" in row else "")


def _hf_section(hf: dict[str, Any], backends: list[str]) -> list[str]:
    """The second referee's table: each hidden state (the backbone layer holding it)
    against Hugging Face PyTorch at float64, per backend."""
    rows = [
        (row["layer"], *(_cell(row["backends"].get(b)) for b in backends)) for row in hf["layers"]
    ]
    return [
        "",
        f"against {hf['referee']['label']} (padded positions excluded), same rule:",
        *table(("hidden state (layer)", *backends), rows),
    ]
