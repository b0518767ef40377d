"""Keras-native quantisation (``model.quantize``): the ONE place tfparity quantises.

``crosscheck --quantize int8|int4|float8`` checks a keras-hub model (a ``keras-hub:``
spec or a Keras 3 ``.keras`` file) as it would ship quantised: a copy of its float
model (made by :mod:`.quantised_side`) is quantised here, so the float model stays
what the referee judges and the quantised copy is judged against it
(docs/quantised.md). :func:`quantize` takes the
layers to quantise too (by variable path prefix, ``transformer_layer_3``), so a
one-layer-at-a-time attribution can reuse it. A ``.keras`` file saved after
``quantize`` carries its mode in its layers' dtype policies (``int8_from_float32``):
:func:`stored_mode` reads it back.
"""

from __future__ import annotations

import contextlib
import gc
import io
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from ...errors import TfparityError

# the one list of Keras's modes: those --quantize takes (every command's choices), and
# those that take calibration data, which a stored file may hold (--calibration)
MODES = ("int8", "int4", "float8")
CALIBRATED_MODES = ("gptq", "awq")


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
            "--quantize int8|int4|float8 with it (docs/quantised.md)."
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
