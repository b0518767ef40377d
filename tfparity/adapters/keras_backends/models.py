"""What the preparing step (:mod:`tfparity.cross_backend.prepare`) asks of Keras: a
callable's model built and checked, a float file saved quantised, and which backbone
layer holds each of Hugging Face's hidden states (Keras internals: the layer graph's
nodes)."""

from __future__ import annotations

from typing import Any

from ...errors import TfparityError


def save_quantised(path: str, out: str, mode: str, imports: list[str]) -> str | None:
    """Load the float ``.keras`` at ``path``, quantise it with Keras to ``mode`` (through
    :mod:`..keras_hub.quantize`, the one place tfparity quantises) and save it whole at
    ``out``; the mode its layers now hold."""
    import importlib

    import keras

    from ..keras_hub.quantize import quantize, stored_mode

    for module in imports:  # custom layers register themselves on import
        importlib.import_module(module)
    model = keras.saving.load_model(path, compile=False)
    quantize(model, mode)
    model.save(out)
    try:  # every backend loads this file: one Keras cannot reload fails here, named
        keras.saving.load_model(out, compile=False)
    except Exception as e:
        raise TfparityError(unreloadable(keras.__version__, mode, model, str(e))) from None
    return stored_mode(model)


def unreloadable(version: str, mode: str, model: Any, why: str) -> str:
    """Why a model quantised to ``mode`` cannot be checked across backends: Keras saves
    it but cannot load its own file back (Keras 3.15: a quantised ``MultiHeadAttention``,
    whose ``EinsumDense`` projections are rebuilt unquantised and then refuse the int8
    variables), naming the layers that hold the ones it could not load, and what to check
    instead."""
    import re

    failed = set(re.findall(r"<\w+ name=([\w/.-]+)", why))
    holders = sorted(
        {
            f"{type(layer).__name__} {layer.name}"
            for layer in model._flatten_layers(include_self=False)
            if any(inner.name in failed for inner in layer._flatten_layers(include_self=False))
        }
    )
    where = f" (in {', '.join(holders)})" if holders else ""
    return (
        f"Keras {version} cannot reload the model it quantised to {mode}{where}: "
        f"{why.split('. ')[0].strip()}. Every backend would load that file, so `tfparity "
        "backends --quantize` cannot check it. Check the float model across backends "
        "(the same command without --quantize), --quantize on a model whose layers Keras "
        "reloads quantised (Dense, EinsumDense and Embedding outside a MultiHeadAttention), "
        "or, where the model has a Hugging Face reference, the quantisation in one process, "
        f"with no file to reload: `tfparity crosscheck MODEL --pt PT_MODEL --quantize {mode}`."
    )


def built_model(target: str, imports: list[str]) -> Any:
    """Import ``module``, call ``function``; a missing one or a non-model is a
    TfparityError naming it (exit 2 in the parent)."""
    import importlib

    import keras

    for module in imports:
        importlib.import_module(module)
    module_name, function_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise TfparityError(f"{target}: cannot import module {module_name} ({e}).") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise TfparityError(f"{target}: module {module_name} has no function {function_name}.")
    built = function()
    if not isinstance(built, keras.Model):
        raise TfparityError(
            f"{target} returned a {type(built).__name__}, not a Keras 3 model (keras.Model)."
        )
    return built


def hidden_state_layers(backbone: Any) -> dict[str, str]:
    """Which backbone layer's output is each of Hugging Face's hidden states, as the
    keras-hub side maps them: ``hidden_states[0]`` is the input of the first
    transformer layer, ``hidden_states[k]`` layer ``k-1``'s output, the last one the
    backbone's ``sequence_output`` (after the final norm, as HF's), and HF's
    ``pooler_output`` the backbone's ``pooled_output``."""
    layers = list(backbone.transformer_layers)
    first = layers[0]._inbound_nodes[0].arguments.keras_tensors[0]
    outputs = backbone.output if isinstance(backbone.output, dict) else {}
    sequence = outputs.get("sequence_output", backbone.output)
    names = {"hidden_states[0]": _producer(first)}
    names.update({f"hidden_states[{k + 1}]": layer.name for k, layer in enumerate(layers[:-1])})
    names[f"hidden_states[{len(layers)}]"] = _producer(sequence)
    if "pooled_output" in outputs:
        names["pooler_output"] = _producer(outputs["pooled_output"])
    return names


def _producer(tensor: Any) -> str:
    """The name of the layer whose output ``tensor`` is."""
    return tensor._keras_history.operation.name
