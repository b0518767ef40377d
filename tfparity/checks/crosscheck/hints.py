"""Likely causes of a TF/PyTorch divergence, each with the evidence that names it.

A hint says what it tried and how close it got: config fields that differ, weights of
the diverging component that differ (zeroed, transposed, shifted by a row), and
numeric signatures (the other GELU variant, another LayerNorm epsilon).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np

from ...architectures import for_config
from ...compare import factor_text, rmse
from ...results import Hint

# Fields every architecture has (through transformers' attribute maps); each
# architecture adds its own (activation, norm epsilon, ...) in the registry.
COMMON_CONFIG_FIELDS = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "vocab_size",
    "pad_token_id",
)
EPSILONS = (1e-12, 1e-6, 1e-5, 1e-3)
# Activation names that are one function: the tanh-approximated GELU under transformers'
# names and Keras' (keras-hub's blocks report gelu_approximate). A config hint between
# two of them would name a difference that is not there.
SAME_ACTIVATION = (frozenset({"gelu_new", "gelu_pytorch_tanh", "gelu_approximate"}),)

STORED_NOTE = (
    "The config agrees here; the weights were not compared (the PyTorch reference "
    "is stored outputs, not a model): a dropped, transposed or shifted weight of "
    "this component, or a computation difference. Rerun against the live PyTorch "
    "model for weight-level hints."
)
COMPUTATION_NOTE = (
    "Config and weights agree here, so the computation itself differs "
    "(attention scaling, mask constant, softmax, or a custom layer)."
)


def disagreeing_note(fields: tuple[str, ...], stored: bool) -> str:
    """What follows from config fields that differ past the hidden states (``num_labels``:
    heads of different sizes): the head's outputs have other shapes, so no value of them
    could be compared; the layers before the head are judged on their own rows."""
    weights = (
        " The weights were not compared (the PyTorch reference is stored outputs)."
        if stored
        else ""
    )
    return (
        f"The config disagrees here ({', '.join(fields)}): the heads differ in size, so "
        "their outputs differ in shape and no value of them could be compared; the "
        f"hidden-state rows above judge the layers before the head.{weights}"
    )


def config_fields(tf_config: Any, pt_config: Any) -> tuple[str, ...]:
    """The fields to compare: the common ones and both architectures' own."""
    own = for_config(tf_config).hint_fields + for_config(pt_config).hint_fields
    return tuple(dict.fromkeys(COMMON_CONFIG_FIELDS + own))


def config_differences(tf_config: Any, pt_config: Any, changed: Collection[str] = ()) -> list[Hint]:
    """The fields of :func:`config_fields` that differ; ``changed``: the reference's
    fields set by ``--pt-config``, said so (the user chose that difference)."""
    diffs = []
    for key in config_fields(tf_config, pt_config):
        a, b = getattr(tf_config, key, None), getattr(pt_config, key, None)
        if a != b and not _same_activation(a, b):
            side = "PyTorch, set by --pt-config" if key in changed else "PyTorch"
            diffs.append(Hint("config", f"config {key}: {a!r} (TF) vs {b!r} ({side})"))
    return diffs


def _same_activation(a: Any, b: Any) -> bool:
    both = isinstance(a, str) and isinstance(b, str)
    return both and any(a in same and b in same for same in SAME_ACTIVATION)


def weight_differences(
    tf_weights: dict[str, np.ndarray],
    pt_weights: dict[str, np.ndarray],
    prefix: str,
    contains: str = "",
) -> list[Hint]:
    """TF weights (by PyTorch name, in PyTorch's layout) under the name ``prefix`` (and
    holding ``contains``) that differ from PyTorch's, described."""
    found = []
    for name, tf_value in tf_weights.items():
        if not name.startswith(prefix) or contains not in name or name not in pt_weights:
            continue
        pt_value = pt_weights[name]
        if (
            tf_value.shape != pt_value.shape
            and np.squeeze(tf_value).shape == np.squeeze(pt_value).shape
        ):  # GPT-2's Conv1D keeps biases as [1, n] in TF, [n] in PyTorch
            tf_value = tf_value.reshape(pt_value.shape)
        if tf_value.shape == pt_value.shape and np.allclose(tf_value, pt_value, atol=0, rtol=0):
            continue
        text = describe_weight(name, tf_value, pt_value)
        found.append(
            Hint("weight", text, weight=name, permutation=_permutation(tf_value, pt_value))
        )
    return found


def _permutation(tf_value: np.ndarray, pt_value: np.ndarray) -> tuple[int, ...] | None:
    same_shape = tf_value.shape == pt_value.shape
    return row_permutation(tf_value, pt_value) if same_shape else None


def row_permutation(tf_value: np.ndarray, pt_value: np.ndarray) -> tuple[int, ...] | None:
    """``p`` with TF's row ``i`` equal to PyTorch's row ``p[i]`` (exactly: reordering
    moves values, it does not change them), other than the identity; None where the
    rows are no reordering or where equal rows make the order ambiguous."""
    if tf_value.ndim == 0 or tf_value.shape[0] < 2:
        return None
    where: dict[bytes, int] = {}
    for j, row in enumerate(np.ascontiguousarray(pt_value)):
        where.setdefault(row.tobytes(), j)
    if len(where) < pt_value.shape[0]:  # repeated rows: which is which is unknowable
        return None
    found = tuple(where.get(row.tobytes(), -1) for row in np.ascontiguousarray(tf_value))
    if -1 in found or len(set(found)) != len(found) or found == tuple(range(len(found))):
        return None
    return found


def column_permutation(tf_value: np.ndarray, pt_value: np.ndarray) -> tuple[int, ...] | None:
    """``p`` with TF's last-axis column ``i`` matching PyTorch's column ``p[i]``, other
    than the identity: read from the outputs where there are no weights to compare (an
    export, stored outputs). Each column must match its counterpart clearly, within a
    tenth of its distance to every other column, so noise names no permutation."""
    if tf_value.shape != pt_value.shape or tf_value.ndim == 0 or not 2 <= tf_value.shape[-1] <= 64:
        return None
    a = tf_value.reshape(-1, tf_value.shape[-1]).astype(np.float64)
    b = pt_value.reshape(-1, pt_value.shape[-1]).astype(np.float64)
    distance = np.abs(a[:, :, None] - b[:, None, :]).max(axis=0)  # [TF column, PT column]
    found = tuple(int(j) for j in distance.argmin(axis=1))
    if len(set(found)) != len(found) or found == tuple(range(len(found))):
        return None
    for i, j in enumerate(found):
        others = np.delete(distance[i], j)
        if not distance[i, j] <= 0.1 * others.min():
            return None
    return found


def permutation_text(permutation: tuple[int, ...], limit: int = 6, unit: str = "rows") -> str:
    """``TF's rows 0, 1, 2 are PyTorch's 2, 0, 1``: the rows that moved, the first
    ``limit`` of them (a rotated table of 512 rows is said to be rotated)."""
    n = len(permutation)
    shift = permutation[0]
    if n > limit and all(p == (i + shift) % n for i, p in enumerate(permutation)):
        by = f"+{shift}" if shift <= n // 2 else f"-{n - shift}"
        return f"TF's {unit[:-1]} i is PyTorch's {unit[:-1]} i{by} (rotated)"
    moved = [i for i, j in enumerate(permutation) if i != j]
    more = f", ... ({len(moved)} {unit} moved)" if len(moved) > limit else ""
    moved = moved[:limit]
    tf_rows = ", ".join(str(i) for i in moved)
    pt_rows = ", ".join(str(permutation[i]) for i in moved)
    return f"TF's {unit} {tf_rows}{more} are PyTorch's {pt_rows}{more and ', ...'}"


def describe_weight(name: str, tf_value: np.ndarray, pt_value: np.ndarray) -> str:
    if tf_value.shape != pt_value.shape:
        return f"weight {name}: shape {tf_value.shape} (TF) vs {pt_value.shape} (PyTorch)"
    if not np.any(tf_value) and np.any(pt_value):
        return f"weight {name} is all zeros in TF but not in PyTorch (dropped?)"
    if (
        tf_value.ndim == 2
        and tf_value.shape[0] == tf_value.shape[1]
        and np.array_equal(tf_value.T, pt_value)
    ):
        return f"weight {name} matches PyTorch when transposed (a transposed kernel)"
    rounded = rounding_of(tf_value, pt_value)
    if rounded is not None:
        return f"weight {name} differs only by rounding: {rounded}"
    factor = uniform_scale(tf_value, pt_value)
    if factor is not None:
        return f"weight {name} is PyTorch's scaled by {factor_text(factor)} (a uniform scale)"
    shift = row_shift(tf_value, pt_value)
    # a table of positions (32 rows or more) rolled by one is a permutation too, but
    # off by one position is the likelier cause; a head's few classes are permuted
    if shift is not None and tf_value.shape[0] >= 32:
        return _shifted_text(name, shift)
    permutation = row_permutation(tf_value, pt_value)
    if permutation is not None:
        return (
            f"weight {name} is PyTorch's with its rows reordered: {permutation_text(permutation)}"
        )
    if shift is not None:
        return _shifted_text(name, shift)
    diff = np.abs(tf_value - pt_value)
    return (
        f"weight {name} differs: max abs diff {diff.max():.3g} over "
        f"{int((diff > 0).sum())} of {diff.size} values"
    )


def row_shift(tf_value: np.ndarray, pt_value: np.ndarray) -> int | None:
    """1 or -1 where TF's rows are PyTorch's shifted by one (the edge rows aside)."""
    if tf_value.ndim != 2 or tf_value.shape[0] <= 2:  # 2 rows leave no middle to match
        return None
    for shift in (1, -1):
        if np.array_equal(np.roll(tf_value, shift, axis=0)[1:-1], pt_value[1:-1]):
            return shift
    return None


def _shifted_text(name: str, shift: int) -> str:
    return (
        f"weight {name} matches PyTorch with its rows shifted by {shift} "
        "(an off-by-one position table?)"
    )


def rounding_of(tf_value: np.ndarray, pt_value: np.ndarray) -> str | None:
    """Which side is the other's rounded to float16 or bfloat16, said so; None otherwise
    (a weight that differs only by that rounding is no shift, transpose or scale)."""
    a, b = (np.ascontiguousarray(v, np.float32) for v in (tf_value, pt_value))
    for dtype, rounder in (("float16", _to_float16), ("bfloat16", _to_bfloat16)):
        if np.array_equal(b, rounder(a)):
            return f"PyTorch's weights are TF's rounded to {dtype}"
        if np.array_equal(a, rounder(b)):
            return f"TF's weights are PyTorch's rounded to {dtype}"
    return None


def _to_float16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(np.float16).astype(np.float32)


def _to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even on the upper 16 bits of float32 (numpy has no bfloat16)."""
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def uniform_scale(tf_value: np.ndarray, pt_value: np.ndarray) -> float | None:
    """The constant ``c`` with ``tf == c * pt`` (to float32 rounding), or None.

    A kernel multiplied by a constant (a forgotten ``1/sqrt(d)``, a rescaled checkpoint)
    is a different bug from noise: say which constant.
    """
    a, b = tf_value.astype(np.float64).ravel(), pt_value.astype(np.float64).ravel()
    norm = float(b @ b)
    if a.size < 2 or norm == 0.0 or not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        return None
    c = float(a @ b) / norm
    if c == 1.0 or c == 0.0:
        return None
    residual = np.abs(a - c * b).max()
    return c if residual <= 1e-6 * max(np.abs(a).max(), 1e-30) else None


def _gelu_exact(x: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {
    "gelu (exact erf)": _gelu_exact,
    "gelu_new (tanh approximation)": _gelu_tanh,
    "relu": lambda x: np.maximum(x, 0.0),
}


def clear_winner(fits: dict[Any, float]) -> Any:
    """The candidate whose fit is at most half the next best's, or None: a tie (all
    fits alike, as when the weights themselves differ) explains nothing."""
    ranked = sorted(fits, key=fits.get)
    if len(ranked) > 1 and not fits[ranked[0]] <= 0.5 * fits[ranked[1]]:
        return None
    return ranked[0]


def activation_hint(
    pre_activation: np.ndarray,
    pt_output: np.ndarray,
    tf_output: np.ndarray,
    tf_act: str,
    pt_act: str,
) -> str:
    """Which activation turns the (TF) up-projection into each side's output."""
    x = pre_activation[..., :256]  # a slice keeps the exact-erf loop cheap
    pt_fit = {k: rmse(f(x), pt_output[..., :256]) for k, f in ACTIVATIONS.items()}
    tf_fit = {k: rmse(f(x), tf_output[..., :256]) for k, f in ACTIVATIONS.items()}
    best_pt, best_tf = clear_winner(pt_fit), clear_winner(tf_fit)
    tried = ", ".join(f"{k}: rmse {v:.2g}" for k, v in pt_fit.items())
    if best_pt is None or best_tf is None:
        return (
            "activation: no variant clearly reproduces both sides from TF's up-projection "
            f"(its weights may differ); tried on PyTorch's output: {tried}"
        )
    if best_pt != best_tf:
        return (
            f"activation: PyTorch's intermediate output matches {best_pt}, TF's matches "
            f"{best_tf} (config: TF {tf_act!r}, PyTorch {pt_act!r}); tried on PyTorch's "
            f"output: {tried}"
        )
    return f"activation: both sides match {best_pt} ({tried})"


def layernorm_hint(
    pre_norm: np.ndarray, gamma: np.ndarray, beta: np.ndarray, pt_output: np.ndarray, tf_eps: float
) -> str:
    mean = pre_norm.mean(-1, keepdims=True)
    var = pre_norm.var(-1, keepdims=True)
    fits = {
        eps: rmse((pre_norm - mean) / np.sqrt(var + eps) * gamma + beta, pt_output)
        for eps in sorted(set(EPSILONS) | {tf_eps})
    }
    best = clear_winner(fits)
    tried = ", ".join(f"{e:g}: rmse {v:.2g}" for e, v in fits.items())
    if best is None:
        return (
            "LayerNorm epsilon: no epsilon clearly reproduces PyTorch's output from TF's "
            f"weights (they may differ; tried {tried})"
        )
    if best != tf_eps:
        return (
            f"LayerNorm epsilon: PyTorch's output matches eps={best:g}, TF uses "
            f"{tf_eps:g} (tried {tried})"
        )
    return f"LayerNorm epsilon: TF's eps={tf_eps:g} fits PyTorch best ({tried})"
