"""Where gradients first part, and the gradients check's tables (see
:mod:`.check`): the walk backwards from the hidden states' gradients, the forward
divergence that explains a whole column of them, and the weights whose gradients
differ most."""

from __future__ import annotations

from typing import Any

from ...architectures import COMPONENTS
from ...compare import Comparison, known_difference_note
from ...results import Divergence
from ...trace import EMBEDDINGS, hidden_state_index, hidden_state_of, layer_of

GRAD = "grad:"  # comparison names: grad:hidden_states[1], grad:<PyTorch weight name>


def localise(
    rows: list[Comparison],
    forward: list[int],
    tf_model: Any,
    pt_model: Any,
    actual: str,
    expected: str,
) -> Divergence:
    """Where gradients first part, walking backwards (see the module's docstring)."""
    top = _top_weights(rows)
    if forward:
        k = min(forward)
        layer = layer_of(k)
        hint = (
            f"The forward pass already differs at hidden_states[{k}] ({actual} vs {expected}), "
            "so every gradient below the scalar differs with it: the cause is in the forward "
            f"computation of {_layer_text(layer)} (tfparity crosscheck localises it to the "
            f"sub-layer){_known(tf_model, pt_model, k, layer)}"
        )
        where = EMBEDDINGS if layer == EMBEDDINGS else None
        cause = f"the forward pass already differs at hidden_states[{k}]"
        return Divergence(k, layer, where, hint + top, cause=cause)
    hidden = sorted(
        ((k, c) for c in rows if (k := hidden_state_index(c.name.removeprefix(GRAD))) is not None),
        key=lambda kc: kc[0],
        reverse=True,
    )
    for i, (k, c) in enumerate(hidden):
        if c.passed:
            continue
        if i == 0:
            hint = (
                f"The forward pass agrees, but the gradient with respect to the last hidden "
                f"state (hidden_states[{k}]) differs: the backward pass of the head or of the "
                "final norm differs"
            )
            cause = (
                f"the backward pass of the head or final norm differs (grad of hidden_states[{k}])"
            )
            return Divergence(k, "head", "head", hint + top, cause=cause)
        hint = (
            f"The forward pass agrees and the gradient with respect to hidden_states[{k + 1}] "
            f"agrees, but the gradient with respect to hidden_states[{k}] differs: layer {k}'s "
            "backward pass differs from its forward (a custom gradient, a gradient-stopping or "
            "non-differentiable op)"
        )
        cause = f"layer {k}'s backward pass differs from its forward"
        return Divergence(k, k, None, hint + top, cause=cause)
    if failed(rows, GRAD + "inputs_embeds"):
        hint = (
            "Every hidden state's gradient agrees, but the gradient with respect to "
            "inputs_embeds differs: the embedding layer's backward pass (positions, "
            "token types, its norm) differs"
        )
        cause = "the embedding layer's backward pass differs (grad of inputs_embeds)"
        return Divergence(0, "embeddings", "embeddings", hint + top, cause=cause)
    hint = "Every hidden state's gradient agrees; only weights' gradients differ"
    place = _weight_place(rows, pt_model)
    if place is None:
        return Divergence(None, "weights", None, hint + top)
    k, layer, component = place
    where = f" ({component})" if component and component != layer else ""
    hint += f", the most in {_layer_text(layer)}{where}"
    return Divergence(k, layer, component, hint + top)


def _weight_place(rows: list[Comparison], pt_model: Any) -> tuple[int, Any, Any] | None:
    """Where the weight whose gradient differs most lives, by the reference's weight
    scopes: (the hidden state its layer outputs, the layer, the component, None where
    the names do not tell components apart); None where no scope holds it."""
    failing = [c for c in rows if not c.passed and _is_weight(c.name)]
    if pt_model is None or not failing:
        return None
    name = max(failing, key=_relative).name.removeprefix(GRAD)  # the hint's first
    if _in_scope(name, pt_model.weight_scope("embeddings", "embeddings")):
        return 0, "embeddings", "embeddings"
    indices = [hidden_state_index(c.name.removeprefix(GRAD)) for c in rows]
    for layer in range(max((k for k in indices if k is not None), default=0)):
        parts = [p for p in COMPONENTS if _in_scope(name, pt_model.weight_scope(layer, p))]
        if parts:
            return hidden_state_of(layer), layer, parts[0] if len(parts) == 1 else None
    return None


def _in_scope(name: str, scope: list[tuple[str, str]]) -> bool:
    return any(name.startswith(prefix) and part in name for prefix, part in scope)


def _layer_text(layer: Any) -> str:
    return "the embeddings" if layer == "embeddings" else f"layer {layer}"


def _known(tf_model: Any, pt_model: Any, k: int, layer: Any) -> str:
    """The port's known difference where the forward pass first differs there, matched
    as the cross-check's localisation matches it (:func:`known_difference_note`: the
    component is not localised here, so it does not contradict)."""
    config = pt_model.config if pt_model is not None else None
    return known_difference_note(tf_model.known_difference, config, k, layer)


def _top_weights(rows: list[Comparison], n: int = 3) -> str:
    """The failing weights whose gradients differ most (relative RMSE to the reference)."""
    failing = [c for c in rows if not c.passed and _is_weight(c.name)]
    if not failing:
        return "."
    ranked = sorted(failing, key=lambda c: -_relative(c))[:n]
    named = ", ".join(f"{c.name.removeprefix(GRAD)} ({_describe(c)})" for c in ranked)
    return f"; the weights whose gradients differ most: {named}."


def _describe(c: Comparison) -> str:
    if c.problem:
        return c.problem
    if c.referee is not None:
        return f"RMSE to float64 {_relative(c):.3g}x the allowed"
    return f"mean abs diff {c.mean_abs_diff:.3g}"


def _relative(c: Comparison) -> float:
    if c.problem:
        return float("inf")
    if c.referee is not None:
        scale = c.referee["actual_rmse"] / max(c.referee["allowed_rmse"], 1e-30)
        return float(scale)
    return c.mean_abs_diff


def _is_weight(name: str) -> bool:
    bare = name.removeprefix(GRAD)
    return name.startswith(GRAD) and bare != "inputs_embeds" and hidden_state_index(bare) is None


def failed(rows: list[Comparison], name: str) -> bool:
    return any(c.name == name and not c.passed for c in rows)


def hidden_agree(rows: list[Comparison]) -> bool:
    return all(c.passed for c in rows if hidden_state_index(c.name.removeprefix(GRAD)) is not None)


# ----------------------------------------------------------------------------- tables


def hidden_table(rows: list[Comparison], forward: list[int]) -> list[dict[str, Any]]:
    table = []
    for c in rows:
        bare = c.name.removeprefix(GRAD)
        k = hidden_state_index(bare) if bare != "inputs_embeds" else -1
        if k is None:
            continue
        r = c.referee or {}
        table.append(
            {
                "gradient": bare,
                "forward_ok": None if k < 0 else k not in forward,
                "max_abs_diff": c.max_abs_diff,
                "cosine": c.cosine,
                "rmse_vs_fp64": r.get("actual_rmse"),
                "reference_rmse_vs_fp64": r.get("reference_rmse"),
                "passed": c.passed,
            }
        )
    return table


def weight_table(rows: list[Comparison], tf_weights: dict, pt_weights: dict) -> dict[str, Any]:
    weights = [c for c in rows if _is_weight(c.name)]
    failing = sorted((c for c in weights if not c.passed), key=lambda c: -_relative(c))
    return {
        "compared": len(weights),
        "passed": sum(c.passed for c in weights),
        "only_tf": sorted(set(tf_weights) - set(pt_weights)),
        "differing_most": [
            {"name": c.name.removeprefix(GRAD), "how": _describe(c), "max_abs_diff": c.max_abs_diff}
            for c in failing[:10]
        ],
    }
