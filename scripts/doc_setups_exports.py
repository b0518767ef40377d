"""Setups of scripts/doc_examples.py that write exported models: SavedModels,
LiteRT flatbuffers, ONNX files, Keras 3 files."""

from __future__ import annotations

from pathlib import Path


def saved_model_export(
    spec: str, directory: Path, *, fault: bool = False, mask: bool = True
) -> None:
    """``spec`` as a SavedModel with a serving signature returning hidden states (a
    layer-1 FFN weight scaled by 1.1 first, with ``fault``; over input_ids and token
    types alone, without ``mask``)."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import export_saved_model, perturb_ffn

    model = TFModel.load(spec)
    if fault:
        perturb_ffn(model, layer=1)
    export_saved_model(model, directory, mask=mask)


def keras_hub_exports(work: Path) -> None:
    """keras-hub's tiny BERT backbone as Keras 3 files: ``bert.keras`` as converted, and
    ``bert-faulty.keras`` with layer 1's FFN kernel scaled by 1.1."""
    from tfparity.adapters.keras_hub.side import load_keras_hub
    from tfparity.architectures import keras_hub_layouts
    from tfparity.architectures.faults import scale

    backbone = load_keras_hub("keras-hub:tiny:bert").backbone
    backbone.save(work / "bert.keras")
    scale(keras_hub_layouts.block(backbone, 1)._feedforward_intermediate_dense.kernel, 1.1)
    backbone.save(work / "bert-faulty.keras")


def keras_backends_mixed(work: Path) -> None:
    """The example classifier built under mixed_float16, its custom layer 0.1% too large
    on torch only (``mixed-float16-torch-skew.keras``)."""
    from tfparity.examples.keras_backends_model import build_classifier

    build_classifier("mixed_float16", ("torch", 1.001)).save(
        work / "mixed-float16-torch-skew.keras"
    )


def keras_backends(work: Path) -> None:
    """The example Keras 3 model of tfparity/examples/keras_backends_model.py saved twice:
    clean (``model.keras``), with its custom layer 0.1% off on JAX (``jax-fault.keras``) and
    0.1% off in float32 on every backend (``float32-fault.keras``) and with its gradient
    stopped on torch only (``torch-gradient-fault.keras``)."""
    from tfparity.examples.keras_backends_model import save

    save(work / "model.keras")
    save(work / "jax-fault.keras", fault="jax")
    save(work / "float32-fault.keras", fault="float32")
    save(work / "torch-gradient-fault.keras", fault="torch_gradient")


def litert_file(path: Path, quantisation: str, fault: bool = False) -> None:
    """tiny:bert as a LiteRT flatbuffer (static [2, 16]); ``fault``: its layer-1 FFN
    weight scaled by 1.1 before the conversion."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.testing import perturb_ffn, to_litert

    model = TFModel.load("tiny:bert")
    if fault:
        perturb_ffn(model, layer=1, factor=1.1)
    to_litert(model, path, quantisation=quantisation)


def onnx_files(work: Path) -> None:
    """tiny:bert's PyTorch model exported by torch's legacy exporter (``bert.onnx``), and
    again with its layer-1 FFN up-projection scaled by 1.05 (``scaled.onnx``), as
    tests/adapters/onnx/test_side.py makes them."""
    import torch
    import transformers

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_torch

    model = transformers.BertModel.from_pretrained(str(checkpoint_dir("bert"))).eval()
    export_torch(model, work / "bert.onnx")
    with torch.no_grad():
        model.encoder.layer[1].intermediate.dense.weight.mul_(1.05)
    export_torch(model, work / "scaled.onnx", hidden_states=False)


def onnx_gpt2(work: Path) -> None:
    """tiny:gpt2's LM exported with its KV cache by the dynamo exporter, its layer-1 FFN
    up-projection scaled by 1.05 in the file (``gpt2-scaled.onnx``), as tests/adapters/
    onnx/conftest.py makes it (a cross-check feeds the cache empty)."""
    import onnx
    import transformers
    from onnx import numpy_helper

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_with_cache

    model = transformers.GPT2LMHeadModel.from_pretrained(str(checkpoint_dir("gpt2"))).eval()
    path = export_with_cache(model, work / "gpt2.onnx", external_data=True)
    proto = onnx.load(path)
    (weight,) = [t for t in proto.graph.initializer if t.name.endswith("h.1.mlp.c_fc.weight")]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.05, weight.name))
    onnx.save_model(proto, work / "gpt2-scaled.onnx")


def onnx_int8(work: Path) -> None:
    """tiny:bert exported (``float.onnx``, no hidden-state outputs) and quantised by
    ``quantize_dynamic`` to int8 (``bert-int8.onnx``), and that file with the scale of
    layer 1's FFN up-projection (``onnx::MatMul_<n>_scale``) times 1.5
    (``bert-int8-scale.onnx``), as tests/adapters/onnx/test_quantised.py makes them."""
    import onnx
    import transformers
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tfparity.adapters.hf_tf.tiny_checkpoints import checkpoint_dir
    from tfparity.adapters.onnx.torch_export import export_torch

    model = transformers.BertModel.from_pretrained(str(checkpoint_dir("bert"))).eval()
    export_torch(model, work / "float.onnx", hidden_states=False)
    quantize_dynamic(work / "float.onnx", work / "bert-int8.onnx", weight_type=QuantType.QInt8)
    graph = onnx.load(work / "bert-int8.onnx")
    names = {t.name: t for t in graph.graph.initializer}
    (node,) = [
        n
        for n in graph.graph.node
        if n.name.endswith("layer.1/intermediate/dense/MatMul_quant_scales_mul")
    ]
    (scale,) = [names[i] for i in node.input if i in names]
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * 1.5, scale.name))
    onnx.save(graph, work / "bert-int8-scale.onnx")


def litert_mlm(work: Path) -> None:
    """tiny:bert's masked LM as float32 (``mlm-fp32.tflite``) and dynamic-range int8
    (``mlm-int8.tflite``) flatbuffers, and int8 with noise (scale 0.5, seed 0) on its LM
    output bias (``mlm-noisy.tflite``), as tests/adapters/exported/test_litert_quantised.py
    makes them."""
    import numpy as np

    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.architectures.heads import Head
    from tfparity.testing import to_litert

    model = TFModel.load("tiny:bert", head=Head.MASKED_LM)
    to_litert(model, work / "mlm-fp32.tflite")
    to_litert(model, work / "mlm-int8.tflite", quantisation="dynamic-range int8")
    (bias,) = [w for w in model.model.weights if w.name.endswith("predictions/bias:0")]
    noise = np.random.default_rng(0).normal(0, 0.5, bias.shape).astype(np.float32)
    bias.assign(bias.numpy() + noise)
    to_litert(model, work / "mlm-noisy.tflite", quantisation="dynamic-range int8")
