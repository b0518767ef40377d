"""Which backbone layer holds each of Hugging Face's hidden states in a backend worker
(:func:`hidden_state_layers`, read by ``tfparity backends``; :func:`hidden_state_tensors`,
read by the ``--backend`` worker), against the keras-hub side's own map in process.

ALBERT is the case that matters: its backbone runs one shared block ``num_layers``
times, so ``hidden_states[k]`` is the output of a call, not of a layer. The worker's
recording runs here, in this process (Keras 3 on TensorFlow), on the tiny ALBERT: no
backend process is started.

A causal-LM task saved whole (``keras-hub:tiny:gpt2/causal-lm``, as ``tfparity
backends`` prepares it) holds its backbone as one layer of its graph: the map names the
backbone's layers by their path from it, and HF's ``logits`` the task's output.
"""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")
pytest.importorskip("keras_hub")

from tfparity.adapters.keras_backends import hub_worker, worker  # noqa: E402
from tfparity.adapters.keras_backends.hidden_states import (  # noqa: E402
    hidden_state_layers,
    task_hidden_state_layers,
)


@pytest.fixture(scope="module")
def albert():
    """The in-process side's hidden states, the worker's recording and its map."""
    from tfparity import InputOptions
    from tfparity.adapters.keras_hub.side import load_keras_hub
    from tfparity.api import make_batches

    side = load_keras_hub("keras-hub:tiny:albert")
    batch = make_batches(side, InputOptions(random=2, seq_len=8, batch_size=2))[0]
    in_process = side.run(batch)
    feed = side.inputs(batch)
    backbone = side.backbone
    recorded = worker._run(keras, backbone, [feed[t.name] for t in backbone.inputs])
    served = hub_worker._recorder(keras, backbone, None)(feed)
    return in_process, recorded, hidden_state_layers(backbone), served


def test_a_grouped_backbone_maps_each_hidden_state_to_one_call_of_its_shared_block(albert):
    _, recorded, aliases, _ = albert
    assert aliases == {
        "hidden_states[0]": "embedding_projection",
        "hidden_states[1]": "group_0_inner_layer_0",
        "hidden_states[2]": "group_0_inner_layer_0#1",  # the same block's second call
        "pooler_output": "pooled_dense",
    }
    assert set(aliases.values()) <= set(recorded.outputs)
    # its sublayers are recorded per call too, each call's before the block's rows
    assert {"group_0_inner_layer_0/self_attention_layer/query#1"} <= set(recorded.outputs)


def test_the_worker_s_map_gives_the_in_process_side_s_hidden_states(albert):
    in_process, recorded, aliases, served = albert
    for alias, layer in aliases.items():
        expected = np.asarray(in_process[alias])
        np.testing.assert_allclose(recorded.outputs[layer], expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(served[alias]), expected, rtol=1e-6, atol=1e-6)


def test_one_call_s_output_is_not_another_s(albert):
    """The break a per-layer map makes: every call named by the block's first output."""
    in_process, recorded, _, _ = albert
    first = recorded.outputs["group_0_inner_layer_0"]
    assert not np.allclose(first, np.asarray(in_process["hidden_states[2]"]), atol=1e-3)
    assert not np.allclose(first, recorded.outputs["group_0_inner_layer_0#1"], atol=1e-3)


@pytest.fixture(scope="module")
def gpt2_lm():
    """The causal-LM side in process, the worker's recording of its task, and the map."""
    from tfparity import InputOptions
    from tfparity.adapters.keras_hub.task import load_keras_hub_side
    from tfparity.api import make_batches

    side = load_keras_hub_side("keras-hub:tiny:gpt2/causal-lm")
    batch = make_batches(side, InputOptions(random=2, seq_len=8, batch_size=2))[0]
    feed = side.inputs(batch)
    task = side.model
    inputs = [feed[t.name] for t in task.inputs]
    recorded = worker._run(keras, task, inputs)
    return side.run(batch), recorded, task, inputs


def test_a_task_s_map_names_its_backbone_s_layers_by_path_and_its_logits(gpt2_lm):
    in_process, recorded, task, _ = gpt2_lm
    aliases = task_hidden_state_layers(task)
    assert aliases["logits"] == "token_embedding#1"  # the reverse call, not the lookup
    assert aliases["hidden_states[1]"] == f"{task.backbone.name}/transformer_layer_0"
    for alias, layer in aliases.items():
        expected = np.asarray(in_process[alias])
        np.testing.assert_allclose(recorded.outputs[layer], expected, rtol=1e-5, atol=1e-5)
    # the backbone's own map names nothing the task's recording holds
    assert not set(hidden_state_layers(task.backbone).values()) & set(recorded.outputs)


def test_a_task_s_gradients_probe_its_logits_not_its_backbone_s_lookup(gpt2_lm):
    """``--gradients`` on the task: its ``token_embedding`` is called in the backbone
    (the lookup, hidden-wide) and again in the task's graph (the logits, vocabulary-wide);
    the output probed is the task's call, so the run does not fail on the shapes."""
    from tfparity.adapters.keras_backends.gradients import record_gradients

    _, recorded, task, inputs = gpt2_lm
    embedding = task.get_layer("token_embedding")
    logits = recorded.outputs["token_embedding#1"]
    assert embedding.output.shape[-1] != logits.shape[-1]  # what layer.output would probe
    arrays, facts = record_gradients(keras, task, inputs, seed=0)
    assert arrays["token_embedding:output"].shape == logits.shape
    assert facts["layer_of"]["token_embedding:output"] == "token_embedding"
    assert np.abs(arrays["token_embedding/embeddings"]).max() > 0  # head and lookup both
