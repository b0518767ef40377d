"""Sub-layer taps of ``tfparity backends``: the layers inside a graph layer recorded by
their path, in the order they ran, in the same forward pass as the graph's layers.

The worker's recording runs here, in this process (Keras 3 on TensorFlow), on a model
with a custom nested layer and on a tiny keras-hub backbone: no backend process is
started (tests/cross_backend/test_backends*.py run the real backends). The judge is tested on
made-up outputs where one sublayer is wrong on one backend.
"""

from __future__ import annotations

import numpy as np
import pytest

keras = pytest.importorskip("keras")

from tfparity.adapters.keras_backends import worker  # noqa: E402
from tfparity.adapters.keras_backends.sublayers import SublayerTaps  # noqa: E402
from tfparity.cross_backend.hints import layer_hints  # noqa: E402
from tfparity.cross_backend.judge import BackendOutputs, check_backends  # noqa: E402
from tfparity.report.backends import render_backends  # noqa: E402


@keras.saving.register_keras_serializable(package="test_sublayers")
class Inner(keras.layers.Layer):
    """A layer holding one unnamed Dense (Keras names it ``dense_N``, a process-wide
    counter: the taps name it by its attribute instead)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.proj = keras.layers.Dense(6)

    def call(self, x):
        return keras.ops.tanh(self.proj(x))


@keras.saving.register_keras_serializable(package="test_sublayers")
class Block(keras.layers.Layer):
    """Dense ``up``, a nested :class:`Inner`, and ``down`` called twice (shared)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.up = keras.layers.Dense(6, name="up")
        self.inner = Inner(name="inner")
        self.down = keras.layers.Dense(6)

    def call(self, x):
        return self.down(self.down(self.inner(self.up(x))))


def _nested_model():
    x = keras.Input((6,))
    h = keras.layers.Dense(6, name="pre")(x)
    h = Block(name="block")(h)
    return keras.Model(x, keras.layers.Dense(3, name="head")(h))


NESTED_ORDER = [
    "pre",
    "block/up",
    "block/inner/proj",
    "block/inner",
    "block/down",
    "block/down#1",
    "block",
    "head",
]


@pytest.fixture(scope="module")
def nested():
    model = _nested_model()
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    return model, x, worker._run(keras, model, [x])


def test_the_sublayers_of_a_nested_layer_are_recorded_by_path_in_the_order_they_ran(nested):
    _model, _x, run = nested
    assert run.names == NESTED_ORDER
    assert list(run.outputs) == NESTED_ORDER
    taps = [n for n in NESTED_ORDER if "/" in n]
    assert run.parents == dict.fromkeys(taps, "block")


def test_each_tap_equals_the_sublayer_called_directly(nested):
    model, x, run = nested
    block = model.get_layer("block")
    direct = {"pre": model.get_layer("pre")(x)}
    direct["block/up"] = block.up(direct["pre"])
    direct["block/inner/proj"] = block.inner.proj(direct["block/up"])
    direct["block/inner"] = block.inner(direct["block/up"])
    direct["block/down"] = block.down(direct["block/inner"])
    direct["block/down#1"] = block.down(direct["block/down"])
    direct["block"] = block(direct["pre"])
    direct["head"] = model(x)
    for name, value in direct.items():
        np.testing.assert_allclose(run.outputs[name], np.asarray(value), rtol=1e-6, atol=1e-6)


def test_taps_are_restored_and_a_wrong_value_would_be_seen(nested):
    model, x, run = nested
    block = model.get_layer("block")
    assert "call" not in vars(block.up)  # the class's call again, no wrapper left
    with SublayerTaps(keras, [block]) as tapped:
        block(np.asarray(run.outputs["pre"]) * 2.0)  # another input: other values
    assert [t.name for t in tapped.taps] == NESTED_ORDER[1:6]
    assert not np.allclose(tapped.taps[0].value, run.outputs["block/up"], atol=1e-3)


def test_the_float64_twin_records_the_same_taps_at_float64(nested):
    model, x, run = nested
    try:
        twin = worker._run(keras, worker._float64_twin(keras, model), [x.astype(np.float64)])
    finally:
        keras.config.set_dtype_policy("float32")  # the twin sets the global policy
    assert twin.names == run.names  # auto-named Dense layers named alike in both
    assert {str(a.dtype) for a in twin.outputs.values()} == {"float64"}
    np.testing.assert_allclose(twin.outputs["block/down#1"], run.outputs["block/down#1"], atol=1e-5)


@pytest.fixture(scope="module")
def bert():
    keras_hub = pytest.importorskip("keras_hub")
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
    )
    feed = {
        "token_ids": np.array([[1, 2, 3, 4], [5, 6, 7, 0]]),
        "segment_ids": np.zeros((2, 4), int),
        "padding_mask": np.array([[1, 1, 1, 1], [1, 1, 1, 0]]),
    }
    inputs = [feed[t.name] for t in backbone.inputs]
    return backbone, feed, worker._run(keras, backbone, inputs)


def test_a_keras_hub_backbone_records_its_blocks_sublayers_before_each_block(bert):
    _backbone, _feed, run = bert
    names = run.names
    block_1 = [n for n in names if n.startswith("transformer_layer_1/")]
    assert names.index("transformer_layer_0") < names.index(block_1[0])
    assert names.index(block_1[-1]) == names.index("transformer_layer_1") - 1
    for sub in (
        "self_attention_layer/query",
        "self_attention_layer/softmax",
        "self_attention_layer/attention_output",
        "self_attention_layer_norm",
        "feedforward_intermediate_dense",
        "feedforward_output_dense",
        "feedforward_layer_norm",
    ):
        assert f"transformer_layer_1/{sub}" in block_1
    assert block_1.index("transformer_layer_1/self_attention_layer/query") < block_1.index(
        "transformer_layer_1/feedforward_output_dense"
    )
    assert run.parents["transformer_layer_1/feedforward_output_dense"] == "transformer_layer_1"


def test_a_keras_hub_tap_equals_its_sublayer_called_directly(bert):
    backbone, feed, run = bert
    block = backbone.get_layer("transformer_layer_1")
    into = run.outputs["transformer_layer_1/feedforward_intermediate_dense"]
    direct = block._feedforward_output_dense(into)
    got = run.outputs["transformer_layer_1/feedforward_output_dense"]
    np.testing.assert_allclose(got, np.asarray(direct), rtol=1e-6, atol=1e-6)
    plain = backbone(feed)["sequence_output"]  # BERT's: the last block's output, no norm
    np.testing.assert_allclose(run.outputs["transformer_layer_1"], np.asarray(plain), atol=1e-6)


def test_hints_at_a_sublayer_read_that_sublayer_not_its_block(bert):
    backbone, _feed, run = bert
    facts = {"jax": worker.layer_facts(backbone)}
    assert set(run.parents) <= set(facts["jax"])  # every tap has facts of its own

    def attention(name):
        return any("computes attention" in h for h in layer_hints(name, ["jax"], facts, {}))

    assert attention("transformer_layer_1/self_attention_layer")
    assert attention("transformer_layer_1")  # the block holds attention
    assert not attention("transformer_layer_1/feedforward_output_dense")  # a Dense does not


RNG = np.random.default_rng(1)
ALL = ["tensorflow", "jax", "torch"]
LAYERS = ["embed", "block/attention", "block/ffn", "block/norm", "block", "head"]
TRUTH = {name: RNG.standard_normal((2, 4, 8)) for name in LAYERS}
PARENTS = {n: "block" for n in LAYERS if n.startswith("block/")}


def _float32(truth, scale=1.0):
    noise = RNG.standard_normal(truth.shape) * 1e-7 * np.abs(truth)
    return ((truth + noise) * scale).astype(np.float32)


def _judged(faulty_from: str | None):
    """Every backend's float32 run; on jax, 0.1% off from ``faulty_from`` on."""
    runs = {}
    for backend in ALL:
        off = backend == "jax" and faulty_from is not None
        runs[backend] = {
            n: _float32(t, 1.001 if off and LAYERS.index(n) >= LAYERS.index(faulty_from) else 1)
            for n, t in TRUTH.items()
        }
    return check_backends(BackendOutputs("made-up", runs, TRUTH, "tensorflow", parents=PARENTS))


def test_judge_names_the_sublayer_that_parts_on_one_backend_not_its_block():
    report = _judged("block/ffn")
    f = report.details["first_divergence"]
    assert not report.passed
    assert (f["backend"], f["layer"], f["kind"]) == ("jax", "block/ffn", "one")
    rows = {row["layer"]: row for row in report.details["layers"]}
    assert rows["block/attention"]["backends"]["jax"]["passed"]
    assert rows["block/ffn"]["parent"] == "block" and "parent" not in rows["block"]
    text = render_backends(report)
    assert "first divergence: backend jax, layer block/ffn (one)" in text
    assert "block/norm" in text


def test_judge_passes_clean_sublayers():
    report = _judged(None)
    assert report.passed
    assert [row["layer"] for row in report.details["layers"]] == LAYERS
    assert "agree with the float64 referee at 3 layers and 3 sublayers" in render_backends(report)
