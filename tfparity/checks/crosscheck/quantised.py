"""``crosscheck --quantize``: the quantisation's error kept apart from the port's.

One report, three comparisons (docs/quantised.md, "Keras quantisation"):

(a) the float port against HF PyTorch: the cross-check as ever, judged by the float64
    referee (the port's own error);
(b) the quantised model against its own float model: llama.cpp's distribution
    statistics and their bootstrap verdict against the mode's budget (the error the
    quantisation adds), with a per-layer relative error table, ranked, naming the layer
    that quantises worst;
(c) the quantised model against HF PyTorch: the same statistics and verdict, what
    ships against the truth.

(a) and (b) decide; (c) is reported (it is (a) and (b) together). With ``--attribute``
each layer is also quantised alone and ranked by what it moves (:mod:`.attribution`).
Numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import Any

from ...adapters.interfaces.sides import Reference, TFSide
from ...compare import Comparison, failed_comparison
from ...compare.bootstrap import BootstrapVerdict, Limit, bootstrap_verdict
from ...compare.budgets import budgets_for
from ...compare.distribution import PositionMetrics, summarise
from ...compare.growth import LayerError, LayerOver, limits_text, over_limit, ranked_layers
from ...compare.quantisation import keras_kind
from ...inputs import Batch
from ...results import Divergence, Report
from ...trace import Trace, layer_of
from . import budgeted, distribution
from .attribution import Attribution, attribute, hint


def with_quantisation(
    report: Report,
    float_side: TFSide,
    quantised: TFSide,
    pt_model: Reference,
    batches: Sequence[Batch],
    mode: str,
    given: Sequence[Limit] | None = None,
    parts: Sequence[tuple[int | str, str]] = (),
    quantised_part: Callable[[str], TFSide] | None = None,
) -> Report:
    """``report`` (the float port's, (a)) with the quantised model's (b) and (c) added
    as ``details["quantisation"]``; (b) over its budget fails the report. With ``parts``
    and ``quantised_part`` (``--attribute``), each part quantised alone is ranked too
    (``details["quantisation"]["attribution"]``)."""
    limits, origin = budgets_for(keras_kind(mode)).kl_limits(given)
    masks = [b.attention_mask for b in batches]
    floats = [float_side.run(b) for b in batches]
    quants = [quantised.run(b) for b in batches]
    refs = [pt_model.run(b) for b in batches]
    head = float_side.head
    rows = ranked_layers(budgeted.growth(quants, floats, masks))
    vs_float = _judged(quants, floats, batches, head, limits)
    vs_pt = _judged(quants, refs, batches, head, limits)
    found: dict[str, Any] = {
        "mode": mode,
        "quantised": f"Keras model.quantize({mode!r}) on a copy of the float model",
        # a backbone has no distribution to budget: its hidden states' limit instead
        "budget": ", ".join(map(str, limits)) + f" ({origin})"
        if vs_float[0] is not None
        else f"{limits_text(mode)} (a backbone: judged by its hidden states)",
        "vs_float": _section(*vs_float),
        "vs_pytorch": _section(*vs_pt),
        "layers": [{**asdict(r), "growth": r.growth} for r in rows],
    }
    alone: Attribution | None = None
    if parts and quantised_part is not None:
        ranked = [r.layer for r in rows]
        alone = attribute(parts, quantised_part, floats, batches, head, ranked)
        found["attribution"] = alone.as_details()
    worst = budgeted.worst_text(rows)
    if worst:
        found["worst_layer"] = worst
    over = over_limit(rows, mode)
    found["growth"] = {
        "limit": limits_text(mode),
        "over": [asdict(o) for o in over],
        "verdict": "FAIL" if over else "PASS" if rows else "not judged",
    }
    found["judged"] = _judged_text(vs_float[0] is not None, rows, over, mode)
    failures = _failures(vs_float[1], mode, worst, hint(alone))
    failures += budgeted.growth_failures(over, f"quantised {mode} vs float", hint(alone))
    if vs_float[0] is None and not rows:  # "not judged" never ends in PASS
        failures.append(_unjudged(mode))
    divergence = report.first_divergence
    if failures and divergence is None and rows:
        k = over[0].hidden_state if over else rows[0].hidden_state
        named = f"; {over[0].text()}" if over else ""
        why = f"quantised {mode}: worst is {worst}{hint(alone)}{named}"
        divergence = Divergence(k, layer_of(k), None, why)
    return replace(
        report,
        passed=report.passed and not failures,
        comparisons=report.comparisons + failures,
        first_divergence=divergence,
        details={**report.details, "quantisation": found},
    )


def _judged_text(lm: bool, rows: Sequence[LayerError], over: list[LayerOver], mode: str) -> str:
    """What (b)'s verdict rests on: the per-layer growth, and an LM head's distribution."""
    if not rows:
        return "not judged: no hidden states to judge the quantisation by" + (
            "; only the LM head's distribution" if lm else " (FAIL: nothing judged it)"
        )
    verdict = f"FAIL, {over[0].text()}" if over else "PASS"
    head = "; and by the LM head's distribution above" if lm else " (a backbone: no LM head)"
    return f"judged by its hidden states: {limits_text(mode)}: {verdict}{head}"


def _unjudged(mode: str) -> Comparison:
    return failed_comparison(
        f"quantised {mode} vs float: not judged",
        "Nothing judged the quantised model: no LM head's distribution and no hidden "
        "states to hold to the per-layer budget (docs/quantised.md).",
        [0],
        "float64",
    )


def _judged(
    actual: list[Trace],
    expected: list[Trace],
    batches: Sequence[Batch],
    head: Any,
    limits: Sequence[Limit],
) -> tuple[PositionMetrics | None, BootstrapVerdict | None]:
    metrics = distribution.lm_distribution(actual, expected, batches, head)
    return metrics, None if metrics is None else bootstrap_verdict(metrics, limits)


def _section(metrics: PositionMetrics | None, verdict: BootstrapVerdict | None) -> dict:
    """The distribution statistics and verdict, as ``details["distribution"]`` holds them."""
    if metrics is None:
        return {}
    found: dict[str, Any] = asdict(summarise(metrics))
    if verdict is not None:
        found["budget"] = verdict.details()
    return found


def _failures(
    verdict: BootstrapVerdict | None, mode: str, worst: str | None, alone: str = ""
) -> list[Comparison]:
    """A failing row per term of (b) whose whole interval lies outside its budget,
    naming the layer that quantises worst (and, with ``--attribute``, ``alone``: the
    one that moves most quantised alone)."""
    if verdict is None:
        return []
    blame = (f"; the layer that quantises worst is {worst}" if worst else "") + alone
    return verdict.failures(
        f"quantised {mode} vs float: {{metric}} (logits)", budget=f"the {mode} budget", blame=blame
    )
