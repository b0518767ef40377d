"""The one renderer of distribution statistics and budget verdicts, for every report
that holds them: a cross-check's or ``generate``'s ``details["distribution"]``
(:func:`distribution_lines`), ``crosscheck --quantize``'s ``details["quantisation"]``
(:func:`quantisation_lines`: the quantisation's error apart from the port's), a
backend's distribution against the float model (:func:`backend_distribution_line`),
a sweep's summary (:func:`sweep_distribution_lines`), and the HTML page (which shows
these lines). Each verdict is :meth:`tfparity.compare.bootstrap.BootstrapVerdict.details`'s
one shape. Reads Report.details only; no numpy."""

from __future__ import annotations

from typing import Any

from .growth import growth_table


def quantisation_lines(q: dict | None) -> list[str]:
    """The mode and budget; (b) quantised vs its float model and (c) vs PyTorch, as
    distribution lines with their verdicts; the per-layer table, ranked."""
    if not q or not isinstance(q, dict):
        return []
    lines = [
        "",
        f"quantisation: {q['quantised']}; budget {q['budget']}",
        "  (a) the float port vs PyTorch: the tables above, judged by the referee",
    ]
    for key, what in (
        ("vs_float", "(b) quantised vs float"),
        ("vs_pytorch", "(c) quantised vs PyTorch"),
    ):
        lines.extend(_distribution(q.get(key) or {}, what))
    if q.get("judged"):
        lines.append(f"  {q['judged']}")
    rows = q.get("layers") or []
    if rows:
        table = growth_table(rows)
        lines.append("  layers ranked by the error each adds, quantised vs float:")
        lines.extend(f"  {line}" for line in table[1:])
    lines.extend(_attribution(q.get("attribution")))
    return lines


def _attribution(a: dict | None) -> list[str]:
    """``--attribute``'s table: each part quantised alone, ranked by what it moves."""
    if not a:
        return []
    overlap = a.get("top3_overlap")
    shared = "" if overlap is None else f"; its top 3 shares {overlap} with the table above's"
    lines = [
        f"  each layer quantised alone ({a['passes']} forward passes), ranked by "
        f"{a['metric']} vs float{shared}:",
        f"    {'rank':>4}  {'layer':<12} {'quantised':<24} {a['metric'].split()[0]:>10}",
    ]
    for row in a["layers"]:
        name = "embeddings" if row["layer"] == "embeddings" else f"layer {row['layer']}"
        lines.append(f"    {row['rank']:>4}  {name:<12} {row['path']:<24} {row['value']:>10.3g}")
    return lines


def _distribution(d: dict, what: str) -> list[str]:
    if not d:
        return []
    lines = [
        f"  {what}: {kl_text(d)}; RMS Δp {d['rms_dp']:.3g} ({d['positions']} positions over "
        f"{d['items']} sequences)"
    ]
    v = d.get("budget")
    if v:
        lines.append(f"    {v['verdict']}{too_few_text(v, 'sequences')}: {terms_text(v)}")
    return lines


def distribution_lines(d: dict | None) -> list[str]:
    """llama.cpp's KL statistics of the LM head's logits (docs/quantised.md), and the
    bootstrap verdict on them where a ``--kl-budget`` was set."""
    if not d:
        return []
    ratio = d.get("ln_ppl_ratio")
    ppl = "" if ratio is None else f"; ln(PPL(TF)/PPL(PyTorch)) {ratio:.3g}"
    items_are = d.get("items_are", "sequences")
    lines = [
        f"distribution ({_over(d)}{_count(d['positions'], d.get('positions_are', 'positions'))} "
        f"over {_count(d['items'], items_are)}): {kl_text(d)}; "
        f"RMS Δp {d['rms_dp']:.3g} (at the {d['dp_at']} {_unit(d)}){ppl}"
    ]
    v = d.get("budget")
    if v:
        more = " (run more items)" if v["verdict"] == "INCONCLUSIVE" else ""
        more = too_few_text(v, items_are) or more
        lines.append(
            f"distribution budget {v['verdict']}{more} over {_count(v['items'], items_are)}, "
            f"{v['resamples']} bootstrap resamples: {terms_text(v)}"
        )
    return lines


def backend_distribution_line(j: dict[str, Any]) -> str:
    """One backend's distribution against the float model (``tfparity backends
    --quantize`` on logits), each row of the output an item."""
    s = j["distribution"]
    v = s["budget"]
    return (
        f"distribution {j['backend']} vs {j['against']} ({s['positions']} positions over "
        f"{s['items']} rows): {kl_text(s, quantiles=False)}; budget {v['verdict']}"
        f"{too_few_text(v, 'rows')}: {terms_text(v, limit=False)}"
    )


def sweep_distribution_lines(spread: dict) -> list[str]:
    """A sweep's statistics per check that scored logits (exact over every position; the
    quantiles over the items' mean KL), and its budget's verdict."""
    lines = ["distribution (llama.cpp's KL statistics, PyTorch the reference):"]
    for name, d in spread.items():
        ppl = "" if d["ln_ppl_ratio"] is None else f", ln(PPL ratio) {d['ln_ppl_ratio']:.3g}"
        lines.append(
            f"  {name}: {d['positions']} positions over {d['items']} items: "
            f"{kl_text(d, quantiles=False, digits=2)}; RMS Δp {d['rms_dp']:.3g} (at the "
            f"{d['dp_at']}){ppl}; item-mean KL median {d['item_kl_median']:.3g}, p99 "
            f"{d['item_kl_p99']:.3g}"
        )
        budget = d.get("budget")
        if budget:
            lines += _sweep_budget(budget)
    return lines


def _sweep_budget(b: dict) -> list[str]:
    if not b["terms"]:
        return [f"    budget: {b['verdict']} ({b.get('note', 'nothing judged')})"]
    lines = [
        f"    budget: {b['verdict']}, {100 * b['confidence']:g}% bootstrap interval over "
        f"{b['items']} items ({b['resamples']} resamples)"
        + (
            f": too few for an interval; give at least {b['needed']}"
            if b.get("needed")
            else ": run more items to decide"
            if b["verdict"] == "INCONCLUSIVE"
            else ""
        )
    ]
    for t in b["terms"]:
        limit = t["limit"]
        interval = "no interval" if t["low"] is None else f"[{t['low']:.3g}, {t['high']:.3g}]"
        lines.append(
            f"      {limit['metric']} {t['value']:.3g} {interval} "
            f"vs {limit['bound']} {limit['value']:g}: {t['verdict']}"
        )
    return lines


def kl_text(d: dict, quantiles: bool = True, digits: int = 1) -> str:
    """``KL mean 7.41e-06, median ..., p99 ..., max ...; same top-1 100.0%`` (without
    the quantiles where they are not kept: a backend's, a sweep's)."""
    middle = f", median {d['kl_median']:.3g}, p99 {d['kl_p99']:.3g}" if quantiles else ""
    return (
        f"KL mean {d['kl_mean']:.3g}{middle}, max {d['kl_max']:.3g}; same top-1 "
        f"{100 * d['same_top1']:.{digits}f}%"
    )


def terms_text(v: dict, limit: bool = True) -> str:
    """Every term of the verdict ``v``, ``; ``-separated (:func:`term_text`)."""
    return "; ".join(term_text(t, v["confidence"], limit) for t in v["terms"])


def _count(n: int, plural: str) -> str:
    """``3 prompts``, ``1 prompt``."""
    return f"{n} {plural[:-1] if n == 1 and plural.endswith('s') else plural}"


def _over(d: dict) -> str:
    """``logits, `` or, for a classifier's, ``logits over labels, ``."""
    return "logits over labels, " if d.get("over") == "labels" else "logits, "


def _unit(d: dict) -> str:
    return "label" if d.get("over") == "labels" else "token"


def requantisation_lines(r: dict | None) -> list[str]:
    """The exact check of a stored quantised model (``details["requantisation"]``): one
    line where it reproduces its fresh quantisation, or why it was skipped; else the
    differing variables, each with what putting its fresh twin back does."""
    if not r or not isinstance(r, dict):
        return []
    fresh = f"{r.get('tool', 'Keras')}'s fresh {r['mode']} quantisation of {r['source']}"
    if r.get("skipped"):
        return ["", f"requantisation: not checked against {fresh}: {r['skipped']}"]
    if r.get("reproduces"):
        return ["", f"requantisation: reproduces {fresh}: {r['identical']} variables identical"]
    rows = r.get("differences") or []
    error = r.get("output_error")
    against = "" if error is None else f" ({r['output']} error to the fresh model {error:.3g})"
    lines = [
        "",
        f"requantisation: {len(rows)} of {r['compared']} variables differ from {fresh}{against}:",
        f"  {'block':<10} {'variable':<56} difference",
    ]
    for d in rows:
        block = "-" if d.get("block") is None else str(d["block"])
        effect = d.get("effect")
        after = "" if not effect else f"; error {effect['with_fresh']:.3g} with the fresh one"
        lines.append(f"  {block:<10} {d['path']:<56} {d['detail']}{after}")
    return lines


def term_text(t: dict, confidence: float, limit: bool = True) -> str:
    """One bootstrap term: ``kl_mean<=0.015 PASS (7.41e-06, 95% CI [7.09e-06, 7.88e-06])``;
    with too few items for an interval, ``... INCONCLUSIVE (0.957, no interval)``."""
    where = f"{t['limit']['metric']}{t['limit']['bound']}{t['limit']['value']:g}"
    where = where if limit else t["limit"]["metric"]
    if t.get("low") is None:
        return f"{where} {t['verdict']} ({t['value']:.3g}, no interval)"
    return (
        f"{where} {t['verdict']} ({t['value']:.3g}, {100 * confidence:g}% CI "
        f"[{t['low']:.3g}, {t['high']:.3g}])"
    )


def too_few_text(v: dict, items_are: str) -> str:
    """`` (1 sequence: too few for an interval; give at least 5)`` where the bootstrap
    had fewer items than it needs (``needed``), else empty."""
    needed = v.get("needed")
    if not needed:
        return ""
    n = v["items"]
    unit = items_are[:-1] if n == 1 and items_are.endswith("s") else items_are
    return f" ({n} {unit}: too few for an interval; give at least {needed})"
