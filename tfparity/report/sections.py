"""Text for the diagnose, embeddings and positions checks (their details are tables,
not only tensor comparisons). Reads Report.details only; no numpy, no frameworks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..results import Report
from .text import comparison_table


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned first column, right-aligned others, two spaces between."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return [
        fmt.format(*header).rstrip(),
        *(fmt.format(*(str(c) for c in r)).rstrip() for r in rows),
    ]


def _num(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _head(report: Report, pairs: Sequence[tuple[str, Any]]) -> list[str]:
    return [f"tfparity {report.check} · {report.model}", *(f"  {k}: {v}" for k, v in pairs)]


def _notes(report: Report) -> list[str]:
    return [f"note: {n}" for n in report.notes]


def _verdict(report: Report, summary: str) -> str:
    return f"{'PASS' if report.passed else 'FAIL'} {report.check}: {summary}"


def diagnose_verdict(report: Report) -> str:
    """``FAIL diagnose: <the stage the embeddings were computed from>`` (and the factor
    on every value, where one was found)."""
    scale = report.details.get("scale")
    factor = f" x {scale['factor']:.4g}" if scale else ""
    return _verdict(report, report.details["verdict"] + factor)


def embeddings_verdict(report: Report) -> str:
    """``PASS embeddings: cosine round trip 100.0%``, or the facts that failed it."""
    return _verdict(report, _embeddings_verdict(report))


def positions_verdict(report: Report) -> str:
    """``PASS positions: equivariant yes, explicit positions match yes``; on a FAIL, each
    failed property with the fact that failed it (position_ids that change nothing,
    or the output s4 moved and by how much)."""
    return _verdict(report, _positions_summary(report))


def render_diagnose(report: Report) -> str:
    d = report.details
    lines = _head(
        report,
        [
            ("embeds", f"{d['embeds_shape']} {d['embeds_dtype']} (model {d['model_dtype']})"),
            ("tokens", d["tokens"]),
        ],
    )
    rows = [
        (name, _num(dist), "<- verdict" if name == d["verdict"] else "")
        for name, dist in d["candidates"].items()
    ]
    lines += ["", *table(("stage computed from the ids", "distance", ""), rows)]
    lines += ["", f"verdict: {d['verdict']}"]
    matched = f"{d['tokens'] - d['recovered_ids_mismatched']}/{d['tokens']}"
    if d["verdict"].startswith(("hidden_states[", "last_hidden_state")):
        lines.append(  # the layers are not undone: only the nearest rows are read
            f"recovered ids: not asked of a hidden state after the embedding layer (its "
            f"nearest word rows are the ids at {matched})"
        )
        d = {**d, "id_mismatches": []}
    else:
        lines.append(
            f"recovered ids: {matched} match ({_pct(d['recovered_ids_match'])})"
            + (f"; every mismatch is off by {d['id_offset']:+d}" if d["id_offset"] else "")
        )
    for m in d["id_mismatches"][:5]:
        lines.append(
            f"  sequence {m['sequence']} position {m['position']}: "
            f"expected {m['expected']}, recovered {m['recovered']}"
        )
    lines += _diagnose_findings(d)
    lines.append(
        f"outputs (inputs_embeds vs input_ids): {'match' if d['outputs_match'] else 'differ'}"
    )
    if report.comparisons and not d["outputs_match"]:
        lines += ["", *comparison_table(report.comparisons)]
    lines += ["", f"fix: {d['fix']['advice']}"]
    if d["fix"]["code"]:
        lines.append(f"    {d['fix']['code']}")
    return "\n".join([*lines, *_notes(report), "", diagnose_verdict(report)])


def _diagnose_findings(d: dict) -> list[str]:
    """The facts that explain a mismatch: row order or shift, token types, rounding
    (absent from older reports: read with ``get``)."""
    lines = []
    layout = d.get("row_layout")
    if layout and layout["kind"] == "permuted":
        lines.append(f"row order: embeddings row b holds ids row rows[b], rows = {layout['rows']}")
    elif layout:
        lines.append(
            f"row shift: {layout['shifts']} positions per row (the ids' padding per row: "
            f"{layout['padding']})"
        )
    if d.get("token_type_ids") is not None:
        typed = sum(t != 0 for row in d["token_type_ids"] for t in row)
        lines.append(
            f"token types: with {typed} token(s) of type > 0 it is {d['verdict']} at distance "
            f"{_num(d['token_types_distance'])} (JSON: token_type_ids)"
        )
    if d.get("scale"):
        s = d["scale"]
        lines.append(
            f"scale: {s['stage']} x {s['factor']:.4g} (relative distance "
            f"{_num(s['distance'])} once divided out)"
        )
    if d.get("rounding"):
        r = d["rounding"]
        lines.append(
            f"rounding: through {r['dtype']}, up to {_num(r['max_abs'])} "
            f"(relative {_num(r['relative'])})"
        )
    return lines


def render_embeddings(report: Report) -> str:
    d = report.details
    tied = {True: "yes (one variable)", False: "no (separate variables)", None: "n/a (no LM head)"}
    lines = _head(
        report,
        [
            ("tokens", d["tokens"]),
            ("vocab", d["vocab_size"]),
            ("tied input/output embeddings", tied[d["tied"]]),
            ("config.tie_word_embeddings", d["config_tie_word_embeddings"]),
            ("head transform", d["head_transform"] or "n/a"),
        ],
    )
    rt = d["roundtrip"]
    rows = [
        ("dot: argmax over vocab of e @ W_out.T", _pct(rt["dot"])),
        ("cosine: nearest row of W_in", _pct(rt["cosine"])),
        ("lm_head: argmax over vocab of head(e)", _pct(rt["lm_head"])),
    ]
    lines += ["", *table(("round trip embeddings -> tokens", "recovered"), rows)]
    lines += [f"axis: {d['argmax_axis']}", ""]
    noise = [(f"{n['scale']:g}", _pct(n["recovered"])) for n in d["noise"]]
    lines += table(("noise |n|/|e|", "recovered (cosine)"), noise)
    lines.append(
        "Embeddings give their tokens back under noise comparable to their own norm: "
        "treat inputs_embeds as sensitive as the text."
    )
    return "\n".join([*lines, *_notes(report), "", embeddings_verdict(report)])


def _embeddings_verdict(report: Report) -> str:
    """The embeddings check's verdict line: on a FAIL, the facts that failed it (broken
    weights, tying against the config, a cosine round trip short of 100%), each with
    its figure; on a PASS, the cosine round trip that every token came back through."""
    d = report.details
    rt, tied, config_tie = d["roundtrip"], d["tied"], d["config_tie_word_embeddings"]
    facts = [
        f"non-finite weights in {c.name.removeprefix('weights:')}"
        for c in report.comparisons
        if not c.passed
    ]
    untied = tied is not None and config_tie is not None and tied != bool(config_tie)
    if untied and tied:
        facts.append(
            "untied decoder (config.tie_word_embeddings False), but the TF class ties it "
            "to the word embeddings: the checkpoint's own decoder does not run (round trip "
            f"through the tied one {_pct(rt['dot'])})"
        )
    elif untied:
        facts.append(
            "untied decoder (an output matrix of its own), though "
            f"config.tie_word_embeddings is True (round trip through it {_pct(rt['dot'])})"
        )
    if rt["cosine"] < 1.0:
        facts.append(f"cosine round trip {_pct(rt['cosine'])}: not every token comes back")
    if report.passed or not facts:
        return f"cosine round trip {_pct(rt['cosine'])}"
    return "; ".join(facts)


def _alignment(d: dict) -> str:
    """How the positions check lines its scenarios up."""
    if d["per_token"]:
        return "s3, s4 un-permuted to token order"
    return (
        f"one per sequence, read at token {d['pooled_token']}, which every permutation "
        "keeps in place"
    )


def render_positions(report: Report) -> str:
    d = report.details
    lines = _head(
        report,
        [
            ("positions", f"{d['position_kind']}{' (causal)' if d['causal'] else ''}"),
            (
                "permutations",
                f"{d['permutations']} ({d['self_inverse_permutations']} self-inverse)",
            ),
            ("sequences", d["sequences"]),
            ("compared", f"{d['compared']} ({_alignment(d)})"),
        ],
    )
    rows = [
        (pair.replace("_", "-"), "n/a", "n/a")
        if v is None
        else (pair.replace("_", "-"), _num(v["mean_abs_diff"]), _num(v["max_abs_diff"]))
        for pair, v in d["scenarios"].items()
    ]
    lines += ["", *table(("pair", "mean abs diff", "max abs diff"), rows)]
    lines.append("s1 baseline · s2 positions permuted · s3 tokens permuted · s4 both permuted")
    verdicts = {True: "yes", False: "NO", None: "n/a"}
    tol = d["tolerance"]
    lines += [
        "",
        f"equivariant (s1 == s4 within atol {tol['atol']:g}, rtol {tol['rtol']:g}): "
        f"{verdicts[d['equivariant']]}",
        f"explicit position_ids = default positions gives the default outputs: "
        f"{verdicts[d['explicit_positions_match']]}",
    ]
    failing = [c for c in report.comparisons if not c.passed]
    if failing:
        lines += ["", *comparison_table(failing)]
    return "\n".join([*lines, *_notes(report), "", positions_verdict(report)])


def _positions_summary(report: Report) -> str:
    d = report.details
    verdicts = {True: "yes", False: "NO", None: "n/a"}
    equivariant = f"equivariant {verdicts[d['equivariant']]}"
    if d["equivariant"] is False:
        equivariant += f" ({_equivariance_failure(report)})"
    explicit = f"explicit positions match {verdicts[d['explicit_positions_match']]}"
    worst = _worst_failure(report, "explicit_position_ids:")
    if d["explicit_positions_match"] is False and worst is not None:
        explicit += (
            f" (position_ids equal to the defaults, passed explicitly, change "
            f"{worst.name.split(':', 1)[1]} by up to {worst.max_abs_diff:.3g})"
        )
    return f"{equivariant}, {explicit}"


def _equivariance_failure(report: Report) -> str:
    """Why s4 is not s1: position_ids that change nothing never reach the model; else
    the output that moved, and by how much."""
    s1_s2 = report.details["scenarios"].get("s1_s2")
    if s1_s2 is not None and s1_s2["max_abs_diff"] == 0.0:
        return "permuting position_ids alone changes nothing: they do not reach the model"
    worst = _worst_failure(report, "s4_vs_s1:")
    if worst is None:
        return "s4 differs from s1"
    return (
        f"tokens and position_ids permuted together move {worst.name.split(':', 1)[1]} by up "
        f"to {worst.max_abs_diff:.3g}"
    )


def _worst_failure(report: Report, prefix: str) -> Any:
    failing = [c for c in report.comparisons if c.name.startswith(prefix) and not c.passed]
    return max(failing, key=lambda c: c.max_abs_diff, default=None)
