"""Reading an ONNX graph: tensors put back onto layers and sub-layers by the names each
exporter writes (TF op names from tf2onnx, module paths from torch's legacy exporter,
the dynamo exporter's name-scope metadata), and weights named by PyTorch name. Graphs
are built by hand with onnx.helper: no export, no session."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tfparity.adapters.onnx.graph import Graph, Produced  # noqa: E402


def test_torch_and_tf_scopes_locate_layers_and_sub_layers():
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
    found = Graph(helper.make_model(graph), [], [], []).weights_for(pt)
    assert set(found) == set(pt) - {"bert.encoder.layer.0.output.dense.bias"}
    for name, value in found.items():
        np.testing.assert_allclose(value, pt[name], rtol=1e-6)


def test_dynamo_name_scopes_place_generic_tensor_names():
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


def test_gpt2_taps_are_module_inputs_and_its_hidden_states_the_blocks_ends():
    """GPT-2's taps, as its PyTorch layout's: ln_2's input (attention), mlp.c_proj's
    (intermediate), the block's output; hidden state 0 the first block's input (wte +
    wpe, summed outside either's scope), the last ln_f's output (dynamo name scopes)."""

    def made(name, scope, width=32, inputs=()):
        return Produced(name, scope, 3, width, True, inputs)

    nodes = [made("wte", "m.transformer.wte"), made("wpe", "m.transformer.wpe")]
    nodes.append(made("embeds", "m.transformer", inputs=("wte", "wpe")))
    previous = "embeds"
    for i in (0, 1):
        h = f"m.transformer.h.{i}"
        nodes += [
            made(f"ln1_{i}", h + ".ln_1", inputs=(previous,)),
            made(f"attn_{i}", h + ".attn.c_proj", inputs=(f"ln1_{i}",)),
            made(f"res1_{i}", h, inputs=(previous, f"attn_{i}")),
            made(f"ln2_{i}", h + ".ln_2", inputs=(f"res1_{i}",)),
            made(f"fc_{i}", h + ".mlp.c_fc", 128, (f"ln2_{i}",)),
            made(f"act_{i}", h + ".mlp.act", 128, (f"fc_{i}",)),
            made(f"proj_{i}", h + ".mlp.c_proj", inputs=(f"act_{i}",)),
            made(f"res2_{i}", h, inputs=(f"res1_{i}", f"proj_{i}")),
        ]
        previous = f"res2_{i}"
    nodes += [made("ln_f", "m.transformer.ln_f", inputs=(previous,))]
    nodes += [made("logits", "m.lm_head", 100, ("ln_f",))]
    located = Graph(None, nodes, [], []).located(32)
    assert located == {
        "hidden_states[0]": "embeds",
        "hidden_states[1]": "res2_0",
        "hidden_states[2]": "ln_f",
        **{f"layer_{i}.attention": f"res1_{i}" for i in (0, 1)},
        **{f"layer_{i}.intermediate": f"act_{i}" for i in (0, 1)},
        **{f"layer_{i}.output": f"res2_{i}" for i in (0, 1)},
    }
