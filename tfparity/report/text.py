"""Render a Report as a compact text table with a PASS/FAIL line."""

from __future__ import annotations

from dataclasses import replace

from ..compare import Comparison
from ..results import Divergence, Report, is_artefact
from ..trace import decoder_state_index, layer_of, layer_text
from .growth import growth_table, tensor_error_table
from .quantisation import distribution_lines, quantisation_lines, requantisation_lines

_HEADER = ("tensor", "max abs diff", "mean abs diff", "mismatched", "cosine", "verdict")


def render(report: Report, *, verbose: bool = False) -> str:
    """One row per compared tensor, worst first; the failure blocks when ``verbose``."""
    lines = [f"tfparity {report.check} · {report.model}"]
    for key, value in report.details.items():
        if isinstance(value, (str, int, float)):
            lines.append(f"  {key}: {value}")
    layers = report.details.get("layers")
    shown = report.comparisons
    if layers:
        decoder = decoder_rows(shown)  # a seq2seq LM's, after its encoder's
        lines.append("")
        lines.extend(layer_table(layers + decoder))
        tabled = "decoder_hidden_states[" if decoder else "hidden_states["
        shown = [c for c in shown if not c.name.startswith(("hidden_states[", tabled))]
    if shown:
        lines.append("")
        lines.extend(comparison_table(shown))
    growth = report.details.get("error_growth")
    if growth:
        lines.extend(["", *growth_table(growth)])
    errors = report.details.get("tensor_errors")
    if errors:
        lines.extend(["", *tensor_error_table(errors)])
    lines.extend(agreement_lines(report.details.get("agreement") or []))
    lines.extend(distribution_lines(report.details.get("distribution")))
    lines.extend(gold_lines(report.details.get("gold")))
    lines.extend(quantisation_lines(report.details.get("quantisation")))
    lines.extend(requantisation_lines(report.details.get("requantisation")))
    for note in report.notes:
        lines.append(f"note: {note}")
    lines.extend(divergence_lines(report))
    failing = report.failures
    if failing and verbose:
        lines.extend(["", *(_failure_block(c, twins) + "\n" for c, twins in grouped(failing))])
    elif failing:
        lines.extend(["", failing_summary(report)])
    lines.append("")
    lines.append(verdict_line(report))
    return "\n".join(lines)


def verdict_line(report: Report) -> str:
    """``PASS ...: 9 tensors compared; max abs diff ...``, or ``FAIL ...: 1 of 4 tensors
    differ; logits: shape [5, 3] vs [5, 2]``: a failure headlines its first failing
    tensor (:meth:`Report.worst`), however it failed; a failed label map or tokenizer
    comparison leads, by its first sentence (it compared no tensor)."""
    tensors = report.tensors
    n, bad = len(tensors), sum(not c.passed for c in tensors)
    worst = report.worst()
    lead = "".join(f"{c.problem.split('; ')[0]}; " for c in report.artefact_failures)
    worst_text = "" if worst is None else f"; {worst.headline()}"
    if report.passed:
        return f"PASS {report.check}: {n} {_tensors(n)} compared{worst_text}"
    differ = "differs" if n == 1 else "differ"
    d = report.first_divergence
    cause = f"; {d.cause}" if d is not None and d.cause else ""
    return f"FAIL {report.check}: {lead}{bad} of {n} {_tensors(n)} {differ}{worst_text}{cause}"


def _tensors(n: int) -> str:
    return "tensor" if n == 1 else "tensors"


def divergence_lines(report: Report, gap: bool = True) -> list[str]:
    """``first divergence: ...`` and its ``hint: ...``, as every text report words them
    (after a blank line where ``gap``); none where the runs never part."""
    d = report.first_divergence
    if d is None:
        return []
    hint = [f"hint: {d.hint}"] if d.hint else []
    return [""] * gap + [f"first divergence: {divergence_text(d)}", *hint]


def divergence_text(d: Divergence) -> str:
    """``hidden_states[2] · layer 1 · component intermediate``: where two runs part."""
    where = f" · component {d.component}" if d.component else " (sub-layers not tapped)"
    if d.layer == "output":  # no hidden state compared (an export's outputs alone, a
        # model of the user's own without a layer map)
        return "the outputs (no hidden state compared, so not localised to a layer)"
    if d.decoder_hidden_state is not None:  # past a seq2seq model's clean encoder
        k = d.decoder_hidden_state
        part = layer_text(k, "decoder embeddings", "decoder layer")
        return f"decoder_hidden_states[{k}] · {part}{where}"
    if d.hidden_state is None:  # every hidden state agrees: the pooler or the head
        return f"{d.layer} (past the last hidden state)"
    return f"hidden_states[{d.hidden_state}] · layer {d.layer}{where}"


def failing_summary(report: Report) -> str:
    """One failure's readable block: the first divergent hidden state when the check
    localised one, else the worst tensor (the rest are in the table and the JSON). A
    leaf identical to it (``last_hidden_state`` is ``hidden_states[-1]``) is named too."""
    groups = grouped(report.failures)
    d = report.first_divergence
    if d is not None and d.hidden_state is not None:
        first = [g for g in groups if g[0].name == f"hidden_states[{d.hidden_state}]"]
        if first:
            return named(*first[0]).message()
    worst = sorted(groups, key=lambda g: (g[0].problem is None, -g[0].max_abs_diff))[0]
    return _failure_block(*worst)


def _failure_block(c: Comparison, twins: list[str]) -> str:
    """A tensor's readable block; a label map's or a tokenizer's problem on one line (it
    compared no values)."""
    return f"{c.name}: {c.problem}" if is_artefact(c) else named(c, twins).message()


def grouped(comparisons: list[Comparison]) -> list[tuple[Comparison, list[str]]]:
    """Each distinct comparison once, in order, with the names of the later ones that
    are identical to it but for the name (``last_hidden_state`` and ``hidden_states[-1]``
    are one tensor: one failure block, naming both)."""
    groups: list[tuple[Comparison, list[str]]] = []
    for c in comparisons:
        bare = replace(c, name="")
        for first, twins in groups:
            if replace(first, name="") == bare:
                twins.append(c.name)
                break
        else:
            groups.append((c, []))
    return groups


def named(c: Comparison, twins: list[str], *, first: str | None = None) -> Comparison:
    """``c`` named after itself (or ``first``) and its twins, two at most:
    ``hidden_states[2] = last_hidden_state``."""
    names = [first or c.name, *twins]
    if len(names) == 1:
        return c
    more = f" (and {len(names) - 3} more identical)" if len(names) > 3 else ""
    return replace(c, name=" = ".join(names[:3]) + more)


def comparison_table(comparisons: list[Comparison]) -> list[str]:
    rows = [_row(c) for c in sorted(comparisons, key=worst_first)]
    widths = [max(len(r[i]) for r in [_HEADER, *rows]) for i in range(len(_HEADER))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return [fmt.format(*_HEADER), *(fmt.format(*r) for r in rows)]


def worst_first(c: Comparison) -> tuple:
    return (c.passed, c.problem is None, -c.max_abs_diff)


def _row(c: Comparison) -> tuple[str, ...]:
    cosine = "n/a" if c.cosine is None else f"{c.cosine:.6f}"
    verdict = "ok" if c.passed else ("FAIL: " + _short(c.problem) if c.problem else "FAIL")
    return (
        c.name,
        f"{c.max_abs_diff:.3g}",
        f"{c.mean_abs_diff:.3g}",
        f"{c.mismatched}/{c.total}",
        cosine,
        verdict,
    )


def _short(problem: str) -> str:
    return problem.split(":")[0].lower()


_LAYER_HEADER = (
    "hidden",
    "layer",
    "max abs diff",
    "mean abs diff",
    "cosine",
    "TF rmse/fp64",
    "PT rmse/fp64",
    "accumulated",
    "isolated",
    "verdict",
)


def layer_table(rows: list[dict]) -> list[str]:
    """The cross-check's per-layer table: accumulated error vs each layer's own error."""

    def flag(ok):
        return "-" if ok is None else ("ok" if ok else "DIVERGES")

    def num(x, fmt=".3g"):
        return "-" if x is None else format(x, fmt)

    body = [
        (
            str(r["hidden_state"]),
            str(r["layer"]),
            num(r["max_abs_diff"]),
            num(r["mean_abs_diff"]),
            num(r["cosine"], ".6f"),
            num(r["rmse_vs_fp64"]),
            num(r["reference_rmse_vs_fp64"]),
            flag(r["accumulated_ok"]),
            flag(r["isolated_ok"]),
            "ok" if r["passed"] else "FAIL",
        )
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [_LAYER_HEADER, *body]) for i in range(len(_LAYER_HEADER))]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return [fmt.format(*_LAYER_HEADER), *(fmt.format(*r) for r in body)]


def decoder_rows(comparisons: list[Comparison]) -> list[dict]:
    """A seq2seq decoder's hidden states as rows of the per-layer table (``decoder 0`` its
    embeddings, ``decoder k`` decoder layer k-1's output), so its layers read in order
    under the encoder's rather than scattered worst-first among the outputs. They are
    judged whole, teacher-forced: no taps, no isolated runs (those columns are ``-``)."""
    decoder = [c for c in comparisons if decoder_state_index(c.name) is not None]
    rows = []
    for c in sorted(decoder, key=lambda c: decoder_state_index(c.name)):
        k = decoder_state_index(c.name)
        referee = c.referee or {}
        rows.append(
            {
                "hidden_state": f"decoder {k}",
                "layer": layer_of(k),
                "max_abs_diff": c.max_abs_diff,
                "mean_abs_diff": c.mean_abs_diff,
                "cosine": c.cosine,
                "rmse_vs_fp64": referee.get("actual_rmse"),
                "reference_rmse_vs_fp64": referee.get("reference_rmse"),
                "accumulated_ok": None,
                "isolated_ok": None,
                "passed": c.passed,
            }
        )
    return rows


def agreement_lines(agreement: list[dict]) -> list[str]:
    """Task-level agreement (labels, spans, top-1) under the tables; each flip with both
    margins, a near-tie said as one."""
    lines = []
    for a in agreement:
        if a["measure"] == "top-5 overlap":
            share = f"{a['agree'] / max(a['total'], 1):.1%} of the 5 top tokens shared"
            lines.append(f"top-5 overlap ({a['output']}): {share}")
            continue
        lines.append(f"{a['measure']} agreement ({a['output']}): {a['agree']:g}/{a['total']}")
        for f in a["flips"]:
            kind = (
                "a near-tie (both margins within the judge's noise)"
                if f["near_tie"]
                else ("not a near-tie")
            )
            lines.append(
                f"  flip at {list(f['where'])}: TF {f['tf']}, PyTorch {f['pt']}; margins TF "
                f"{f['tf_margin']:.3g}, PyTorch {f['pt_margin']:.3g}: {kind}"
            )
        if a["flip_count"] > len(a["flips"]):
            lines.append(f"  ... {a['flip_count']} flips in all, {a['near_ties']} at near-ties")
    return lines


def gold_lines(g: dict | None) -> list[str]:
    """Each side's accuracy on ``--labels`` and the flips between them."""
    if not g:
        return []
    lines = [
        f"accuracy on --labels ({g['output']}, {g['total']} texts): TF {g['tf_correct']}/"
        f"{g['total']}, PyTorch {g['pt_correct']}/{g['total']}; flips: "
        f"{g['correct_to_wrong']} correct->wrong, {g['wrong_to_correct']} wrong->correct"
    ]
    for f in g["flips"]:
        lines.append(f"  text {f['text']}: label {f['label']}, TF {f['tf']}, PyTorch {f['pt']}")
    shown = len(g["flips"])
    if g["correct_to_wrong"] + g["wrong_to_correct"] > shown:
        lines.append(f"  ... {g['correct_to_wrong'] + g['wrong_to_correct']} flips in all")
    return lines
