"""Fixtures the ONNX side's tests share: tiny GPT-2's LM exported once per session with
its KV cache by torch's dynamo exporter (about 20 s: the costliest file these tests
make), and the copies the tests edit from it."""

from __future__ import annotations

from pathlib import Path

import pytest

SCALED = "h.1.mlp.c_fc.weight"


@pytest.fixture(scope="session")
def gpt2_cached(tmp_path_factory) -> dict[str, Path | str]:
    """``export_with_cache`` of tiny GPT-2's LM (weights in external data) and two
    copies: ``scaled``, its initializer ``h.1.mlp.c_fc.weight`` times 1.05 (external
    data too), and ``plain``, a graph without a cache (each past input replaced by an
    empty tensor made inside the graph, the present outputs dropped: logits only, its
    hidden states read from inside it, its weights inline)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    import onnx
    import transformers
    from onnx import numpy_helper

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_with_cache

    root = tmp_path_factory.mktemp("onnx-gpt2-cache")
    ckpt = checkpoint_dir("gpt2")
    model = transformers.GPT2LMHeadModel.from_pretrained(str(ckpt), attn_implementation="eager")
    clean = export_with_cache(model, root / "cached.onnx", external_data=True)
    proto = onnx.load(clean)
    onnx.save_model(_without_cache(proto), root / "plain.onnx")
    (weight,) = [t for t in proto.graph.initializer if t.name.endswith(SCALED)]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.05, weight.name))
    scaled = root / "scaled.onnx"
    onnx.save_model(proto, scaled, save_as_external_data=True, location="scaled.onnx.data")
    return {"ckpt": str(ckpt), "clean": clean, "scaled": scaled, "plain": root / "plain.onnx"}


def _without_cache(proto):
    """A copy of a cached graph that takes no past: each ``past_key_values.*`` input made
    inside it as zeros of ``[batch, heads, 0, head_dim]`` (the batch from ``input_ids``),
    the ``present.*`` outputs dropped."""
    import onnx
    from onnx import TensorProto, helper

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graph = copy.graph
    past = [i for i in graph.input if i.name.startswith("past_key_values.")]
    made = [helper.make_node("Shape", ["input_ids"], ["batch_dim"], start=0, end=1)]
    for i in past:
        dims = i.type.tensor_type.shape.dim
        rest = helper.make_tensor(
            f"{i.name}_rest", TensorProto.INT64, [3], [dims[1].dim_value, 0, dims[3].dim_value]
        )
        zero = helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])
        made += [
            helper.make_node("Constant", [], [f"{i.name}_rest"], value=rest),
            helper.make_node(
                "Concat", ["batch_dim", f"{i.name}_rest"], [f"{i.name}_shape"], axis=0
            ),
            helper.make_node("ConstantOfShape", [f"{i.name}_shape"], [i.name], value=zero),
        ]
    kept_inputs = [i for i in graph.input if i not in past]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    kept_outputs = [o for o in graph.output if o.name == "logits"]
    del graph.output[:]
    graph.output.extend(kept_outputs)
    nodes = [*made, *graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    return copy
