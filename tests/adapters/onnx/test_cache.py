"""A graph's KV cache read off its names (no file, no runtime): the past inputs paired
with the present outputs layer by layer, an empty past shaped from the graph's dims or
the config's, and a cache that does not pair up refused naming what is missing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tfparity.adapters.onnx.cache import cache_of, no_cache
from tfparity.adapters.onnx.graph import GraphInput
from tfparity.errors import TfparityError

IDS = GraphInput("input_ids", (None, None), "int64")


def _past(layers, dims=(None, 4, None, 8), skip=()):
    names = [f"past_key_values.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    return [GraphInput(n, dims, "float32") for n in names if n not in skip]


def _present(layers, skip=()):
    names = [f"present.{i}.{k}" for i in range(layers) for k in ("key", "value")]
    return ["logits", *(n for n in names if n not in skip)]


def test_a_cache_pairs_past_inputs_with_present_outputs_and_starts_empty():
    cache = cache_of([IDS, *_past(2)], _present(2))
    assert cache.layers == 2
    assert cache.outputs == ["present.0.key", "present.0.value", "present.1.key", "present.1.value"]
    empty = cache.empty(3)
    assert {k: v.shape for k, v in empty.items()} == {
        f"past_key_values.{i}.{k}": (3, 4, 0, 8) for i in (0, 1) for k in ("key", "value")
    }
    step = {name: np.full((1, 4, 5, 8), n, np.float32) for n, name in enumerate(cache.outputs)}
    carried = cache.carried(step)
    assert [int(carried[f"past_key_values.1.{k}"][0, 0, 0, 0]) for k in ("key", "value")] == [2, 3]


def test_dynamic_heads_come_from_the_config_and_without_one_are_refused():
    dynamic = _past(1, dims=(None, None, None, None))
    config = SimpleNamespace(num_attention_heads=4, hidden_size=32, num_key_value_heads=2)
    cache = cache_of([IDS, *dynamic], _present(1), config)
    assert cache.empty(1)["past_key_values.0.key"].shape == (1, 2, 0, 8)  # GQA: kv heads
    with pytest.raises(TfparityError, match="past_key_values.0.key leaves its heads"):
        cache_of([IDS, *dynamic], _present(1)).empty(1)


def test_no_past_inputs_is_no_cache_and_a_half_cache_is_refused_by_name():
    assert cache_of([IDS], ["logits"]) is None
    with pytest.raises(TfparityError, match=r"but no present\.1\.value"):
        cache_of([IDS, *_past(2)], _present(2, skip=("present.1.value",)))
    with pytest.raises(TfparityError, match=r"but no past_key_values\.0\.value"):
        cache_of([IDS, *_past(2, skip=("past_key_values.0.value",))], _present(2))


def test_the_refusal_names_what_the_graph_lacks_and_how_to_export_it():
    plain = str(no_cache("m.onnx", ["input_ids", "attention_mask"], ["logits"]))
    assert "no past_key_values.{i}.key / .value inputs and no present." in plain
    assert "inputs: input_ids, attention_mask; outputs: logits" in plain
    assert "export_with_cache" in plain and "docs/onnx.md" in plain
    half = str(no_cache("m.onnx", ["input_ids"], ["logits", "present.0.key"]))
    assert "no past_key_values.{i}.key / .value inputs (" in half  # it has presents
