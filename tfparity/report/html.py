"""A self-contained HTML report: one file to attach to a CI run or a pull request.

The same tables as the text report (details, the cross-check's per-layer table, the
tensor table, the distribution and budget lines of :mod:`.quantisation`, the first
divergence and the failure block), with the per-layer plot
embedded as a base64 PNG, so nothing else has to travel with the file. The plot is
drawn by the caller (``images``), which keeps this module free of matplotlib; when it
could not be drawn, ``image_note`` says why in the page.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import TfparityError
from ..results import Report
from . import renderer_for
from .backends import precision_text
from .quantisation import (
    backend_distribution_line,
    distribution_lines,
    quantisation_lines,
    requantisation_lines,
)
from .text import divergence_text, failing_summary

# Read in an 800 px window: the page never scrolls sideways; a table wider than the window
# scrolls in its own box (div.wide), a number never breaks across lines (td.num: "1.2e-"
# over "06" read as two figures), and a long path or hint wraps anywhere.
_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em;
       color: #222; max-width: 1300px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 2em; }
h1, h2, p, td.name { overflow-wrap: anywhere; }
div.wide { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
td.num, th { white-space: nowrap; font-variant-numeric: tabular-nums; }
th { background: #f2f2f2; } td.name, th.name { text-align: left; }
tr.fail td { background: #fde8ea; }
.pass { color: #0a7d2c; font-weight: bold; } .fail { color: #b00020; font-weight: bold; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 0.8em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #ddd; }
.note { color: #555; font-style: italic; }
"""

_LAYER_COLUMNS = (
    ("hidden", "hidden_state", None),
    ("layer", "layer", None),
    ("max abs diff", "max_abs_diff", ".3g"),
    ("mean abs diff", "mean_abs_diff", ".3g"),
    ("cosine", "cosine", ".6f"),
    ("TF rmse/fp64", "rmse_vs_fp64", ".3g"),
    ("PT rmse/fp64", "reference_rmse_vs_fp64", ".3g"),
    ("isolated rmse", "isolated_rmse", ".3g"),
    ("accumulated", "accumulated_ok", "flag"),
    ("isolated", "isolated_ok", "flag"),
    ("verdict", "passed", "verdict"),
)


def render_html(
    reports: Sequence[Report],
    images: Mapping[int, bytes] | None = None,
    image_note: str | None = None,
) -> str:
    """The page for ``reports``; ``images[i]`` is report i's PNG plot."""
    images = images or {}
    passed = all(r.passed for r in reports)
    title = f"tfparity · {reports[0].model}" if reports else "tfparity"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}: {_verdict(passed)}</h1>",
    ]
    for i, report in enumerate(reports):
        parts.extend(_section(report, images.get(i), image_note))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_html(
    reports: Sequence[Report],
    path: str | Path,
    images: Mapping[int, bytes] | None = None,
    image_note: str | None = None,
) -> None:
    try:
        Path(path).write_text(render_html(reports, images, image_note), encoding="utf-8")
    except OSError as exc:
        raise TfparityError(f"Cannot write the HTML report to {path}: {exc.strerror}.") from exc


def _section(report: Report, image: bytes | None, image_note: str | None) -> list[str]:
    out = [f"<h2>{_e(report.check)} · {_e(report.model)}: {_verdict(report.passed)}</h2>"]
    scalars = [(k, v) for k, v in report.details.items() if isinstance(v, (str, int, float))]
    if scalars:
        rows = [
            f'<tr><th class="name">{_e(k)}</th><td class="{_kind(v)}">{_e(v)}</td></tr>'
            for k, v in scalars
        ]
        out.extend(_wide("", rows))
    layers = report.details.get("layers")
    renderer = renderer_for(report)
    across = renderer.layer_x_backend  # tfparity backends: layer x backend
    if layers:
        out.extend(backend_tables(report.details) if across else _layer_table(layers))
        if image is not None:
            out.append(
                '<p><img alt="per-layer divergence plot" src="data:image/png;base64,'
                f'{base64.b64encode(image).decode("ascii")}"></p>'
            )
        elif image_note:
            out.append(f'<p class="note">{_e(image_note)}</p>')
    shown = [
        c
        for c in report.comparisons
        if not across and not (layers and c.name.startswith("hidden_states["))
    ]
    if shown:
        out.extend(_tensor_table(shown))
    budget = _budget_lines(report.details, across)
    if budget:
        out.append(f"<pre>{_e(chr(10).join(budget))}</pre>")
    if not layers and image is not None:
        out.append(
            '<p><img alt="divergence plot" src="data:image/png;base64,'
            f'{base64.b64encode(image).decode("ascii")}"></p>'
        )
    out.extend(f'<p class="note">note: {_e(n)}</p>' for n in report.notes)
    d = report.first_divergence
    if d is not None and across:
        out.extend(_backend_divergence(report.details))
    elif d is not None:
        out.append(f"<p><b>first divergence:</b> {_e(divergence_text(d))}</p>")
        if d.hint:
            out.append(f"<p><b>hint:</b> {_e(d.hint)}</p>")
    if report.failures and not across:
        out.append(f"<pre>{_e(failing_summary(report))}</pre>")
    out.append(f"<p>{_e(renderer.verdict(report))}</p>")
    return out


def _budget_lines(details: dict, across: bool) -> list[str]:
    """The text report's distribution and budget lines (:mod:`.quantisation`, the one
    renderer of them): a backends report's per backend, a cross-check's otherwise."""
    if across:
        judged = (details.get("quantisation") or {}).get("judged") or []
        return [backend_distribution_line(j) for j in judged if j.get("distribution")]
    lines = distribution_lines(details.get("distribution"))
    lines += quantisation_lines(details.get("quantisation"))
    lines += requantisation_lines(details.get("requantisation"))
    return [line for line in lines if line]  # the text report's blank separators dropped


def _layer_table(rows: list[dict]) -> list[str]:
    head = "".join(f"<th>{_e(label)}</th>" for label, _, _ in _LAYER_COLUMNS)
    body = []
    for r in rows:
        cells = "".join(
            f'<td class="num">{_e(_cell(r.get(key), fmt))}</td>' for _, key, fmt in _LAYER_COLUMNS
        )
        body.append(f'<tr class="{"ok" if r["passed"] else "fail"}">{cells}</tr>')
    return _wide("layers", [f"<tr>{head}</tr>", *body])


def backend_tables(details: dict) -> list[str]:
    """``tfparity backends``: each backend's precision facts, then the layer x backend
    table (per cell: relative RMSE to the float64 referee, the bound it was judged by as
    a relative RMSE, the verdict), and the Hugging Face and gradient tables when run."""
    backends = details["backends"]
    out = _wide(
        "",
        [
            '<tr><th class="name">backend</th><th class="name">precision</th></tr>',
            *(
                f'<tr><td class="name">{_e(b)}</td><td class="name">'
                f"{_e(precision_text(facts))}</td></tr>"
                for b, facts in details.get("precision", {}).items()
            ),
        ],
    )
    out += _backend_table("layer", details["layers"], backends)
    hf = details.get("hf_referee")
    if hf:
        out.append(f"<p>against {_e(hf['referee']['label'])}, same rule:</p>")
        out += _backend_table("hidden state (layer)", hf["layers"], backends)
    g = details.get("gradients")
    if g:
        out.append(f"<p>gradients of {_e(g['scalar'])}, counted backwards:</p>")
        out += _backend_table("gradient w.r.t.", g["rows"], backends, key="gradient")
    return out


def _backend_table(title: str, rows: list[dict], backends: list[str], key="layer") -> list[str]:
    head = f'<th class="name">{_e(title)}</th>' + "".join(
        f"<th>{_e(b)} rmse/RMS</th><th>{_e(b)} bound</th>" for b in backends
    )
    body = []
    for r in rows:
        cells = [r["backends"].get(b) for b in backends]
        failed = any(c is not None and not c["passed"] for c in cells)
        body.append(
            f'<tr class="{"fail" if failed else "ok"}"><td class="name">{_e(r[key])}</td>'
            + "".join(_backend_cell(c, r.get("rms")) for c in cells)
            + "</tr>"
        )
    return _wide("backends", [f"<tr>{head}</tr>", *body])


def _backend_cell(cell: dict | None, rms: float | None) -> str:
    """Two cells: the relative RMSE with its verdict, and the allowed one."""
    if cell is None:
        return '<td class="num">missing</td><td class="num">-</td>'
    verdict = "ok" if cell["passed"] else "FAIL"
    if cell["problem"]:
        return f'<td>FAIL: {_e(cell["problem"])}</td><td class="num">-</td>'
    relative = "-" if cell["relative_rmse"] is None else f"{cell['relative_rmse']:.3g}"
    allowed = cell.get("allowed_rmse")
    bound = "-" if allowed is None or not rms else f"{allowed / rms:.3g}"
    return f'<td class="num">{relative} {verdict}</td><td class="num">{bound}</td>'


def _backend_divergence(details: dict) -> list[str]:
    """The first divergence (backend and layer, or every backend), and its hints."""
    f = details.get("first_divergence") or (details.get("gradients") or {}).get("first_divergence")
    if not f:
        return []
    if "layer" not in f and "gradient" not in f:  # a quantised run over its budget
        out = [f"<p><b>first divergence:</b> {_e(f['text'])}</p>"]
        return out + [f"<p><b>hint:</b> {_e(h)}</p>" for h in f.get("hints", [])]
    who = f"backend {f['backend']}" if f.get("backend") else "every backend"
    where = f"layer {f['layer']}" if "gradient" not in f else f"gradient {f['gradient']}"
    out = [f"<p><b>first divergence:</b> {_e(who)}, {_e(where)} ({_e(f['kind'])})</p>"]
    out += [f"<p><b>hint:</b> {_e(h)}</p>" for h in f.get("hints", [])]
    return out


def _tensor_table(comparisons) -> list[str]:
    head = "".join(
        f"<th{' class=name' if i == 0 else ''}>{h}</th>"
        for i, h in enumerate(
            ("tensor", "max abs diff", "mean abs diff", "mismatched", "cosine", "verdict")
        )
    )
    body = []
    for c in sorted(comparisons, key=lambda c: (c.passed, c.problem is None, -c.max_abs_diff)):
        cosine = "n/a" if c.cosine is None else f"{c.cosine:.6f}"
        verdict = "ok" if c.passed else ("FAIL: " + c.problem if c.problem else "FAIL")
        body.append(
            f'<tr class="{"ok" if c.passed else "fail"}"><td class="name">{_e(c.name)}</td>'
            f'<td class="num">{c.max_abs_diff:.3g}</td><td class="num">{c.mean_abs_diff:.3g}</td>'
            f'<td class="num">{c.mismatched}/{c.total}</td><td class="num">{cosine}</td>'
            f"<td>{_e(verdict)}</td></tr>"
        )
    return _wide("tensors", [f"<tr>{head}</tr>", *body])


def _wide(cls: str, rows: list[str]) -> list[str]:
    """A table in its own horizontally scrolling box: a wide table (eleven layer columns,
    two per backend) scrolls there instead of widening the page past the window."""
    table = f'<table class="{cls}">' if cls else "<table>"
    return ['<div class="wide">', table, *rows, "</table>", "</div>"]


def _kind(value) -> str:
    """A details value's cell class: ``num`` for a number (kept on one line)."""
    return "num" if isinstance(value, (int, float)) else "name"


def _cell(value, fmt: str | None) -> str:
    if fmt == "flag":
        return "-" if value is None else ("ok" if value else "DIVERGES")
    if fmt == "verdict":
        return "ok" if value else "FAIL"
    if value is None:
        return "-"
    return format(value, fmt) if fmt else str(value)


def _verdict(passed: bool) -> str:
    return '<span class="pass">PASS</span>' if passed else '<span class="fail">FAIL</span>'


def _e(value) -> str:
    return html.escape(str(value))
