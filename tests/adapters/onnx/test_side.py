"""The ONNX side on real files exported from tiny BERT with torch's legacy exporter: a
clean export (dynamic axes, every hidden state an output, weights in a ``.onnx.data``
file) passes against PyTorch with every hidden state compared; an export with one
weight scaled by 1.05 (static ``[2, 16]`` inputs, no hidden-state outputs, so they come
from the marked intermediates) fails localised to that layer and sub-layer with the
hint naming the weight. Broken files exit 2 naming what is wrong. Files are exported
once per module (about a second)."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from tfparity import cli  # noqa: E402
from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir  # noqa: E402
from tfparity.adapters.onnx.torch_export import export_torch  # noqa: E402

INPUTS = ["--random", "5", "--seq-len", "12", "--batch-size", "3"]
SCALED = "encoder.layer.1.intermediate.dense.weight"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import transformers

    root = tmp_path_factory.mktemp("onnx")
    ckpt = checkpoint_dir("bert")
    model = transformers.BertModel.from_pretrained(str(ckpt), attn_implementation="eager").eval()
    # the clean file keeps its weights in external data; a copy without its data file
    clean = export_torch(model, root / "clean.onnx", external_data=True)
    (root / "lost").mkdir()
    shutil.copy(clean, root / "lost" / "clean.onnx")
    with torch.no_grad():
        model.get_parameter(SCALED).mul_(1.05)
    export_torch(model, root / "scaled.onnx", hidden_states=False, dynamic=False)
    return {"ckpt": str(ckpt), "root": root}


def _crosscheck(capsys, tmp_path, path, ckpt, *extra):
    report = tmp_path / "report.json"
    code = cli.main(["crosscheck", str(path), "--pt", ckpt, *INPUTS, "--json", str(report), *extra])
    out = capsys.readouterr().out
    return code, out, json.loads(report.read_text())


def test_clean_export_with_external_data_passes_every_hidden_state(files, capsys, tmp_path):
    path = files["root"] / "clean.onnx"
    code, out, report = _crosscheck(capsys, tmp_path, path, files["ckpt"], "--localise", "always")
    assert code == 0, out
    names = {c["name"] for c in report["comparisons"]}
    assert {"hidden_states[0]", "hidden_states[1]", "hidden_states[2]", "pooler_output"} <= names
    assert all(c["passed"] for c in report["comparisons"])
    assert report["details"]["compares"].startswith("ONNX Runtime 1.32.0 (CPUExecutionProvider)")
    # the sub-layers came from the marked copy, every one within the referee's bound
    components = {c["name"]: c["accumulated_ok"] for c in report["details"]["components"]}
    assert {"layer_0.attention", "layer_1.intermediate", "layer_1.output"} <= set(components)
    assert all(components.values())
    assert "dynamic input shape [?x?]" in out
    assert "optimised session (ORT_ENABLE_ALL" in out and "graph optimisation off" in out


def test_a_weight_scaled_by_1_05_fails_localised_with_the_weight_named(files, capsys, tmp_path):
    path = files["root"] / "scaled.onnx"
    code, out, report = _crosscheck(capsys, tmp_path, path, files["ckpt"])
    assert code == 1, out
    d = report["first_divergence"]
    assert (d["hidden_state"], d["layer"], d["component"]) == (2, 1, "intermediate")
    assert SCALED in d["hint"] and "scaled by 1.05" in d["hint"], d["hint"]
    passed = {c["name"]: c["passed"] for c in report["comparisons"]}
    # hidden states are no outputs of this file: read from its intermediates
    assert passed["hidden_states[1]"] and not passed["hidden_states[2]"]
    assert "static input shape [2x16]" in out  # 5 rows of <= 12 tokens padded, cut back


def _refused(capsys, path) -> str:
    assert cli.main(["crosscheck", str(path), "--pt", "tiny:bert", "--random", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_text_file_named_onnx_exits_2(tmp_path, capsys):
    path = tmp_path / "x.onnx"
    path.write_text("not a model\n")
    assert "x.onnx is not an ONNX model" in _refused(capsys, path)


def test_a_missing_external_data_file_exits_2_naming_it(files, capsys):
    err = _refused(capsys, files["root"] / "lost" / "clean.onnx")
    assert "clean.onnx.data is missing" in err


def test_an_erfc_node_exits_2_naming_the_converter_and_the_fix(tmp_path, capsys):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("input_ids", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("Erfc", ["input_ids"], ["y"], name="bert/intermediate/Erfc")
    graph = helper.make_graph([node], "gelu", [x], [y])
    path = tmp_path / "erfc.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    err = _refused(capsys, path)
    assert "node 'bert/intermediate/Erfc' is an Erfc op" in err
    assert "no handler for TensorFlow's exact GELU" in err and "docs/onnx.md" in err


def test_without_onnxruntime_the_extra_is_named(monkeypatch, tmp_path, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "onnxruntime" else real(n, *a)
    )
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x08\x07")
    assert "pip install 'tfparity[onnx]'" in _refused(capsys, path)


def test_torch_and_tf_scopes_locate_layers_and_sub_layers():
    from tfparity.adapters.onnx.graph import Graph, Produced

    def produced(name, width=32):
        return Produced(name + ":0", name, 3, width, True)

    tf = "tf_bert_model/bert/encoder/layer_._{}/{}/dense/BiasAdd"
    graph = Graph(
        None,
        [
            produced("tf_bert_model/bert/embeddings/LayerNorm/batchnorm/add_1"),
            produced(tf.format(0, "attention/output")),
            produced(tf.format(0, "intermediate"), width=64),
            produced(tf.format(0, "output")),
            produced("/m/encoder/layer.1/attention/output/LayerNorm/LayerNormalization"),
            produced("/m/encoder/layer.1/output/LayerNorm/LayerNormalization"),
            produced("/m/pooler/dense/Gemm"),
        ],
        [],
        [],
    )
    located = graph.located(32)
    assert located["hidden_states[0]"].startswith("tf_bert_model/bert/embeddings/")
    assert located["layer_0.intermediate"] == tf.format(0, "intermediate") + ":0"
    assert located["hidden_states[1]"] == tf.format(0, "output") + ":0"
    assert located["layer_1.attention"].startswith("/m/encoder/layer.1/attention/")
    assert located["hidden_states[2]"].startswith("/m/encoder/layer.1/output/")
    assert not any("pooler" in v for v in located.values())


def test_weights_are_named_from_tf2onnx_variables_and_legacy_matmuls():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    up, bias, down = rng.normal(size=(4, 8)), rng.normal(size=8), rng.normal(size=(8, 4))
    scope = "tf_bert_model/bert/encoder/layer_._1/intermediate/dense"
    tensors = {
        f"{scope}/Tensordot/ReadVariableOp:0": up,  # a TF kernel, [in, out]
        f"{scope}/BiasAdd/ReadVariableOp:0": bias,
        "onnx::MatMul_7": down,  # the legacy exporter's folded transpose
    }
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in tensors.items()]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node(
        "MatMul", ["x", "onnx::MatMul_7"], ["y"], name="/m/encoder/layer.0/output/dense/MatMul"
    )
    graph = helper.make_graph([node], "g", [x], [y], initializer=inits)
    pt = {
        "bert.encoder.layer.1.intermediate.dense.weight": up.T,
        "bert.encoder.layer.1.intermediate.dense.bias": bias,
        "bert.encoder.layer.0.output.dense.weight": down.T,
        "bert.encoder.layer.0.output.dense.bias": bias,  # not in the graph: not found
    }
    from tfparity.adapters.onnx.graph import Graph

    found = Graph(helper.make_model(graph), [], [], []).weights_for(pt)
    assert set(found) == set(pt) - {"bert.encoder.layer.0.output.dense.bias"}
    for name, value in found.items():
        np.testing.assert_allclose(value, pt[name], rtol=1e-6)


def test_dynamo_name_scopes_place_generic_tensor_names():
    from onnx import TensorProto, helper

    from tfparity.adapters.onnx.graph import Graph

    def node(op, out, *modules):
        made = helper.make_node(op, ["x"], [out], name=f"node_{out}")
        scopes = ["", "m", *modules, out]  # the exporter's list: modules, then the op
        made.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(scopes))
        return made

    layer = "m.encoder.layer.1"
    nodes = [
        node("LayerNormalization", "layer_norm", "m.embeddings", "m.embeddings.LayerNorm"),
        node("Gelu", "val_75", layer, f"{layer}.intermediate", f"{layer}.intermediate.act"),
        node("LayerNormalization", "val_80", layer, f"{layer}.output", f"{layer}.output.LayerNorm"),
        node("Relu", "val_81"),  # a node the exporter placed in no module
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", 32])
    outs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None) for n in nodes]
    graph = Graph.read(helper.make_model(helper.make_graph(nodes, "g", [x], outs)))
    assert graph.located(32) == {
        "hidden_states[0]": "layer_norm",
        "layer_1.intermediate": "val_75",
        "hidden_states[2]": "val_80",
        "layer_1.output": "val_80",
    }
