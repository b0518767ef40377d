"""A stored Keras-quantised model and a fresh quantisation of its float source, paired
variable by variable, for the exact check (docs/quantised.md, "Reproducing the
quantisation").

Keras's int8 and int4 quantisation is deterministic: quantising the float source afresh,
each layer in the mode the stored file's dtype policies name
(:func:`..tf_common.quantize.layer_modes`), gives the variables the file must hold.
:func:`fresh_twin` builds that quantisation (one :func:`..tf_common.quantize.quantize`
per mode, on one copy of the source) and hands the check the two sets of variables as
numpy (:class:`~tfparity.compare.requantisation.QuantisedVariable`), a way to run each
model, and a way to put one fresh variable back into the stored model for one forward
pass (restored after). Where the stored file cannot be reproduced this
way (another tool's variables, a source already quantised, not a keras-hub model) it
says why in one line and the check is skipped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...architectures.heads import Head
from ...compare.requantisation import QuantisedVariable
from ..interfaces.requantisation import FreshTwin
from ..interfaces.sides import TFSide
from ..tf_common.quantize import MODES, layer_modes, quantize
from .quantised_side import quantisable_parts, quantised_side
from .side import KerasHubModel
from .task import load_keras_hub_side

# Keras 3.15's modes that a fresh quantisation cannot reproduce from the file and its
# source alone, and why (docs/quantised.md)
CALIBRATED = {
    mode: f"{mode} quantisation depends on its calibration data (the dataset, tokenizer "
    "and sample count of its config), which the file does not hold, so a fresh one cannot "
    "be made to match; the budgets judge it"
    for mode in ("gptq", "awq")
}


def fresh_twin(stored: TFSide, source: TFSide | None, reference: Any = None) -> FreshTwin | None:
    """The exact check's material for ``stored``, a Keras-quantised side, against a fresh
    quantisation of ``source`` (``--source``), else of the reference checkpoint
    ``reference`` (a spec) converted by keras-hub; None for a side Keras did not quantise."""
    model = getattr(stored, "model", None)
    modes = layer_modes(model) if isinstance(stored, KerasHubModel) else {}
    if not modes:
        return None
    mode = "+".join(sorted(set(modes.values())))
    calibrated = sorted(set(modes.values()) & set(CALIBRATED))
    if calibrated:
        return FreshTwin(
            source.name if source else "-", mode, CALIBRATED[calibrated[0]], layers=modes
        )
    unknown = sorted(set(modes.values()) - set(MODES))
    if unknown:
        why = f"Keras's {unknown[0]} mode is not one tfparity quantises ({', '.join(MODES)})"
        return FreshTwin(getattr(source, "name", "-"), mode, skipped=why, layers=modes)
    float_side, name = _source(source, reference, stored.head)
    if isinstance(float_side, str):
        return FreshTwin(name, mode, skipped=float_side, layers=modes)
    if layer_modes(float_side.model):
        why = f"the source {name} is itself quantised: there is no float model to quantise"
        return FreshTwin(name, mode, skipped=why, layers=modes)
    twin = _quantised(float_side, modes)
    stored_vars = quantised_variables(model, modes)
    fresh_vars = quantised_variables(twin.model, modes)
    other = another_quantisation(stored_vars, fresh_vars, mode)
    if other is not None:
        return FreshTwin(name, mode, skipped=other, layers=modes)
    by_path = {v.path: v for v in model.weights}
    return FreshTwin(
        source=name,
        mode=mode,
        stored=stored_vars,
        fresh=fresh_vars,
        parts={path: part for part, path in quantisable_parts(stored)},
        run_stored=stored.run,
        run_fresh=twin.run,
        put_back=lambda path: _swapped(by_path[path], fresh_vars[path].values),
        layers=modes,
    )


def _source(source: TFSide | None, reference: Any, head: Head) -> tuple[Any, str]:
    """The float keras-hub side to quantise afresh, with the stored side's ``head`` (a
    task's outputs are its logits), and its name; or why there is none (a sentence) and
    the name asked for."""
    if source is not None:
        if not isinstance(source, KerasHubModel):
            why = f"the source {source.name} is not a keras-hub model Keras can quantise"
            return why, source.name
        return source, source.name
    text = getattr(reference, "text", reference)
    if not isinstance(text, str):
        return "no float source: give --source MODEL (the model it was quantised from)", "-"
    inner = text.removeprefix("keras-hub:")
    name = f"keras-hub:{inner} (converted from the reference)"
    try:
        return load_keras_hub_side(f"keras-hub:{inner}", head), name
    except Exception as exc:  # keras-hub cannot convert it (or refuses it: TfparityError)
        why = f"keras-hub could not convert {text} ({' '.join(str(exc).split())[:120]})"
        return f"no float source: {why}; give --source MODEL", name


def _quantised(side: KerasHubModel, modes: dict[str, str]) -> TFSide:
    """One copy of ``side`` with each layer quantised in its stored mode: one
    quantisation per mode, the layers named by path."""
    by_mode: dict[str, list[str]] = {}
    for path, mode in modes.items():
        by_mode.setdefault(mode, []).append(path)
    order = sorted(by_mode, key=MODES.index)
    first, *rest = order
    twin = quantised_side(side, first, by_mode[first])
    for mode in rest:
        quantize(twin.model, mode, by_mode[mode])
    return twin


def quantised_variables(model: Any, modes: dict[str, str]) -> dict[str, QuantisedVariable]:
    """The variables of ``model``'s quantised layers (``modes``: layer path -> mode),
    by path, as numpy, each with its layer's mode."""
    found = {}
    for v in model.weights:
        layer = str(v.path).rsplit("/", 1)[0]
        if layer in modes:
            found[str(v.path)] = QuantisedVariable(str(v.path), np.asarray(v), modes[layer])
    return found


def another_quantisation(
    stored: dict[str, QuantisedVariable], fresh: dict[str, QuantisedVariable], mode: str
) -> str | None:
    """Why ``stored`` is not Keras's own ``mode`` quantisation of the source, where its
    variables are not those a fresh one makes (other names or shapes), else None."""
    shapes = {p: np.shape(v.values) for p, v in stored.items()}
    theirs = {p: np.shape(v.values) for p, v in fresh.items()}
    if shapes == theirs:
        return None
    looks = looks_like(stored)
    if looks is not None and looks != mode:
        return (
            f"quantised as {looks}, not {mode}: its variables are Keras's {looks} ones, "
            f"while its dtype policies say {mode}"
        )
    only = sorted(set(shapes) ^ set(theirs)) or sorted(p for p in shapes if shapes[p] != theirs[p])
    return (
        f"not Keras's own {mode} quantisation of this source: its quantised variables differ "
        f"from a fresh one's ({len(only)} by name or shape, e.g. {only[0]})"
    )


def looks_like(variables: dict[str, QuantisedVariable]) -> str | None:
    """The Keras 3.15 mode whose variables these are: int4 keeps zero points and a
    group index, float8 its amax histories, int8 int kernels with scales only."""
    names = {p.rsplit("/", 1)[-1] for p in variables}
    if any(n.endswith("_zero") or n == "g_idx" for n in names):
        return "int4"
    if any(n.endswith("amax_history") for n in names):
        return "float8"
    ints = [v for v in variables.values() if np.issubdtype(np.asarray(v.values).dtype, np.integer)]
    return "int8" if ints else None


@contextlib.contextmanager
def _swapped(variable: Any, values: np.ndarray) -> Iterator[None]:
    """``variable`` holding ``values`` meanwhile; its own values restored after."""
    own = np.asarray(variable)
    variable.assign(values)
    try:
        yield
    finally:
        variable.assign(own)
