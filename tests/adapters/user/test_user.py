"""A model of the user's own as the TF side (tfparity/adapters/user.py, user_maps.py,
objects.py): a hand-written Keras 3 BERT (tfparity/examples/keras_bert.py) with the
PyTorch weights of tiny:bert ported in passes against ``pt="tiny:bert"`` and, with one
FFN kernel of layer 1 scaled, fails localised to layer 1 with the weight named; plain
callables, a tf-keras functional model and a bare keras-hub backbone run too; bad maps
and a missing reference are exit 2 (TfparityError) naming what is wrong."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("keras")

import keras  # noqa: E402

import tfparity  # noqa: E402
from tfparity import InputOptions  # noqa: E402
from tfparity.adapters.hf_tf.tf_model import TFModel  # noqa: E402
from tfparity.adapters.reference.pt_model import load_pt  # noqa: E402
from tfparity.adapters.user.side import NO_LAYER_MAP, UserModel  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402
from tfparity.examples import keras_bert  # noqa: E402
from tfparity.testing import perturb_ffn  # noqa: E402

FFN = "encoder.layer.1.intermediate.dense.weight"
INPUTS = InputOptions(random=4, seq_len=12, batch_size=4, seed=3)


@pytest.fixture(scope="module")
def reference():
    return load_pt("tiny:bert")


@pytest.fixture(scope="module")
def built(reference):
    """The hand-written model, built once; each test ports the weights in afresh."""
    return keras_bert.build_bert(reference.config)


@pytest.fixture
def port(built, reference):
    keras_bert.port_weights(built, keras_bert.weight_map(reference.config), reference.weights())
    return built


@pytest.fixture(scope="module")
def maps(reference):
    return {
        "layers": keras_bert.layer_map(reference.config),
        "weights": keras_bert.weight_map(reference.config),
    }


def _scale_ffn(model, factor=1.1):
    kernel = model.get_layer("block_1").ffn_up.kernel
    kernel.assign(kernel * factor)


def _check(tf, pt="tiny:bert", **kwargs):
    (report,) = tfparity.crosscheck(tf=tf, pt=pt, inputs=INPUTS, **kwargs)
    return report


# ----------------------------------------------------------------------------- Keras 3


def test_hand_written_keras_bert_passes_with_every_hidden_state_compared(port, maps):
    report = _check(port, **maps)
    assert report.passed, [c.name for c in report.failures]
    names = {c.name for c in report.comparisons}
    assert {"hidden_states[0]", "hidden_states[1]", "hidden_states[2]"} <= names
    assert {"last_hidden_state", "pooler_output"} <= names
    assert [row["hidden_state"] for row in report.details["layers"]] == [0, 1, 2]
    assert report.model == "keras_bert"


def test_scaled_ffn_kernel_fails_localised_to_layer_1_with_the_weight_named(port, maps):
    _scale_ffn(port)
    report = _check(port, **maps)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)
    assert f"weight {FFN} is PyTorch's scaled by 1.1" in d.hint
    assert "block_1/ffn_up/kernel" in d.hint
    rows = {row["hidden_state"]: row["passed"] for row in report.details["layers"]}
    assert rows == {0: True, 1: True, 2: False}


def test_without_a_layer_map_the_failure_is_at_the_output_with_a_note(port, maps):
    _scale_ffn(port)
    report = _check(port, weights=maps["weights"])
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (None, "output", None)
    assert NO_LAYER_MAP in report.notes
    assert not any(c.name.startswith("hidden_states") for c in report.comparisons)
    assert FFN in d.hint  # the weights map still names the weight
    from tfparity.report.text import divergence_text

    assert "not localised to a layer" in divergence_text(d)


def test_without_maps_a_correct_model_passes_on_its_outputs(port):
    report = _check(port)
    assert report.passed
    assert {c.name for c in report.comparisons} == {"last_hidden_state", "pooler_output"}


def test_partial_layer_map_says_which_hidden_states_are_compared(port, maps):
    _scale_ffn(port)
    report = _check(port, layers={"block_1": 2})
    assert (report.first_divergence.hidden_state, report.first_divergence.layer) == (2, 1)
    assert any("maps hidden states 2 of 0..2" in n for n in report.notes)


def test_user_model_and_assert_crosscheck_localise(port, maps):
    side = tfparity.user_model(port, **maps)
    assert isinstance(side, UserModel)
    tfparity.assert_crosscheck(side, "tiny:bert", inputs=INPUTS)
    _scale_ffn(port)
    with pytest.raises(AssertionError, match=r"^layer 1 .*diverges \(hidden_states\[2\]"):
        tfparity.assert_crosscheck(port, "tiny:bert", inputs=INPUTS, **maps)


def test_a_layer_object_as_key(port, maps):
    _scale_ffn(port)
    layers = {port.get_layer("embeddings_ln"): 0, port.get_layer("block_1"): 2}
    report = _check(port, layers=layers)
    assert report.first_divergence.hidden_state == 2


# ----------------------------------------------------------------------------- callables


def test_plain_callable_returning_the_last_hidden_state_passes(load_tf_model):
    hf = load_tf_model("tiny:bert").model

    def encode(inputs):
        return hf(**inputs, training=False).last_hidden_state

    report = _check(encode)
    assert report.passed
    assert report.model == "encode"


def test_callable_with_output_names_mapped_localises_a_broken_layer():
    broken = TFModel.load("tiny:bert")
    perturb_ffn(broken, 1, 1.1)

    def encode(inputs):
        out = broken.model(**inputs, output_hidden_states=True, training=False)
        h = out.hidden_states
        return {"last_hidden_state": out.last_hidden_state, "emb": h[0], "l0": h[1], "l1": h[2]}

    report = _check(encode, layers={"emb": 0, "l0": 1, "l1": 2})
    assert not report.passed
    assert (report.first_divergence.hidden_state, report.first_divergence.layer) == (2, 1)


def test_callable_outputs_must_be_named(port):
    with pytest.raises(TfparityError, match="return the last hidden state, or a dict"):
        _check(lambda inputs: (port(inputs)["last_hidden_state"],))
    with pytest.raises(
        TfparityError,
        match=r"None of <lambda>'s outputs \(sequence\) has a counterpart of the same name in "
        r"the PyTorch reference \(last_hidden_state, pooler_output, hidden_states\[0\.\.2\]\)",
    ):
        _check(lambda inputs: {"sequence": port(inputs)["last_hidden_state"]})


def test_weights_map_refused_for_a_plain_callable(port):
    with pytest.raises(TfparityError, match="a plain callable has none"):
        tfparity.user_model(lambda inputs: inputs, weights={"a/kernel": "x.weight"})


# ----------------------------------------------------------------------------- other Keras


def test_tf_keras_functional_model_passes(load_tf_model):
    import tf_keras

    hf = load_tf_model("tiny:bert").model
    ids = tf_keras.Input((None,), dtype="int32", name="input_ids")
    mask = tf_keras.Input((None,), dtype="int32", name="attention_mask")
    out = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    model = tf_keras.Model([ids, mask], out, name="wrapped")
    report = _check(model)
    assert report.passed, [c.name for c in report.failures]
    # the wrapped model's variables are named (no weights= needed), and none is left out
    assert any("are named by transformers' variable paths" in n for n in report.notes)
    assert not any("have no PyTorch name" in n for n in report.notes)


def test_bare_keras_hub_backbone_is_the_keras_hub_side():
    """keras-hub's DistilBERT port passes (docs/keras-hub.md): held in memory it is the
    same side, its weights traced through the converter run on the reference."""
    pytest.importorskip("keras_hub")
    from tfparity.adapters.keras_hub.side import KerasHubModel, load_keras_hub
    from tfparity.architectures import lookup
    from tfparity.architectures.faults import scale

    backbone = load_keras_hub("keras-hub:tiny:distilbert").backbone
    side = tfparity.load_model(backbone, pt="tiny:distilbert")
    assert isinstance(side, KerasHubModel)
    assert any("held in memory" in n for n in side.notes)
    tfparity.assert_crosscheck(backbone, "tiny:distilbert", inputs=INPUTS)
    ffn = lookup("distilbert").ffn_weight.format(layer=1)
    (port,) = [p for p in side.ports if p.hf_key.endswith(ffn)]
    scale(port.variable, 1.1)
    with pytest.raises(AssertionError, match=r"^layer 1 .*diverges \(hidden_states\[2\]") as failed:
        tfparity.assert_crosscheck(backbone, "tiny:distilbert", inputs=INPUTS)
    assert f"weight {ffn} is PyTorch's scaled by 1.1" in str(failed.value)


# ----------------------------------------------------------------------------- bad input


def test_unknown_layer_name_is_refused_with_the_closest(port):
    with pytest.raises(TfparityError, match=r"'block_9'.*did you mean.*'block_1'"):
        tfparity.user_model(port, layers={"block_9": 1})


def test_hidden_state_out_of_range_is_refused_naming_the_range(port):
    with pytest.raises(TfparityError, match=r"hidden state 3, but the reference tiny:bert has 2"):
        _check(port, layers={"block_1": 3})


@pytest.mark.parametrize(
    ("layers", "message"),
    [
        ({"block_0": -1}, "give the Hugging Face hidden state index"),
        ({"block_0": "1"}, "give the Hugging Face hidden state index"),
        ({"block_0": 1, "block_1": 1}, "each hidden state comes from one layer"),
    ],
)
def test_bad_layer_indices_are_refused(port, layers, message):
    with pytest.raises(TfparityError, match=message):
        tfparity.user_model(port, layers=layers)


def test_a_layer_that_does_not_run_is_refused(port):
    stray = keras.layers.Dense(2)
    with pytest.raises(TfparityError, match="did not run in the model's forward pass"):
        _check(port, layers={stray: 1})


def test_unknown_variable_path_is_refused_with_the_closest(port):
    with pytest.raises(TfparityError, match=r"'block_1/ffn_upp/kernel'.*'block_1/ffn_up/kernel'"):
        tfparity.user_model(port, weights={"block_1/ffn_upp/kernel": FFN})


def test_bad_transform_and_unknown_pt_name_are_refused(port, reference):
    with pytest.raises(TfparityError, match="'transpose'"):
        tfparity.user_model(port, weights={"block_1/ffn_up/kernel": (FFN, "flip")})
    side = tfparity.user_model(port, weights={"block_1/ffn_up/kernel": "encoder.layer.1.ffn.w"})
    with pytest.raises(
        TfparityError,
        match=r"PyTorch weight 'encoder.layer.1.ffn.w'.*did you mean: 'encoder.layer.1",
    ):
        side.bound("tiny:bert").weight_map().weights_for(reference.weights())


def test_a_model_of_your_own_needs_pt(port):
    with pytest.raises(TfparityError, match="Pass pt=<MODEL spec>"):
        tfparity.crosscheck(tf=port)
    with pytest.raises(TfparityError, match="Pass pt=<MODEL spec>"):
        tfparity.check_embeds(port)


def test_maps_are_refused_for_a_spec():
    with pytest.raises(TfparityError, match="layers= and weights= are for a model of your own"):
        tfparity.crosscheck("tiny:bert", layers={"x": 0})


def test_an_object_that_cannot_run_is_refused():
    with pytest.raises(TfparityError, match="neither a MODEL spec, a Keras model nor a callable"):
        tfparity.crosscheck(tf=object(), pt="tiny:bert")


def test_inputs_it_cannot_feed_are_named():
    ids = keras.Input((None,), dtype="int32", name="input_ids")
    pixels = keras.Input((None,), dtype="float32", name="pixel_values")
    model = keras.Model([ids, pixels], keras.layers.Embedding(10, 32)(ids))
    with pytest.raises(TfparityError, match="'pixel_values', which tfparity cannot feed"):
        _check(model)


def test_only_eager_float32(port):
    from tfparity.adapters.runtime.execution_options import ExecutionOptions

    with pytest.raises(TfparityError, match="models of your own run eagerly in float32"):
        tfparity.crosscheck(tf=port, pt="tiny:bert", execution=ExecutionOptions(xla=True))


def test_the_docs_page_shows_the_example_module_as_it_is():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    page = (root / "docs" / "your-own-model.md").read_text()
    block = page.split("<!-- code: tfparity/examples/keras_bert.py -->\n```python\n")[1]
    shown = block.split("\n```\n<!-- end of code -->")[0]
    assert shown == (root / "tfparity" / "examples" / "keras_bert.py").read_text().rstrip("\n")


def test_subclassed_keras_model_with_nested_layers_as_keys(port):
    class Wrapper(keras.Model):
        def __init__(self, inner):
            super().__init__(name="wrapper")
            self.inner = inner

        def call(self, inputs):
            return self.inner(inputs)["last_hidden_state"]

    _scale_ffn(port)
    model = Wrapper(port)
    layers = {port.get_layer("block_0"): 1, port.get_layer("block_1"): 2}
    report = _check(model, layers=layers)
    assert (report.first_divergence.hidden_state, report.first_divergence.layer) == (2, 1)
    assert {c.name for c in report.comparisons} >= {"hidden_states[1]", "last_hidden_state"}


def test_a_callable_with_a_task_head_is_checked_against_the_head_its_spec_names(load_tf_model):
    spec = "tiny:bert/sequence-classification"
    classifier = load_tf_model(spec).model

    def classify(inputs):
        return {"logits": classifier(**inputs, training=False).logits}

    report = _check(classify, pt=spec)
    assert report.passed, [c.name for c in report.failures]
    assert [c.name for c in report.comparisons] == ["logits"]
    assert report.details["head"] == "sequence-classification"


def test_weights_the_map_leaves_out_are_named_as_not_compared(port, maps):
    _scale_ffn(port)
    partial = {k: v for k, v in maps["weights"].items() if "ffn_up" not in k}
    report = _check(port, layers=maps["layers"], weights=partial)
    hint = report.first_divergence.hint
    assert "weights= does not map" in hint and "not compared" in hint
    assert "scaled by" not in hint  # the broken kernel is not in the map: not compared


def test_a_wrong_shaped_output_headlines_the_verdict_not_a_passing_hidden_state(
    load_tf_model, capsys
):
    """The classifier's logits cut to one label while its hidden states agree: the
    verdict names the shape mismatch (it used to quote a passing hidden state's
    difference, the failing tensor having compared nothing)."""
    from tfparity.report.text import render

    spec = "tiny:bert/sequence-classification"
    classifier = load_tf_model(spec).model

    def classify(inputs, cut=True):
        out = classifier(**inputs, output_hidden_states=True, training=False)
        logits = out.logits[:, :1] if cut else out.logits
        return {"logits": logits, "emb": out.hidden_states[0], "l0": out.hidden_states[1]}

    layers = {"emb": 0, "l0": 1}
    report = _check(classify, pt=spec, layers=layers)
    assert not report.passed
    last = render(report).splitlines()[-1]
    assert re.fullmatch(
        r"FAIL crosscheck: 1 of \d+ tensors differ; logits: shape \[4, 1\] vs \[4, 2\]", last
    )
    right = _check(lambda inputs: classify(inputs, cut=False), pt=spec, layers=layers)
    assert right.passed
    assert render(right).splitlines()[-1].startswith("PASS crosscheck: ")


# ----------------------------------------------------------------------------- outputs


@pytest.fixture(scope="module")
def embedder(load_tf_model):
    """A model shaped like users': a TFBertModel, a mean-pool, a Dense head, returning
    the last hidden state (shifted by ``shift``, 0 as built) and outputs of its own."""
    import tensorflow as tf

    from tfparity.examples import own_head

    model = own_head.tf_head_model(load_tf_model("tiny:bert").model)
    shift = tf.Variable(0.0)

    def run(inputs, own=("embedding",)):
        out = model(inputs, training=False)
        mask = tf.cast(inputs["attention_mask"], tf.float32)[:, :, None]
        pooled = tf.reduce_sum(out["last_hidden_state"] * mask, 1) / tf.reduce_sum(mask, 1)
        found = {"embedding": pooled, "logits": out["logits"]}
        return {"last_hidden_state": out["last_hidden_state"] + shift} | {k: found[k] for k in own}

    return run, shift


def test_outputs_of_its_own_are_named_not_compared_and_the_shared_one_judged(embedder):
    run, shift = embedder
    report = _check(run)
    assert report.passed
    assert [c.name for c in report.comparisons] == ["last_hidden_state"]
    assert "Model outputs not compared (no counterpart): embedding." in report.notes
    assert (
        "Reference outputs not compared (no counterpart in your model): pooler_output."
        in report.notes
    )
    shift.assign(1e-3)
    try:
        broken = _check(run)
    finally:
        shift.assign(0.0)
    assert not broken.passed
    assert [c.name for c in broken.failures] == ["last_hidden_state"]


def test_no_output_shared_with_the_reference_is_exit_2_naming_both_sides(embedder):
    run, _ = embedder
    with pytest.raises(
        TfparityError,
        match=r"None of <lambda>'s outputs \(embedding, logits\) has a counterpart .* PyTorch "
        r"reference \(last_hidden_state, pooler_output, hidden_states\[0\.\.2\]\): nothing",
    ):
        _check(lambda inputs: {k: v for k, v in run(inputs, ("embedding", "logits")).items()
                               if k != "last_hidden_state"})  # fmt: skip


# ----------------------------------------------------------------------------- HF wrappers


def _wrapper_of(hf):
    """A tf-keras model of the user's own around an HF TF model, with a Dense head."""
    import tf_keras

    class Wrapper(tf_keras.Model):
        def __init__(self, body):
            super().__init__(name="wrapper")
            self.body = body
            self.head = tf_keras.layers.Dense(3, name="head")

        def call(self, inputs, training=False):
            out = self.body(**inputs, training=training)
            self.head(out.pooler_output)  # the user's own head: no PyTorch counterpart
            return {"last_hidden_state": out.last_hidden_state}

    return Wrapper(hf)


def test_a_wrapper_of_an_hf_tf_model_names_its_weights_from_transformers_paths():
    """No weights= map: the wrapped TFBertModel's variables carry transformers' paths,
    so the hint names the PyTorch weight; the head's variables are named as unnamed."""
    tf_model = TFModel.load("tiny:bert")  # broken below: its own copy
    wrapper = _wrapper_of(tf_model.model)
    clean = _check(wrapper)
    assert clean.passed, [c.name for c in clean.failures]
    (note,) = [n for n in clean.notes if n.startswith("No weights map")]
    body = tf_model.model.name  # tf_bert_model, or tf_bert_model_<n> after others
    assert f"TFBertModel '{body}'" in note and "wrapper/head/kernel" in note
    assert "cannot name a weight" not in " ".join(clean.notes)
    perturb_ffn(tf_model, layer=1, factor=1.1)
    broken = _check(wrapper)
    assert not broken.passed
    hint = broken.first_divergence.hint
    assert f"weight {FFN} is PyTorch's scaled by 1.1" in hint
    assert f"in your model: {body}/bert/encoder/layer_._1/intermediate/dense/kernel" in hint
