"""The cross-backend check: one Keras 3 model's layers on each backend, judged by a
float64 referee (numpy only; the processes are :mod:`tfparity.adapters.keras_backends`).

The rule, per layer and backend, is :class:`~tfparity.compare.judge.CrossBackendReferee`;
this module runs it over every layer, adds the half-precision scale test below, and
names the first divergence.

``floor`` and ``ceiling`` are set for float32 layers. A layer that computes in float16
or bfloat16 (a ``mixed_float16`` / ``mixed_bfloat16`` policy), or comes after one, has
them in units of that dtype's rounding (:func:`tfparity.compare.rounding.widened`): its
dtype policy is read from what each backend's process recorded of the layer.

A half-precision layer's RMSE bound is a few units of its rounding, so a one-backend
fault of 0.1% (two float16 units) passes it. Such a layer is also held to its scale:
a backend whose output, fitted to the truth by least squares
(:func:`tfparity.compare.scale.scale_fit`), is ``s`` times it with ``s`` standing from 1,
and from every other backend's scale, by more than both :data:`SCALE_STANDARD_ERRORS`
standard errors and :data:`SCALE_FLOOR_UNITS` units of the dtype's rounding fails,
``scaled``. Rounding to nearest varies from element to element and is nearly
unbiased; a fault that scales an output is neither. Float32 layers are not held so:
there a unit is 6e-8, and kernels' own biases (JAX's ``tanh``, a LayerNorm's
reductions) reach up to 2 units at many standard errors, harmless.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Any

import numpy as np

from ..compare import Comparison
from ..compare.judge import DEFAULT_CEILING, CrossBackendReferee, Referee
from ..compare.referee import unthreaded_rmse
from ..compare.rounding import HALF, UNIT_ROUNDOFF, coarsest, compute_dtype, widened
from ..compare.scale import ScaleFit, scale_fit
from ..results import Divergence, Report
from .hints import layer_hints

# A half-precision layer's scale s against the truth must stand from 1, and from every
# other backend's, by more than both to fail. Standard errors: the errors of
# neighbouring elements are not independent (they share inputs and rounded weights), so
# the formula's error is optimistic. Clean layers of 512 to 2048 elements stand up to
# 4.3 of them from 1, larger ones up to 11 (a real bias of 0.1 to 0.2 units, which the
# floor keeps), 6-element heads up to 6.2 (1.6 units, every backend alike: the
# "apart" test keeps it); 6 stands above noise while a 0.1% float16 fault stands at
# 28 or more over 512 elements.
SCALE_STANDARD_ERRORS = 6.0
# Units of the dtype's unit roundoff. Clean layers' scales reach 0.9 units from 1 under
# float16 and 1.8 under bfloat16 (a small head, every backend alike: rounding they
# share), and 0.6 from each other (measured on the example classifier and a two-block
# MultiHeadAttention encoder, docs/backends.md); a 0.1% float16 fault is 2 units,
# bfloat16's smallest skew (1/128) 2.
SCALE_FLOOR_UNITS = 1.0


@dataclass(frozen=True)
class BackendOutputs:
    """What the check judges: each backend's float32 outputs by layer (topological
    order), the float64 truth and the backend that computed it."""

    model: str
    float32: Mapping[str, Mapping[str, np.ndarray]]
    truth: Mapping[str, np.ndarray]
    referee_backend: str
    precision: Mapping[str, Any] = field(default_factory=dict)
    notes: Sequence[str] = ()
    # Who the truth is when it is not the same model at float64 (Hugging Face PyTorch
    # for a keras-hub port): a shared departure then indicts the port, not a dtype.
    referee_label: str = ""
    # Per backend, per layer: class, bases, dtype policy, config keys (the worker's
    # layer_facts), read for the first divergence's hints.
    layer_facts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Each sublayer tap's graph layer (a tap is a layer inside it, recorded by its path):
    # reported as the row's ``parent``.
    parents: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LayerJudgement:
    """One layer: each backend's comparison to the truth, and who failed."""

    layer: str
    comparisons: dict[str, Comparison]
    spread: float = 0.0  # the largest RMSE between two backends' outputs
    scale: float = 0.0  # the truth's RMS
    rounding: str = "float32"  # the dtype its error rounds like (:func:`layer_roundings`)
    # Half-precision layers: each backend's scale against the truth, and the backends
    # that fail by their scale alone (their RMSE within its bound).
    fits: dict[str, ScaleFit] = field(default_factory=dict)
    scaled: tuple[str, ...] = ()

    @property
    def failing(self) -> list[str]:
        return [b for b, c in self.comparisons.items() if not c.passed]


def judge_layer(
    layer: str,
    outputs: Mapping[str, np.ndarray],
    truth: np.ndarray,
    referee: Referee,
    ceiling: float,
    rounding: str = "float32",
    scale: float | None = None,
) -> LayerJudgement:
    """Every backend's output of ``layer`` against the truth, by
    :class:`CrossBackendReferee`, its floor and ceiling those of a layer rounding like
    ``rounding``; ``scale``, the RMS that the floor and the ceiling are measured in, is
    the truth's own unless given (a gradient that is zero in exact arithmetic is
    measured in its layer's other gradients: :mod:`.gradients`)."""
    floor, ceiling = widened(referee.floor, ceiling, rounding)
    if scale is None:
        scale = unthreaded_rmse(truth, np.zeros_like(truth))
    judge = CrossBackendReferee(replace(referee, floor=floor), ceiling, scale=scale)
    errors = {
        b: unthreaded_rmse(a, truth) if np.shape(a) == np.shape(truth) else np.inf
        for b, a in outputs.items()
    }
    judged = {}
    for backend, actual in outputs.items():
        others = tuple(e for o, e in errors.items() if o != backend)
        judged[backend] = replace(judge, others=others).judge(
            f"{backend}:{layer}", [actual], [truth]
        )
    shaped = [a for a in outputs.values() if np.shape(a) == np.shape(truth)]
    spread = max((unthreaded_rmse(a, b) for a, b in combinations(shaped, 2)), default=0.0)
    fits = _fits(outputs, truth) if rounding in HALF else {}
    floor = scale_floor(rounding)
    scaled = tuple(b for b in fits if judged[b].passed and _parts_in_scale(b, fits, floor))
    judged |= {b: replace(judged[b], passed=False) for b in scaled}
    return LayerJudgement(layer, judged, spread, scale, rounding, fits, scaled)


def _fits(outputs: Mapping[str, np.ndarray], truth: np.ndarray) -> dict[str, ScaleFit]:
    """Each backend's scale against the truth, where one means something."""
    found = {b: scale_fit(a, truth) for b, a in outputs.items()}
    return {b: f for b, f in found.items() if f is not None}


def _parts_in_scale(backend: str, fits: Mapping[str, ScaleFit], floor: float) -> bool:
    """Whether ``backend``'s scale stands from 1 and from every other backend's (by
    more than ``floor`` and :data:`SCALE_STANDARD_ERRORS`): rounding that every backend
    shares (the same float16 weights and inputs) can move a small layer's scale from
    the truth's by a unit or two, but moves every backend's alike."""
    fit, k = fits[backend], SCALE_STANDARD_ERRORS
    others = [f for b, f in fits.items() if b != backend]
    return fit.departs(floor, k) and all(fit.parts_from(o, floor, k) for o in others)


def scale_floor(rounding: str) -> float:
    """How far from 1 a layer's scale may stand for rounding like ``rounding`` alone
    (:data:`SCALE_FLOOR_UNITS` units of its unit roundoff)."""
    return SCALE_FLOOR_UNITS * UNIT_ROUNDOFF.get(rounding, UNIT_ROUNDOFF["float32"])


def layer_roundings(
    layers: Sequence[str], layer_facts: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """Per recorded name (topological order), the dtype its error rounds like: the
    coarsest compute dtype of its layer's policy and every layer's before it (rounding
    flows downstream: a float32 head after float16 layers carries their error). The
    policies are the file's, the same on every backend: the first backend's are read."""
    facts = next(iter(layer_facts.values()), {})
    found, upstream = {}, "float32"
    for name in layers:
        upstream = coarsest([upstream, compute_dtype(_facts_for(name, facts).get("dtype_policy"))])
        found[name] = upstream
    return found


def layer_policies(layer_facts: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """How many layers (sublayers too) hold each dtype policy (the first backend's)."""
    facts = next(iter(layer_facts.values()), {})
    counted: dict[str, int] = {}
    for f in facts.values():
        policy = str(f.get("dtype_policy"))
        counted[policy] = counted.get(policy, 0) + 1
    return counted


def _facts_for(name: str, facts: Mapping[str, Any]) -> Mapping[str, Any]:
    """A recorded name's layer facts: ``layer``, ``layer/k`` (its k-th output),
    ``layer#k`` (its k-th call), or a sublayer tap's path."""
    called = name.split("#", 1)[0]
    for key in (called, called.rsplit("/", 1)[0], called.split("/", 1)[0]):
        if key in facts:
            return facts[key]
    return {}


def check_backends(
    outputs: BackendOutputs, referee: Referee = Referee(), ceiling: float = DEFAULT_CEILING
) -> Report:
    """Judge every backend layer by layer against the float64 truth; the first layer
    (topological order) where a backend fails is the first divergence, naming the
    backend (the one furthest from the truth) and whether it parts from the others or
    every backend parts from the referee together."""
    layers = list(outputs.truth)
    roundings = layer_roundings(layers, outputs.layer_facts)
    judgements = [
        judge_layer(
            layer,
            {b: run[layer] for b, run in outputs.float32.items() if layer in run},
            outputs.truth[layer],
            referee,
            ceiling,
            roundings[layer],
        )
        for layer in layers
    ]
    report = Report(check="backends", model=outputs.model, passed=True, notes=list(outputs.notes))
    report.comparisons = [c for j in judgements for c in j.comparisons.values()]
    report.passed = all(c.passed for c in report.comparisons)
    report.details = {
        "backends": list(outputs.float32),
        "referee": {"backend": outputs.referee_backend, "dtype": "float64"},
        "judge": CrossBackendReferee(referee, ceiling).describe()
        + half_text(set(roundings.values()), referee, ceiling),
        "ceiling": ceiling,
        "dtype_policies": layer_policies(outputs.layer_facts),
        "layers": [layer_row(j, outputs.parents.get(j.layer)) for j in judgements],
        "precision": dict(outputs.precision),
        "first_divergence": None,
    }
    first = next((j for j in judgements if j.failing), None)
    if first is not None:
        report.details["first_divergence"] = divergence_facts(
            first, list(outputs.float32), outputs.referee_backend, outputs.referee_label
        )
        report.details["first_divergence"]["hints"] = layer_hints(
            first.layer,
            first.failing,
            outputs.layer_facts,
            outputs.precision,
            shared=report.details["first_divergence"]["kind"] == "all",
        )
        report.first_divergence = Divergence(
            hidden_state=None,
            layer=first.layer,
            component=None,
            hint=report.details["first_divergence"]["text"],
        )
    return report


def layer_row(j: LayerJudgement, parent: str | None = None) -> dict[str, Any]:
    """One table row: per backend, max abs diff and RMSE relative to the truth's RMS;
    ``parent``, for a sublayer tap, the graph layer that holds it."""
    cells = {}
    for backend, c in j.comparisons.items():
        bound = c.referee or {}
        cells[backend] = {
            "max_abs_diff": c.max_abs_diff,
            "rmse": bound.get("actual_rmse"),
            "relative_rmse": _ratio(bound.get("actual_rmse"), j.scale),
            "allowed_rmse": bound.get("allowed_rmse"),
            "passed": c.passed,
            "problem": c.problem,
        }
        if backend in j.fits:
            fit = j.fits[backend]
            cells[backend] |= {"scale": fit.scale, "scale_error": fit.error}
            cells[backend]["scaled"] = backend in j.scaled
    row = {"layer": j.layer, "backends": cells, "spread_rmse": j.spread, "rms": j.scale}
    row["rounding"] = j.rounding
    return row | ({"parent": parent} if parent else {})


def half_text(roundings: set[str], referee: Referee, ceiling: float) -> str:
    """What the judge line adds for layers rounding in half precision: their floor and
    ceiling (empty where every layer rounds like float32)."""
    parts = []
    for dtype in sorted(roundings & {"float16", "bfloat16"}):
        floor, top = widened(referee.floor, ceiling, dtype)
        parts.append(f"{dtype} layers and those after them floor {floor:.2g}, ceiling {top:.2g}")
    if not parts:
        return ""
    return (
        f"; in units of their rounding, {'; '.join(parts)}; and their scale against the "
        f"referee within {SCALE_STANDARD_ERRORS:g} standard errors or {SCALE_FLOOR_UNITS:g} "
        "unit of rounding of 1 or of another backend's"
    )


def _ratio(rmse: float | None, scale: float) -> float | None:
    """RMSE over the truth's RMS (None where either is missing or the truth is zero)."""
    return None if rmse is None or not scale else rmse / scale


def divergence_facts(
    j: LayerJudgement, backends: list[str], referee: str, label: str = ""
) -> dict[str, Any]:
    """Who parts at the first divergent layer: ``kind`` ``one`` (some backends part
    from the rest, which agree with the truth), ``scaled`` (as ``one``, but found by
    their scale alone: a half-precision layer, :func:`judge_layer`) or ``all`` (every
    backend parts from the float64 referee, while they agree with each other as closely
    as they do; no one ``backend`` is named then)."""
    failing = j.failing

    def excess(b: str) -> float:
        c = j.comparisons[b]
        if c.referee is None or not c.referee["allowed_rmse"]:
            return np.inf
        return c.referee["actual_rmse"] / c.referee["allowed_rmse"]

    worst: str | None = max(failing, key=excess)
    if len(failing) == len(backends) and (len(backends) > 1 or label):
        kind, worst = "all", None
        text = (
            (
                f"the port parts from {label} on every backend ({', '.join(backends)}) at "
                f"{j.layer}, while the backends differ from each other by RMSE {j.spread:.3g}: "
                "suspect the conversion (a weight, a config field) or an op the port computes "
                "differently from Hugging Face"
            )
            if label
            else (
                f"every backend ({', '.join(backends)}) parts from the float64 referee at layer "
                f"{j.layer}, while they differ from each other by RMSE {j.spread:.3g}: suspect "
                "the layer at float64 (a cast or a dtype-dependent branch), a fault every "
                f"backend shares, or a fault of the referee's backend ({referee}) alone at "
                "float64"
            )
        )
    elif set(failing) <= set(j.scaled):
        worst = max(failing, key=lambda b: abs(j.fits[b].scale - 1.0))
        kind, text = "scaled", scaled_text(j, backends, label)
    else:
        kind = "one"
        rest = [b for b in backends if b not in failing]
        who = label or "the float64 referee"
        text = f"backend {', '.join(failing)} parts from " + (
            f"{', '.join(rest)} and {who}" if rest else who
        )
        text += f" at layer {j.layer}"
    return {"backend": worst, "backends": failing, "layer": j.layer, "kind": kind, "text": text}


def scaled_text(j: LayerJudgement, backends: list[str], label: str = "") -> str:
    """``backend torch's output at layer residual is 1.0010 x the float64 referee's (32
    standard errors; float16 rounding allows 1 +- 0.00049; tensorflow 1.0001, jax
    1.0001)``: every backend failed by its scale, and the others' scales."""
    failing = [b for b in backends if b in j.scaled]
    scales = ", ".join(f"{j.fits[b].scale:.4f}" for b in failing)
    errors = ", ".join(f"{j.fits[b].standard_errors:.0f}" for b in failing)
    rest = [b for b in backends if b not in failing]
    others = ", ".join(f"{b} {j.fits[b].scale:.4f}" for b in rest if b in j.fits)
    who = (
        f"backend {failing[0]}'s output at layer {j.layer} is"
        if len(failing) == 1
        else f"backends {', '.join(failing)}: their outputs at layer {j.layer} are"
    )
    text = (
        f"{who} "
        f"{scales} x {label or 'the float64 referee'}'s ({errors} standard errors; "
        f"{j.rounding} rounding allows 1 +- {scale_floor(j.rounding):.2g}"
        + (f"; {others}" if others else "")
        + "): a fault that scales the output, too small for the RMSE bound"
    )
    return text
