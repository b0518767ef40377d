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


def tokenised_inputs(
    path: str, imports: list[str], rows: int, seq_len: int, seed: int
) -> tuple[list[str], list[Any]]:
    """The input names and seeded tokenised inputs of a keras-hub backbone or task saved
    at ``path``, as a keras-hub spec makes them (``rows`` random rows of mixed lengths,
    the longest ``seq_len``, padded; ids below the backbone's vocabulary, never the
    tokenizer's pad id): the file is loaded to learn its inputs, which its config does
    not list. Anything but a keras-hub model with a backbone is a TfparityError."""
    import importlib

    import keras

    from ...inputs import random_batches
    from .inputs import tokenised

    for module in imports:
        importlib.import_module(module)
    model = keras.saving.load_model(path, compile=False)
    backbone = model if hasattr(model, "vocabulary_size") else getattr(model, "backbone", None)
    vocabulary = getattr(backbone, "vocabulary_size", None)
    if vocabulary is None:
        raise TfparityError(
            f"{path} holds a keras-hub {type(model).__name__} without a token vocabulary: "
            "give --inputs FILE.npz, one array per model input."
        )
    tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    pad = getattr(tokenizer, "pad_token_id", None)
    batch = random_batches(
        rows,
        seq_len,
        int(vocabulary),
        batch_size=rows,
        seed=seed,
        avoid_ids=() if pad is None else (int(pad),),
    )[0]
    names = [t.name for t in model.inputs]
    return names, tokenised(batch, names)


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
    transformer layer call, ``hidden_states[k]`` the output of call ``k-1``, the last
    one the backbone's ``sequence_output`` (after the final norm, as HF's), and HF's
    ``pooler_output`` the backbone's ``pooled_output``. A layer called more than once
    (ALBERT's grouped layers: one block run ``num_layers`` times) is named per call,
    ``name`` then ``name#1``, ``name#2``..., as the worker records it
    (:func:`call_name`)."""
    return {alias: call_name(t) for alias, t in hidden_state_tensors(backbone).items()}


def task_hidden_state_layers(task: Any) -> dict[str, str]:
    """:func:`hidden_state_layers` for a keras-hub task (a ``CausalLM``) saved whole: the
    backbone is one layer of the task's graph, so the worker records its layers by their
    path from it (``gpt2_backbone/transformer_layer_0``: :mod:`.sublayers`), and HF's
    ``logits`` are the task's output, the call that makes them (a ``CausalLM``'s
    ``token_embedding#1``, the token embedding's second, reverse, call)."""
    prefix = f"{task.backbone.name}/"
    aliases = {a: prefix + n for a, n in hidden_state_layers(task.backbone).items()}
    return {**aliases, "logits": call_name(task.output)}


def hidden_state_tensors(backbone: Any) -> dict[str, Any]:
    """The symbolic tensors of :func:`hidden_state_layers` (Keras tensors of the
    backbone's graph), for a recorder model built on it."""
    calls = _block_calls(backbone)
    outputs = backbone.output if isinstance(backbone.output, dict) else {}
    sequence = outputs.get("sequence_output", backbone.output)
    tensors = {"hidden_states[0]": calls[0].arguments.keras_tensors[0]}
    for k, node in enumerate(calls[:-1]):
        tensors[f"hidden_states[{k + 1}]"] = node.output_tensors[0]
    tensors[f"hidden_states[{len(calls)}]"] = sequence
    if "pooled_output" in outputs:
        tensors["pooler_output"] = outputs["pooled_output"]
    return tensors


def _block_calls(backbone: Any) -> list[Any]:
    """Every call of the backbone's transformer layers (graph nodes), first to last: one
    per layer, or for a grouped backbone (a list of groups, each group's layers called
    several times) one per call."""
    blocks = {
        id(b)
        for group in backbone.transformer_layers
        for b in (group if isinstance(group, (list, tuple)) else [group])
    }
    by_depth = backbone._nodes_by_depth  # Keras's functional graph: depth 0 = outputs
    return [
        node
        for depth in sorted(by_depth, reverse=True)
        for node in by_depth[depth]
        if id(node.operation) in blocks
    ]


def call_name(tensor: Any) -> str:
    """The recorded name of the layer call whose output ``tensor`` is: the layer's name
    for its first call, ``name#k`` for its call ``k`` (from 0)."""
    history = tensor._keras_history
    name = history.operation.name
    return name if history.node_index == 0 else f"{name}#{history.node_index}"
