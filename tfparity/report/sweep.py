"""The terminal summary of a sweep (or of merged shards): a few lines from
``summary.json``'s figures; the full figures stay in the file. Plain dicts only."""

from __future__ import annotations

from .quantisation import sweep_distribution_lines


def render_summary(summary: dict, out: str, strict: bool = False) -> str:
    """A few lines for the terminal; the full figures are in summary.json. ``strict``:
    ``--strict``, under which a skipped item fails the sweep."""
    run = summary.get("run", {})
    lines = [
        f"tfparity sweep · {summary['model']}",
        f"  corpus: {summary['corpus']['path']} ({summary['corpus']['items']} items)",
        f"  items: {summary['items']}  passed: {summary['passed']}  failed: {summary['failed']}"
        f"  skipped: {summary['skipped']}  complete: {summary['complete']}",
    ]
    if "merged_from" in run:
        lines.append(
            f"  merged from {len(run['merged_from'])} shard outputs ({', '.join(run['shards'])}); "
            f"their runs took {run['seconds']} s, traces {run['traces']}"
        )
    elif "seconds" in run:
        lines.append(
            f"  this run: {run.get('items_this_run', '-')} items in {run['seconds']} s "
            f"({run.get('items_per_second')} items/s, tracing included; loading "
            f"{run.get('load_seconds')} s), traces {run.get('traces')}"
        )
    if "execution" in run:
        generate = f"; generate: {run['generate_execution']}" if "generate_execution" in run else ""
        lines.append(
            f"  ran: {run['execution']} on {run.get('device', 'default')}, "
            f"precision {run.get('precision', 'fp32')}{generate}"
        )
    if run.get("pt_config"):  # never read as the checkpoint's own verdicts
        changed = ", ".join(f"{k}={v!r}" for k, v in run["pt_config"].items())
        lines.append(
            f"  reference: PyTorch built with {changed} (--pt-config), not the checkpoint's "
            "own config"
        )
    referee = run.get("referee")
    if referee:
        lines.append(
            f"  referee: {referee['referee']}, float64 pass for {referee['items_fp64']} of "
            f"{referee['items']} items"
            + (
                f" (assumption violations {referee['assumption_violations']}, "
                f"disagreements {referee['disagreements']})"
                if referee["referee"] in ("calibrated", "lazy")  # "lazy": older summaries
                else ""
            )
        )
    lines.append("")
    lines.append(
        f"{'check':<11}{'passed':>8}{'failed':>8}{'n/a':>6}{'p50':>11}{'p99':>11}"
        f"{'max':>11}{'top-1':>9}"
    )
    for name, c in summary["per_check"].items():
        d = c["max_abs_diff"]
        top1 = "n/a" if c["top1_agreement"] is None else f"{100 * c['top1_agreement']:.1f}%"
        lines.append(
            f"{name:<11}{c['passed']:>8}{c['failed']:>8}{c['not_applicable']:>6}"
            f"{_g(d['p50']):>11}{_g(d['p99']):>11}{_g(d['max']):>11}{top1:>9}"
        )
    notes = {c["top1_note"] for c in summary["per_check"].values() if c["top1_note"]}
    lines += [f"note: top-1: {n}" for n in sorted(notes)]
    if "generation" in summary:
        lines += [""] + _generation(summary["generation"], run.get("decoding"))
    if summary.get("distribution"):
        lines += [""] + sweep_distribution_lines(summary["distribution"])
    # passed is None for a skipped item (too long): it is counted as skipped, not failed
    bad = [w for w in summary["worst_items"] if w["passed"] is False][:5]
    if bad:
        lines.append("")
        lines.append("failed items (worst first):")
        for w in bad:
            diffs = ", ".join(f"{k} {_g(v)}" for k, v in w["max_abs_diff"].items())
            lines.append(f"  #{w['index']} [{w['id']}] {diffs}{_parted(w)}: {w['text'][:70]}")
    if summary["skipped"]:
        lines.append(
            f"note: {summary['skipped']} items skipped as too long for the model "
            "(see 'skipped' in results.jsonl; --truncate cuts them)"
        )
    over = _over_budget(summary)  # as sweep.summary.sweep_passed, which decides the exit
    unchecked = strict and summary["skipped"] > 0
    passed = summary["failed"] == 0 and summary["complete"] and not over and not unchecked
    lines.append("")
    lines.append(
        f"{'PASS' if passed else 'FAIL'} sweep: {_counts(summary, strict)}{over}; see {out}/"
    )
    return "\n".join(lines)


def _counts(summary: dict, strict: bool) -> str:
    """``9/9 items passed``; where items were skipped, how many of all were not checked,
    so that a PASS over part of a corpus does not read as a PASS over all of it."""
    skipped, items = summary["skipped"], summary["items"]
    if not skipped:
        return f"{summary['passed']}/{items} items passed"
    then = "--strict fails on them" if not strict else "--strict: a FAIL"
    return (
        f"{summary['passed']}/{items - skipped} items checked passed, {skipped} of {items} "
        f"not checked (too long for the model; --truncate cuts them, {then})"
    )


def _over_budget(summary: dict) -> str:
    failed = [
        name
        for name, d in summary.get("distribution", {}).items()
        if d.get("budget", {}).get("verdict") == "FAIL"
    ]
    return f"; --kl-budget FAIL ({', '.join(failed)})" if failed else ""


def _generation(g: dict, decoding: str | None) -> list[str]:
    """The generate check over the corpus: token agreement, where tokens part and why;
    ``decoding`` says what the tokens are (a seq2seq decoder's, from the run facts)."""
    agreement = "-" if g["token_agreement"] is None else f"{100 * g['token_agreement']:.1f}%"
    v, first = g["verdicts"], g["first_divergent_step"]
    lines = [
        f"generate: {g['new_tokens']} new tokens per item, greedy, TF generate vs PyTorch "
        "generate, each through its own KV cache",
        *([f"  decoding: {decoding}"] if decoding else []),
        f"  tokens agreed: {g['tokens_agreed']}/{g['tokens']} ({agreement}); items with "
        f"every token agreed: {g['items_all_agreed']}/{g['items']}",
    ]
    if g["items_diverged"]:
        steps = ", ".join(f"{k}: {n}" for k, n in first["histogram"].items())
        lines.append(
            f"  items whose tokens part: {g['items_diverged']}; first divergent step min "
            f"{first['min']}, median {first['median']:g}, max {first['max']} (step: items "
            f"{steps})"
        )
    lines.append(
        f"  why: near-tie {v['near-tie']} (rounding, not a defect), defect {v['defect']}, "
        f"cache {v['cache']}; cache inconsistent in {g['items_cache_inconsistent']} items"
    )
    if g["items_logits_off"]:
        lines.append(
            f"  teacher-forced logits beyond the float64 referee in {g['items_logits_off']} "
            "items (beyond the near-tie noise they fail the item though no token flips; the "
            "cross-check shows where the logits part)"
        )
    return lines


def _parted(worst: dict) -> str:
    g = worst.get("generation")
    if not g or g["first_divergent_step"] is None:
        return ""
    return f" (tokens part at step {g['first_divergent_step']}, {g['verdict']})"


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"
