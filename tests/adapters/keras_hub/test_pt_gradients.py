"""``pt_gradients``: gradients by Keras path renamed to PyTorch's names and layout
through the converter's record, the one mapping every keras-hub side uses (in process
on TensorFlow, or a worker on JAX/torch)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from tfparity.adapters.keras_hub.ports import Ported, pt_gradients


def _fused_qkv() -> tuple[list[Ported], dict[str, np.ndarray]]:
    """GPT-2's c_attn [4, 6] ported into three [4, 2] Keras kernels by column slices,
    as keras-hub's converter does."""
    pt = {"h.0.attn.c_attn.weight": np.zeros((4, 6), np.float32)}
    ports = [
        Ported(
            SimpleNamespace(path=f"layer_0/{part}/kernel"),
            "h.0.attn.c_attn.weight",
            lambda x, shape, k=k: np.reshape(np.asarray(x)[:, 2 * k : 2 * k + 2], shape),
        )
        for k, part in enumerate(("query", "key", "value"))
    ]
    return ports, pt


def test_a_fused_weight_gets_the_sum_of_its_parts():
    ports, pt = _fused_qkv()
    grads = {p.variable.path: np.full((4, 2), k + 1.0, np.float32) for k, p in enumerate(ports)}
    named, word = pt_gradients(ports, grads, pt, "embeddings")
    expected = np.repeat(np.array([1.0, 2.0, 3.0], np.float32), 2)[None].repeat(4, 0)
    np.testing.assert_array_equal(named["h.0.attn.c_attn.weight"], expected)
    assert word == "embeddings"  # not among the ports: kept by its Keras path


def test_a_variable_recorded_twice_is_counted_once_and_none_stays_none():
    ports, pt = _fused_qkv()
    grads = {ports[0].variable.path: np.ones((4, 2), np.float32)}
    named, _ = pt_gradients([ports[0], ports[0]], grads, pt, "x")
    assert named["h.0.attn.c_attn.weight"].sum() == 8.0  # one slice of ones, not two
    named, _ = pt_gradients(ports[:1], {ports[0].variable.path: None}, pt, "x")
    assert named == {"h.0.attn.c_attn.weight": None}
