"""Keras-native quantisation (``model.quantize``): the ONE place tfparity quantises,
and the one reader of the mode a file or model was quantised to.

It serves any Keras 3 model: ``crosscheck --quantize int8|int4|float8`` checks a
keras-hub model (a ``keras-hub:`` spec or a Keras 3 ``.keras`` file) as it would ship
quantised: a copy of its float model (made by
:mod:`tfparity.adapters.keras_hub.quantised_side`) is quantised here, so the float
model stays what the referee judges and the quantised copy is judged against it
(docs/quantised.md); ``tfparity backends --quantize`` and the exact check's fresh
quantisation (:mod:`tfparity.adapters.keras_hub.requantise`) quantise here too.
:func:`quantize` takes the layers to quantise too (by variable path prefix,
``transformer_layer_3``), so a one-layer-at-a-time attribution can reuse it. A
``.keras`` file saved after ``quantize`` carries its mode in its layers' dtype policies
(``int8_from_float32``): :func:`stored_mode` reads it back from a loaded model,
:func:`quantised_mode` from the file's config without Keras (a parent process that
must not load one), and :func:`stored_kind` names the side's kind (``keras int8``).
The modes are :data:`tfparity.compare.quantisation.MODES`, the one list every
command's ``--quantize`` offers. No framework is imported at module level.
"""

from __future__ import annotations

import contextlib
import gc
import io
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from ...compare.quantisation import MODES, keras_kind
from ...errors import TfparityError


def check_mode(mode: str) -> str:
    """``mode`` if Keras quantises to it here; exit 2 otherwise (before any load)."""
    if mode not in MODES:
        raise TfparityError(
            f"Unknown quantisation mode {mode!r}: --quantize takes one of {', '.join(MODES)} "
            "(Keras 3's model.quantize modes; gptq and awq take calibration data and are not "
            "offered here: a stored GPTQ/AWQ .keras is checked with --calibration FILE)."
        )
    return mode


def check_request(mode: str | None, attribute: bool = False) -> None:
    """Exit 2 for an unknown mode, or ``--attribute`` without a ``--quantize`` mode to
    quantise layers to (before any load)."""
    if mode is not None:
        check_mode(mode)
    elif attribute:
        raise TfparityError(
            "--attribute quantises one layer at a time to the --quantize mode: give "
            f"--quantize {'|'.join(MODES)} with it (docs/quantised.md)."
        )


def quantize(
    model: Any, mode: str, layers: Sequence[str] | None = None, config: Any = None
) -> None:
    """Quantise the Keras model ``model`` in place to ``mode``; with ``layers``, only the
    sub-layers whose path starts with one of them (``"transformer_layer_0"``). ``config``
    (a Keras ``GPTQConfig``/``AWQConfig``: :mod:`.calibration`) for a mode that takes
    calibration data: the exact check's fresh twin of a GPTQ or AWQ file."""
    if config is None:
        check_mode(mode)
    chosen = None if layers is None else _under(tuple(layers))
    quiet = contextlib.redirect_stdout(io.StringIO()) if config is not None else _nothing()
    with warnings.catch_warnings(), _collected_once(), quiet:  # GPTQ prints a progress bar
        # "Layer Dropout does not have a `quantize` method"
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        warnings.filterwarnings("ignore", message="Invalid quantization mode")
        model.quantize(mode, config=config, filters=chosen)


_nothing = contextlib.nullcontext


@contextlib.contextmanager
def _collected_once() -> Iterator[None]:
    """One garbage collection for the whole quantisation, not one per layer.

    Keras runs ``gc.collect()`` each time a layer drops its float kernel; with
    TensorFlow and PyTorch loaded each takes about a second, so quantising a copy one
    layer at a time (``--attribute``) would spend most of its time there. Objects alive
    before are frozen (not scanned) meanwhile, and one collection afterwards frees the
    float kernels as Keras meant to.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()


def _under(paths: tuple[str, ...]) -> Any:
    """A filter taking the layers at or below ``paths`` (``transformer_layer_1`` takes
    its sub-layers, never ``transformer_layer_10``'s)."""
    below = tuple(p + "/" for p in paths)
    return lambda layer: str(layer.path) in paths or str(layer.path).startswith(below)


def stored_mode(model: Any) -> str | None:
    """The mode ``model``'s layers were quantised to, from their dtype policies
    (``int8_from_float32``: ``int8``); None for a float model."""
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is None:  # not a Keras 3 model
        return None
    # each quantised layer's own mode (its dtype policy, or its entry in the
    # DTypePolicyMap a reloaded model's layers share)
    found = {str(m) for layer in flatten() if (m := getattr(layer, "quantization_mode", None))}
    return "+".join(sorted(found)) or None


def stored_kind(model: Any) -> str | None:
    """The kind of a side holding ``model``: ``keras int8`` (``keras int4+int8`` where
    mixed) for a model Keras quantised, judged by that kind's budgets; None for a float
    model (a side's ``quantisation``)."""
    mode = stored_mode(model)
    return None if mode is None else keras_kind(mode)


def quantised_mode(config: Any) -> str | None:
    """The mode a saved model's layers were quantised to by Keras (``model.quantize``),
    read from their ``QuantizedDTypePolicy`` in the config (``int8``; modes joined by
    ``+`` if several); None for a float model. Read without Keras, so the parent can
    tell before any process starts."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if "Quantized" in str(node.get("class_name", "")) and "mode" in node.get("config", {}):
                found.add(str(node["config"]["mode"]))
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(config)
    return "+".join(sorted(found)) or None


def layer_modes(model: Any) -> dict[str, str]:
    """Each quantised layer's mode, by layer path (``transformer_layer_0/self_attention/
    query``: ``int8``); empty for a float model. A file quantised with filters, or in two
    modes, shows which layer is which."""
    flatten = getattr(model, "_flatten_layers", None)
    if flatten is None:  # not a Keras 3 model
        return {}
    return {
        str(layer.path): str(m)
        for layer in flatten()
        if (m := getattr(layer, "quantization_mode", None))
    }


def modes_of_parts(model: Any, parts: Sequence[tuple[int | str, str]]) -> dict[int | str, str]:
    """Each part's mode (``parts``: ``(layer, path)``, as ``--attribute`` names them), read
    from the layers at or below its path (``int4+int8`` where they differ); parts with no
    quantised layer are left out. A mixed-mode model's report names its modes by it."""
    layers = list(getattr(model, "_flatten_layers", lambda: [])())
    found: dict[int | str, str] = {}
    for part, path in parts:
        chosen = _under((path,))
        modes = {
            str(m)
            for layer in layers
            if chosen(layer) and (m := getattr(layer, "quantization_mode", None))
        }
        if modes:
            found[part] = "+".join(sorted(modes))
    return found


def modes_text(modes: dict[int | str, str]) -> str:
    """``int4: layer 0; int8: embeddings, layer 1``: the layers of each mode."""
    by_mode: dict[str, list[str]] = {}
    for part, mode in modes.items():
        by_mode.setdefault(mode, []).append(
            "embeddings" if part == "embeddings" else f"layer {part}"
        )
    return "; ".join(f"{m}: {', '.join(parts)}" for m, parts in sorted(by_mode.items()))


def embedding_rows(layer: Any, ids: Any) -> Any:
    """Rows ``ids`` of a Keras ``Embedding``'s table as its own lookup computes them: a
    float table's rows, or a quantised one's stored integer rows divided by their
    per-row scale (int8, and int4 with one scale a row: Keras's ``_int8_call``). A
    quantised table holds no float matrix to gather from, so reading its integers
    without the scale feeds the inputs_embeds path other embeddings than the ids path
    computes. A table quantised in groups (int4 with a block size) has no per-row scale:
    its own lookup gives its rows."""
    import keras

    ops = keras.ops
    if getattr(layer, "quantization_mode", None) is None:
        return ops.take(ops.convert_to_tensor(layer.embeddings), ids, axis=0)
    scale = getattr(layer, "embeddings_scale", None)
    if scale is None or len(scale.shape) != 1:
        return layer(ids)
    rows = ops.cast(ops.take(layer.embeddings, ids, axis=0), layer.compute_dtype)
    return rows / ops.expand_dims(ops.take(scale, ids, axis=0), -1)
