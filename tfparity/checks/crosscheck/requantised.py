"""The exact check of a stored Keras-quantised model: does it reproduce a fresh
quantisation of its float source? (docs/quantised.md, "Reproducing the quantisation").

The adapter (:func:`tfparity.adapters.keras_hub.requantise.fresh_twin`) quantises the
source afresh in the file's modes and pairs the variables by path; here each pair is
judged (:mod:`tfparity.compare.requantisation`), and each differing variable's effect is
measured: the fresh twin is put back into the stored model, one variable at a time, and
the output's error to the fresh model's is taken again (one forward pass per differing
variable, none when every variable reproduces). Any differing variable fails the report,
its failing row and hint naming the block and the variable. Numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from ...compare import failed_comparison
from ...compare.requantisation import Requantisation, VariableDifference, compare_requantised
from ...inputs import Batch
from ...results import Divergence, Report
from ...trace import Trace

OUTPUTS = ("logits", "last_hidden_state", "sequence_output")


def with_requantisation(report: Report, twin: Any, batches: Sequence[Batch]) -> Report:
    """``report`` with ``details["requantisation"]``: the stored model's variables against
    their fresh twins (``twin``: a FreshTwin, or None where the side is not quantised by
    Keras); failed where any differs."""
    if twin is None:
        return report
    found: dict[str, Any] = {
        "source": twin.source,
        "tool": twin.tool,
        "mode": twin.mode,
        "layers": _mode_counts(twin.layers),
        "skipped": twin.skipped,
        "calibration": twin.calibration,
    }
    if twin.skipped:
        return replace(report, details={**report.details, "requantisation": found})
    judged = compare_requantised(twin.stored, twin.fresh)
    for d in judged.differences:
        d.effect = None
    output, before = None, None
    if judged.differences:
        output, before = _effects(twin, judged, batches)
    found.update(
        reproduces=judged.reproduces,
        compared=judged.compared,
        identical=judged.identical,
        output=output,
        output_error=before,
        differences=[asdict(d) | {"block": _block(d.path, twin.parts)} for d in judged.differences],
    )
    failures = [_failure(d, twin) for d in judged.differences]
    divergence = report.first_divergence
    if failures:
        worst = max(judged.differences, key=lambda d: (d.effect or {}).get("drop", -1.0))
        divergence = _divergence(worst, twin, len(failures))
    return replace(
        report,
        passed=report.passed and not failures,
        comparisons=report.comparisons + failures,
        first_divergence=divergence,
        details={**report.details, "requantisation": found},
    )


def _effects(
    twin: Any, judged: Requantisation, batches: Sequence[Batch]
) -> tuple[str | None, float | None]:
    """The output's relative error, stored vs fresh, and per differing variable the
    same with its fresh twin put back (``effect``)."""
    fresh = [twin.run_fresh(b) for b in batches]
    stored = [twin.run_stored(b) for b in batches]
    name = next((n for n in OUTPUTS if n in fresh[0] and n in stored[0]), None)
    if name is None:
        return None, None
    before = _error(stored, fresh, name, batches)
    for d in judged.differences:
        if d.kind in ("shape", "dtype", "missing", "transposed"):
            continue  # another shape or kind: nothing to put back in its place
        with twin.put_back(d.path):
            after = _error([twin.run_stored(b) for b in batches], fresh, name, batches)
        d.effect = {"output": name, "error": before, "with_fresh": after, "drop": before - after}
    return name, before


def _error(
    actual: list[Trace], expected: list[Trace], name: str, batches: Sequence[Batch]
) -> float:
    """RMS of the difference over the expected RMS, at the real tokens."""
    diff = total = 0.0
    for a, e, b in zip(actual, expected, batches, strict=True):
        keep = np.asarray(b.attention_mask, dtype=bool)
        x, y = np.asarray(a[name], np.float64)[keep], np.asarray(e[name], np.float64)[keep]
        diff += float(((x - y) ** 2).sum())
        total += float((y**2).sum())
    return float(np.sqrt(diff / total)) if total > 0 else float(np.sqrt(diff))


def _block(path: str, parts: dict[str, int | str]) -> int | str | None:
    """The block (an index, or ``embeddings``) a variable's path lies in."""
    for prefix, part in parts.items():
        if path == prefix or path.startswith(prefix + "/"):
            return part
    return None


def _where(d: VariableDifference, twin: Any) -> str:
    block = _block(d.path, twin.parts)
    if block is None:
        return d.path
    named = f"the {block}" if isinstance(block, str) else f"block {block}"
    return f"{named}'s {d.path}"


def _effect_text(d: VariableDifference) -> str:
    e = d.effect
    if not e:
        return ""
    return (
        f"; putting the fresh one back takes the {e['output']} error to the fresh model "
        f"from {e['error']:.3g} to {e['with_fresh']:.3g}"
    )


def _failure(d: VariableDifference, twin: Any) -> Any:
    return failed_comparison(
        f"requantised {d.path}",
        f"{_where(d, twin)}: {d.detail}, where {twin.tool}'s fresh {twin.mode} quantisation of "
        f"{twin.source} differs{_effect_text(d)}.",
        [d.total],
        "float32",
    )


def _divergence(first: VariableDifference, twin: Any, count: int) -> Divergence:
    """Where the stored file parts from its fresh quantisation: the first differing
    variable's block (hidden state k+1 for block k)."""
    block = _block(first.path, twin.parts)
    k = 0 if block == "embeddings" else (block + 1 if isinstance(block, int) else None)
    layer = block if block is not None else "embeddings"
    component = "head" if block == "head" else None  # a pooler's or an LM head's weight
    more = f" (and {count - 1} more variables)" if count > 1 else ""
    hint = (
        f"not {twin.tool}'s fresh {twin.mode} quantisation of {twin.source}: "
        f"{_where(first, twin)}: {first.detail}{more}{_effect_text(first)}"
    )
    return Divergence(k, layer, component, hint)


def _mode_counts(layers: dict[str, str]) -> dict[str, int]:
    """How many layers are quantised in each mode."""
    counts: dict[str, int] = {}
    for mode in layers.values():
        counts[mode] = counts.get(mode, 0) + 1
    return counts
