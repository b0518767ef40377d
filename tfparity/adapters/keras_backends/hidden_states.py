"""Which backbone layer call holds each of Hugging Face's hidden states, read off a
keras-hub backbone's functional graph (Keras internals: the layer graph's nodes), as
the keras-hub side maps them in process: by ``tfparity backends`` (the preparing step
names the recorded layers) and by a worker serving the ``--backend`` side
(:mod:`.hub_worker` records those tensors)."""

from __future__ import annotations

from typing import Any


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
