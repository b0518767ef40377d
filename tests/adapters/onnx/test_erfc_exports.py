"""The unhandled ``Erfc`` files as users make them: Keras 3's ``model.export(path,
format="onnx")`` and tf2onnx's ``from_function`` on TensorFlow's exact GELU both log
"Unsupported ops: Erfc", save the file, and exit normally; tfparity exits 2 naming the
node and the fix. With the handler (tfparity.adapters.onnx.tf2onnx_erfc) the same
conversion runs and matches TensorFlow. Each file is a one-layer model (under a second)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
tf2onnx = pytest.importorskip("tf2onnx")

from tfparity import cli  # noqa: E402


@pytest.fixture
def unhandled(monkeypatch):
    """tf2onnx as installed: without the Erfc handler, even where this test process
    registered it for another test (tf2onnx keeps one registry per process)."""
    from tf2onnx.handler import tf_op

    for opset in tf_op.get_opsets().get("", []):
        if "Erfc" in opset:
            monkeypatch.delitem(opset, "Erfc")


def _gelu_model():
    import keras

    inputs = keras.Input((4,), name="x")
    dense = keras.layers.Dense(4, activation=lambda v: keras.activations.gelu(v, False))
    model = keras.Model(inputs, dense(inputs))
    model(np.zeros((1, 4), np.float32))  # export needs a model that was called
    return model


def _gelu_function():
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32, name="x")])
    def gelu(x):
        return tf.nn.gelu(x, approximate=False)

    return gelu


def _refusal(capsys, path) -> str:
    assert cli.main(["crosscheck", str(path), "--pt", "tiny:bert", "--random", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "please report it" not in err
    return err


def test_keras_export_to_onnx_leaves_erfc_and_exits_2_naming_node_and_fix(
    unhandled, tmp_path, capsys
):
    path = tmp_path / "keras.onnx"
    _gelu_model().export(str(path), format="onnx")
    assert path.is_file()  # saved, though ONNX Runtime cannot load it
    err = _refusal(capsys, path)
    assert "/Gelu/Erfc' is an Erfc op" in err
    assert "no handler for TensorFlow's exact GELU" in err and "docs/onnx.md" in err


def test_tf2onnx_leaves_erfc_and_exits_2_and_the_handler_fixes_it(unhandled, tmp_path, capsys):
    import onnxruntime as ort

    gelu = _gelu_function()
    broken = tmp_path / "tf2onnx.onnx"
    tf2onnx.convert.from_function(gelu, gelu.input_signature, output_path=str(broken))
    err = _refusal(capsys, broken)
    assert "is an Erfc op" in err and "docs/onnx.md" in err

    import importlib

    import tfparity.adapters.onnx.tf2onnx_erfc as erfc

    importlib.reload(erfc)  # registers the handler (again, where the fixture took it out)

    fixed = tmp_path / "fixed.onnx"
    tf2onnx.convert.from_function(gelu, gelu.input_signature, output_path=str(fixed))
    x = np.linspace(-4, 4, 4, dtype=np.float32)[None]
    (y,) = ort.InferenceSession(str(fixed)).run(None, {"x": x})
    np.testing.assert_allclose(y, gelu(x).numpy(), atol=1e-6)
