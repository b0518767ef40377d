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
pass (restored after). Where the stored file cannot be reproduced this way (another
tool's variables, a source already quantised, no source) it says why in one line and the
check is skipped.

Any Keras 3 model: a keras-hub model's source is ``--source`` or the reference's
checkpoint converted by keras-hub; a model of one's own (docs/your-own-model.md) has
only ``--source`` (a float ``.keras``, or ``source=`` the float model in Python), cloned
(``keras.models.clone_model``) and quantised the same way, its variables paired with
the stored ones in order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import fields, is_dataclass, replace
from typing import Any

import numpy as np

from ...architectures.heads import Head
from ...compare.quantisation import CALIBRATED_MODES
from ...compare.requantisation import QuantisedVariable, compare_requantised
from ..interfaces.requantisation import FreshTwin
from ..interfaces.sides import TFSide
from ..tf_common.quantize import MODES, layer_modes, quantize
from .calibration import (
    Calibration,
    keras_config,
    keras_uses_calibration,
    policy_settings,
)
from .quantised_side import quantisable_parts, quantised_side
from .side import KerasHubModel
from .task import load_keras_hub_side

# a GPTQ or AWQ file without --calibration: why it is not checked exactly
NEEDS_DATA = (
    "{mode} quantisation takes calibration data, which the file does not hold: give "
    "--calibration FILE (the token ids it was quantised with) for the exact check; "
    "the budgets judge it"
)


def fresh_twin(
    stored: TFSide,
    source: TFSide | None,
    reference: Any = None,
    calibration: Calibration | None = None,
) -> FreshTwin | None:
    """The exact check's material for ``stored``, a Keras-quantised side, against a fresh
    quantisation of ``source`` (``--source``), else of the reference checkpoint
    ``reference`` (a spec) converted by keras-hub; None for a side Keras did not quantise.
    GPTQ and AWQ layers are quantised afresh with ``calibration`` (``--calibration``)."""
    model = getattr(stored, "model", None)
    hub = isinstance(stored, KerasHubModel)
    if not (hub or holds_model(stored)):
        return None  # another side (an export, a backend worker's): not reproduced here
    modes = layer_modes(model)  # any Keras 3 model; {} for a float one, or not Keras 3
    if not modes:
        return None
    mode = "+".join(sorted(set(modes.values())))
    calibrated = sorted(set(modes.values()) & set(CALIBRATED_MODES))
    if calibrated and calibration is None:
        why = NEEDS_DATA.format(mode=calibrated[0])
        return FreshTwin(getattr(source, "name", "-"), mode, skipped=why, layers=modes)
    if calibrated and not hub:  # the calibrated twin is built through keras-hub's side
        why = f"{calibrated[0]} on a model of your own is not quantised afresh here"
        return FreshTwin(
            getattr(source, "name", "-"), mode, skipped=why + "; the budgets judge it", layers=modes
        )
    unknown = sorted(set(modes.values()) - set(MODES) - set(CALIBRATED_MODES))
    if unknown:
        why = f"Keras's {unknown[0]} mode is not one tfparity quantises ({', '.join(MODES)})"
        return FreshTwin(getattr(source, "name", "-"), mode, skipped=why, layers=modes)
    float_side, name = _source(source, reference, stored.head) if hub else _own_source(source)
    if isinstance(float_side, str):
        return FreshTwin(name, mode, skipped=float_side, layers=modes)
    if layer_modes(float_side.model):
        why = f"the source {name} is itself quantised: there is no float model to quantise"
        return FreshTwin(name, mode, skipped=why, layers=modes)
    configs = _calibrated_configs(model, calibration)
    twin = (
        _quantised(float_side, modes, configs) if hub else _own_quantised(float_side, model, modes)
    )
    if isinstance(twin, str):
        return FreshTwin(name, mode, skipped=twin, layers=modes)
    stored_vars = quantised_variables(model, modes)
    fresh_vars = quantised_variables(twin.model, modes, None if hub else model)
    other = another_quantisation(stored_vars, fresh_vars, mode)
    if other is None and calibrated:
        rows = len(calibration.token_ids) if calibration is not None else 0
        other = blind_calibration(stored_vars, fresh_vars, calibrated[0], rows)
    used = _used(calibration) if calibrated else None
    if other is not None:
        return FreshTwin(name, mode, skipped=other, layers=modes, calibration=used)
    by_path = {v.path: v for v in model.weights}
    parts = quantisable_parts(stored) if hub else own_parts(stored)
    return FreshTwin(
        calibration=used,
        source=name,
        mode=mode,
        stored=stored_vars,
        fresh=fresh_vars,
        parts={path: part for part, path in parts},
        run_stored=stored.run,
        run_fresh=twin.run,
        put_back=lambda path: _swapped(by_path[path], fresh_vars[path].values),
        layers=modes,
    )


def _used(calibration: Calibration | None) -> dict[str, Any] | None:
    """What the fresh GPTQ/AWQ quantisation was given, for the report's JSON."""
    if calibration is None:
        return None
    samples, length = calibration.token_ids.shape
    return {
        "file": calibration.path,
        "samples": int(samples),
        "sequence_length": int(length),
        "settings": calibration.settings,
        "keras_uses_it": keras_uses_calibration(),
    }


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


def _quantised(
    side: KerasHubModel, modes: dict[str, str], configs: dict[str, tuple[str, Any]]
) -> TFSide:
    """One copy of ``side`` with each layer quantised in its stored mode: one
    quantisation per mode (per GPTQ/AWQ setting, ``configs``: layer path -> its key and
    Keras config), the layers named by path; Keras's plain modes first."""
    by_key: dict[str, list[str]] = {}
    config_of: dict[str, Any] = {}
    for path, mode in modes.items():
        key, config = configs.get(path, (mode, None))
        by_key.setdefault(key, []).append(path)
        config_of[key] = (mode, config)
    order = sorted(by_key, key=lambda k: (k not in MODES, MODES.index(k) if k in MODES else k))
    first, *rest = order
    twin = quantised_side(side, config_of[first][0], by_key[first], config_of[first][1])
    for key in rest:
        quantize(twin.model, config_of[key][0], by_key[key], config_of[key][1])
    return twin


def _calibrated_configs(model: Any, calibration: Calibration | None) -> dict[str, tuple[str, Any]]:
    """For each GPTQ/AWQ layer of ``model``, by path: its setting (``gptq/4/128``, from
    its dtype policy) and the Keras config quantising a fresh one with ``calibration``."""
    found: dict[str, tuple[str, Any]] = {}
    made: dict[tuple[str, int, int], Any] = {}
    for layer in model._flatten_layers():
        settings = policy_settings(layer)
        if settings is None or calibration is None:
            continue
        if settings not in made:
            made[settings] = keras_config(*settings, calibration)
        found[str(layer.path)] = ("/".join(map(str, settings)), made[settings])
    return found


def quantised_variables(
    model: Any, modes: dict[str, str], named_as: Any = None
) -> dict[str, QuantisedVariable]:
    """The variables of ``model``'s quantised layers (``modes``: layer path -> mode),
    by path, as numpy, each with its layer's mode. ``named_as``: the model whose paths
    they take, variable for variable (a clone of the same architecture, whose layers
    Keras may have numbered otherwise: ``dense_7`` for ``dense_3``)."""
    named = list((named_as or model).weights)
    if len(named) != len(model.weights):
        named = list(model.weights)  # another architecture: its own paths tell
    found = {}
    for v, n in zip(model.weights, named, strict=True):
        path = str(n.path)
        layer = path.rsplit("/", 1)[0]
        if layer in modes:
            found[path] = QuantisedVariable(path, np.asarray(v), modes[layer])
    return found


# ----------------------------------------------------------------------------- your own


def holds_model(side: Any) -> bool:
    """Whether ``side`` holds its model itself (a model of one's own: a ``model``
    field), so a fresh twin can be the same side around another model."""
    return is_dataclass(side) and "model" in {f.name for f in fields(side)}


def _own_source(source: TFSide | None) -> tuple[Any, str]:
    """The float Keras model of one's own to quantise afresh (``--source``, ``source=``),
    and its name; or why there is none."""
    if source is None:
        why = (
            "no float source: give --source FLOAT.keras (source= the float model in "
            "Python), the model of your own it was quantised from"
        )
        return why, "-"
    if not holds_model(source) or getattr(source.model, "_flatten_layers", None) is None:
        return f"the source {source.name} is not a Keras 3 model of your own", source.name
    return source, source.name


def _own_quantised(side: TFSide, stored: Any, modes: dict[str, str]) -> TFSide | str:
    """A clone of the float model of one's own ``side`` with each layer quantised in its
    stored mode (the layers named by the clone's paths, paired with the stored model's
    in order), as a side of its own; or why Keras cannot clone it."""
    import keras

    try:
        clone = keras.models.clone_model(side.model)
        clone.set_weights(side.model.get_weights())
    except Exception as exc:  # a subclassed model without get_config, ...
        return f"Keras cannot clone {side.name} ({' '.join(str(exc).split())[:120]})"
    own = list(stored._flatten_layers())
    theirs = list(clone._flatten_layers())
    if len(own) != len(theirs):
        return f"the source {side.name} has other layers than the stored model"
    path_of = {str(a.path): str(b.path) for a, b in zip(own, theirs, strict=True)}
    by_mode: dict[str, list[str]] = {}
    for path, mode in modes.items():
        by_mode.setdefault(mode, []).append(path_of.get(path, path))
    for mode in sorted(by_mode, key=MODES.index):
        quantize(clone, mode, by_mode[mode])
    fresh = replace(side, model=clone, name=f"{side.name} quantised afresh")
    fresh.produced = set()  # its own runs' outputs
    return fresh


def own_parts(side: TFSide) -> list[tuple[int | str, str]]:
    """A model of one's own's parts by its ``layers=`` map: the layer named for
    ``hidden_states[k]`` is block ``k - 1`` (``embeddings`` for 0); none without a map."""
    parts: list[tuple[int | str, str]] = []
    for entry in getattr(side, "layers", ()):
        layer = entry.key if isinstance(entry.key, str) else getattr(entry.key, "path", None)
        if layer is not None:
            k = entry.hidden_state
            parts.append(("embeddings" if k == 0 else k - 1, str(layer)))
    return parts


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


def blind_calibration(
    stored: dict[str, QuantisedVariable],
    fresh: dict[str, QuantisedVariable],
    mode: str,
    rows: int,
    uses_data: bool | None = None,
) -> str | None:
    """Why ``stored``, a GPTQ or AWQ model, cannot be judged against this Keras's fresh
    quantisation from ``rows`` calibration samples, where most of its layers differ from
    it, as they do when the two could not be made alike; None where few differ (a
    damage, judged as one), or where nothing stands in the way. Two things do: a Keras
    that ignores calibration data (``uses_data``, default
    :func:`.calibration.keras_uses_calibration`) cannot reproduce a file calibrated with
    it; and a Keras that uses it cuts its windows from more than one row at an offset
    taken from Python's per-process string hash (docs/quantised.md)."""
    uses_data = keras_uses_calibration() if uses_data is None else uses_data
    if uses_data and rows <= 1:
        return None
    judged = compare_requantised(stored, fresh)
    layers = {v.layer for v in stored.values()}
    differing = {d.path.rsplit("/", 1)[0] for d in judged.differences}
    if 2 * len(differing) <= len(layers):
        return None
    import keras

    count = f"{len(differing)} of {len(layers)} {mode} layers differ from it"
    if uses_data:
        return (
            f"not reproducible here: Keras {keras.__version__} cuts its {mode} calibration "
            f"windows from the {rows} rows at an offset from Python's string hash, which "
            f"differs between processes unless PYTHONHASHSEED is the same, and {count} "
            "(give one row, or quantise under this run's PYTHONHASHSEED); the budgets judge it"
        )
    return (
        f"not reproducible here: Keras {keras.__version__} ignores {mode} calibration data "
        "(its hooks miss quantised layers, keras-team/keras#23512), so its fresh "
        f"quantisation is round-to-nearest, and {count}, as a file calibrated with its data "
        "would (or quantised with other settings than the .npz gives); the budgets judge it"
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
