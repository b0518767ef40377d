"""Each backend's precision facts (worker.precision_facts), as a backend process records
them: TF32 switches are only recorded where a GPU is present. This machine has none, so
the GPU branches are run with the frameworks' device queries answering as on a GPU
machine (the switches themselves are real: they exist on CPU builds too)."""

from __future__ import annotations

import pytest

from tfparity.adapters.keras_backends.worker import precision_facts


@pytest.fixture(scope="module")
def keras():
    return pytest.importorskip("keras")


def test_on_cpu_no_tf32_switch_is_reported_but_torch_s_matmul_one(keras):
    tf_facts = precision_facts(keras, "tensorflow")
    assert tf_facts["dtype_policy"] == "float32" and tf_facts["devices"] == ["cpu"]
    assert "tensor_float_32" not in tf_facts
    torch_facts = precision_facts(keras, "torch")
    assert torch_facts["devices"] == ["cpu"] and torch_facts["allow_tf32"] is False
    assert "cudnn_allow_tf32" not in torch_facts


def test_with_a_gpu_torch_reports_both_tf32_switches(keras, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    matmul = torch.backends.cuda.matmul  # its attributes are properties: set, then reset
    old, matmul.allow_tf32 = matmul.allow_tf32, True
    try:
        facts = precision_facts(keras, "torch")
    finally:
        matmul.allow_tf32 = old
    assert facts["devices"] == ["cuda"] and facts["allow_tf32"] is True
    assert facts["cudnn_allow_tf32"] == bool(torch.backends.cudnn.allow_tf32)


def test_with_a_gpu_tensorflow_reports_its_tf32_execution(keras, monkeypatch):
    import tensorflow as tf

    gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [gpu])
    facts = precision_facts(keras, "tensorflow")
    assert facts["devices"] == ["/physical_device:GPU:0"]
    assert facts["tensor_float_32"] == tf.config.experimental.tensor_float_32_execution_enabled()
