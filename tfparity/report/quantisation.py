"""The text section of ``crosscheck --quantize`` (``details["quantisation"]``): the
quantisation's error apart from the port's. Reads Report.details only; no numpy."""

from __future__ import annotations

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
        f"  {what}: KL mean {d['kl_mean']:.3g}, median {d['kl_median']:.3g}, p99 "
        f"{d['kl_p99']:.3g}, max {d['kl_max']:.3g}; same top-1 {100 * d['same_top1']:.1f}%; "
        f"RMS Δp {d['rms_dp']:.3g} ({d['positions']} positions over {d['items']} sequences)"
    ]
    v = d.get("budget")
    if v:
        terms = "; ".join(term_text(t, v["confidence"]) for t in v["terms"])
        lines.append(f"    {v['verdict']}{too_few_text(v, 'sequences')}: {terms}")
    return lines


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
