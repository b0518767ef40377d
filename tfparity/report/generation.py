"""Render a generate Report: one row per prompt (tokens agreed, the first divergent step
and both margins there, flips, the largest logit difference, the top-5 overlap, the
referee, the cache, the start from embeddings), then the steps of the first prompt that
fails (every prompt's with ``verbose``), the notes, the first divergence and the verdict.
Reads Report.details only; no numpy, no frameworks."""

from __future__ import annotations

from typing import Any

from ..results import Report
from .quantisation import distribution_lines
from .sections import table
from .text import divergence_lines

_FACTS = (
    "compares",
    "judge",
    "reference",
    "decoding",
    "prompts",
    "new_tokens",
    "kv_cache",
    "embeds_start",
)


def render_generation(report: Report, *, verbose: bool = False) -> str:
    d = report.details
    lines = [f"tfparity {report.check} · {report.model}"]
    lines += [f"  {k}: {d[k]}" for k in _FACTS if k in d]
    prompts: list[dict[str, Any]] = d.get("generation", [])
    lines += ["", *prompt_table(prompts)]
    failing = [p for p in prompts if _fails(p)]
    for p in prompts if verbose else failing[:1]:
        lines += ["", f"prompt {p['prompt']}, step by step (TF fed PyTorch's tokens):"]
        lines += step_table(p["steps"])
    lines += distribution_lines(d.get("distribution"))
    lines += _quantisation_lines(d.get("quantisation"))
    lines += [f"note: {n}" for n in report.notes]
    lines += divergence_lines(report)
    lines += ["", verdict(report)]
    return "\n".join(lines)


def verdict(report: Report) -> str:
    """``PASS generate: ...`` or ``FAIL generate: <the first failing part's problem>``."""
    d = report.details
    q = d.get("quantisation")
    if report.passed and q:
        return (
            f"PASS {report.check}: {d.get('prompts')} prompt(s) x {d.get('new_tokens')} new "
            f"tokens; quantised {q['mode']} within its budget, {q['tokens_agreed']} of "
            f"{q['tokens']} tokens agreed, the cache consistent"
        )
    if report.passed:
        prompts = d.get("generation", [])
        ties = sum(len(p["near_ties"]) for p in prompts)
        agreed = (
            "every token agrees" if not ties else f"tokens agree but for {ties} near-tie flip(s)"
        )
        return (
            f"PASS {report.check}: {d.get('prompts')} prompt(s) x {d.get('new_tokens')} new "
            f"tokens; {agreed}, the cache consistent"
        )
    bad = report.failures
    first = f"{bad[0].name}: {bad[0].problem}" if bad else "see above"
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"FAIL {report.check}: {first}{more}"


def _quantisation_lines(q: dict | None) -> list[str]:
    """``generate --quantize``: what was quantised, its budget and the token agreement."""
    if not q:
        return []
    return [
        f"quantisation: {q['quantised']}; budget {q['budget']}",
        f"  tokens agreed {q['tokens_agreed']} of {q['tokens']} (each prompt's run up to its "
        f"first divergence); {q['prompts_all_agreed']} prompt(s) agree throughout; reported, "
        "not judged: flips are expected where a quantised model's top two are close",
    ]


def headline(report: Report) -> str:
    """A failing :func:`~tfparity.assertions.assert_generation`'s first line: the verdict
    (pytest's summary line shows it) and the model."""
    return f"{verdict(report)} · {report.model}"


def rows(report: Report) -> list[str]:
    """The message's body, from the report's rows: the first divergence and its hint,
    then the prompt table."""
    return [
        *divergence_lines(report, gap=False),
        "",
        *prompt_table(report.details.get("generation", [])),
        "",
    ]


def _fails(p: dict[str, Any]) -> bool:
    return bool(p["defects"] or p["cache_failures"] or p["embeds_failures"])


def _ok(failing: list[int] | None, total: int) -> str:
    if failing is None:
        return "-"
    return "ok" if not failing else f"{len(failing)}/{total} FAIL"


def prompt_table(prompts: list[dict[str, Any]]) -> list[str]:
    header = (
        "prompt",
        "agreed",
        "first divergent step",
        "margins TF/PT",
        "flips (near-tie)",
        "max logit diff",
        "min top-5",
        "referee",
        "cache",
        "embeds",
    )
    rows = []
    for p in prompts:
        n, steps, first = p["new_tokens"], p["steps"], p["first_divergent_step"]
        flips = len(p["defects"]) + len(p["near_ties"])
        rows.append(
            (
                str(p["prompt"]),
                f"{p['tokens_agreed']}/{n}",
                f"{first['step']}: TF {first['tf_token']}, PT {first['pt_token']}{_why(first)}"
                if first
                else "-",
                f"{first['tf_margin']:.3g}/{first['pt_margin']:.3g}" if first else "-",
                f"{flips} ({len(p['near_ties'])})",
                f"{max(s['max_logit_diff'] for s in steps):.3g}",
                f"{min(s['top_k_overlap'] for s in steps):.0%}",
                _ok(p["referee_failures"], n),
                _ok(p["cache_failures"], n),
                _embeds(p, n),
            )
        )
    return table(header, rows)


def _embeds(p: dict[str, Any], n: int) -> str:
    """The start from inputs_embeds: its steps' verdict, or the same state as the ids."""
    if p.get("embeds_same_start"):
        return "ok (same state)"
    return _ok(p["embeds_failures"] if p["embeds_tokens"] is not None else None, n)


def _why(first: dict[str, Any]) -> str:
    """What the first divergence is: a near-tie, or a flip of TF's cached decoding only
    (recomputed without cache, TF chooses PyTorch's token)."""
    if first["near_tie"]:
        return " (near-tie)"
    return " (cache)" if first["recomputed_agrees"] else ""


def step_table(steps: list[dict[str, Any]]) -> list[str]:
    header = (
        "step",
        "TF",
        "PT",
        "TF fed PT's",
        "max logit diff",
        "top-5",
        "rmse/fp64 (allowed)",
        "margin TF/PT",
        "flip",
        "cache rmse (allowed)",
        "embeds rmse",
    )
    rows = [
        (
            str(s["step"]),
            str(s["tf_token"]),
            str(s["pt_token"]),
            str(s["forced_tf_token"]),
            f"{s['max_logit_diff']:.3g}",
            f"{s['top_k_overlap']:.0%}",
            f"{s['rmse_vs_fp64']:.3g} ({s['allowed_rmse']:.3g})"
            + ("" if s["refereed_ok"] else " FAIL"),
            f"{s['tf_margin']:.3g}/{s['pt_margin']:.3g}",
            s["flip"],
            _rmse(s["cache_rmse"], s["cache_allowed"], s["cache_ok"]),
            _rmse(s["embeds_rmse"], None, s["embeds_ok"]),
        )
        for s in steps
    ]
    return table(header, rows)


def _rmse(value: float | None, allowed: float | None, ok: bool | None) -> str:
    if value is None:
        return "-"
    bound = f" ({allowed:.3g})" if allowed is not None else ""
    return f"{value:.3g}{bound}" + ("" if ok else " FAIL")
