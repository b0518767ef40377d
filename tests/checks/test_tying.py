"""embeddings: tying is about one variable (not equal values), round trips, noise."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from tfparity.adapters.hf_tf.lm_head import checkpoint_has_head, find_head
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.api import make_batches
from tfparity.checks.tying import TyingOptions, check_tying
from tfparity.cli import main
from tfparity.report.sections import render_embeddings


@pytest.fixture(scope="module")
def bert_mlm():
    return TFModel.load("tiny:bert", lm_head=True)


def test_head_model_shares_the_body_of_tiny_bert(bert_mlm, load_tf_model):
    base = load_tf_model("tiny:bert")
    assert (bert_mlm.word_embeddings().numpy() == base.word_embeddings().numpy()).all()
    batch = make_batches(base)[0]
    assert (bert_mlm.run(batch)["hidden_states[2]"] == base.run(batch)["hidden_states[2]"]).all()


def test_tiny_bert_mlm_is_tied_and_its_transform_blocks_the_round_trip(bert_mlm):
    report = check_tying(bert_mlm, make_batches(bert_mlm))
    d = report.details
    assert d["tied"] is True
    assert "dense" in d["head_transform"] and "LayerNorm" in d["head_transform"]
    assert "bias" in d["head_transform"]
    assert d["roundtrip"]["cosine"] == 1.0
    assert d["roundtrip"]["lm_head"] is not None and d["roundtrip"]["lm_head"] < 0.5
    assert "axis=-1" in d["argmax_axis"]
    assert report.passed


def test_verdict_line_of_a_tied_head_passes_on_the_cosine_round_trip(bert_mlm):
    report = check_tying(bert_mlm, make_batches(bert_mlm), TyingOptions(noise_scales=(0.0,)))
    assert render_embeddings(report).splitlines()[-1] == (
        "PASS embeddings: cosine round trip 100.0%"
    )


def test_an_untied_decoder_the_tf_class_ties_is_named_in_the_verdict_line(bert_mlm):
    """A BERT MLM checkpoint whose config unties its decoder: TF's class ties it all the
    same, so the check fails, and its verdict line says why (not the 100% cosine round
    trip, which holds)."""
    config = copy.deepcopy(bert_mlm.config)
    config.tie_word_embeddings = False
    untied = replace(bert_mlm, config=config)
    report = check_tying(untied, make_batches(untied), TyingOptions(noise_scales=(0.0,)))
    assert report.passed is False and report.details["roundtrip"]["cosine"] == 1.0
    verdict = render_embeddings(report).splitlines()[-1]
    assert verdict.startswith("FAIL embeddings: untied decoder (config.tie_word_embeddings")
    assert "the TF class ties it to the word embeddings" in verdict
    assert "round trip through the tied one" in verdict and "cosine" not in verdict


def test_noise_table_decreases_and_is_seeded(bert_mlm):
    batches = make_batches(bert_mlm)
    options = TyingOptions(noise_scales=(0.0, 0.5, 4.0), seed=1)
    noise = check_tying(bert_mlm, batches, options).details["noise"]
    assert [n["scale"] for n in noise] == [0.0, 0.5, 4.0]
    rates = [n["recovered"] for n in noise]
    assert rates[0] == 1.0 and rates[2] < 0.2 and rates[0] >= rates[1] >= rates[2]
    assert check_tying(bert_mlm, batches, options).details["noise"] == noise


def test_equal_values_in_a_separate_variable_are_not_tied():
    """A copy of the matrix in its own variable: equal values, yet not tied."""
    import tensorflow as tf

    model = TFModel.load("tiny:bert", lm_head=True)
    predictions = model.model.mlm.predictions
    copy = tf.Variable(model.word_embeddings().numpy(), name="separate_output_matrix")

    class _Output:  # what TFBertLMPredictionHead reads its output matrix from
        weight = copy

    predictions.input_embeddings = _Output()
    head = find_head(model)
    assert head.tied is False
    assert (head.output_matrix == model.word_embeddings().numpy()).all()
    report = check_tying(model, make_batches(model))
    assert report.details["tied"] is False
    assert report.passed is False  # the config says tied; the model is not
    assert any("tie_word_embeddings is True" in n for n in report.notes)
    verdict = render_embeddings(report).splitlines()[-1]
    assert verdict.startswith("FAIL embeddings: untied decoder (an output matrix of its own)")
    assert "config.tie_word_embeddings is True (round trip through it " in verdict


def test_base_model_has_no_head(load_tf_model):
    base = load_tf_model("tiny:bert")
    assert find_head(base) is None
    report = check_tying(base, make_batches(base))
    assert report.details["tied"] is None and report.details["roundtrip"]["lm_head"] is None
    assert report.details["head_transform"] is None
    assert not checkpoint_has_head(load_tf_model("tiny:t5"), "tiny:t5")


@pytest.mark.slow
def test_minilm_has_no_head_and_cosine_round_trip_is_complete(minilm):
    assert not checkpoint_has_head(minilm, "minilm")  # saved as BertModel
    report = check_tying(minilm, make_batches(minilm))
    assert report.details["roundtrip"]["cosine"] == 1.0
    assert report.details["tied"] is None
    assert report.passed


def test_cli_json_top_level(tmp_path):
    out = tmp_path / "e.json"
    assert main(["embeddings", "tiny:gpt2", "--noise-scales", "0,1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["tied"] is True
    assert "no transform" in data["head_transform"]
    assert set(data["roundtrip"]) == {"dot", "cosine", "lm_head"}
    assert [n["scale"] for n in data["noise"]] == [0.0, 1.0]
    assert main(["embeddings", "tiny:bert", "--noise-scales", "a,b"]) == 2


def test_the_embeddings_check_on_a_keras_hub_side_exits_2_by_name(capsys):
    """tying reads the LM head off the model, which only the HF TF side exposes: a
    keras-hub backbone is refused by name (the HF TF side passes above)."""
    assert main(["embeddings", "tiny:bert", "--noise-scales", "0"]) == 0
    capsys.readouterr()
    assert main(["embeddings", "keras-hub:tiny:bert", "--noise-scales", "0"]) == 2
    err = capsys.readouterr().err
    assert "The embeddings check (tying) needs the model's LM head" in err
    assert "keras-hub:tiny:bert (a keras-hub backbone (BertBackbone)) does not expose" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "spec, transform",
    [
        ("tiny:ctrl/causal-lm", "no transform: x @ w.T + bias"),
        ("tiny:opt/causal-lm", "no transform, no bias: x @ embed_tokens.T"),
        ("tiny:openai-gpt/causal-lm", "no transform, no bias: x @ tokens_embed.T"),
    ],
)
def test_a_head_the_model_does_not_name_is_described_and_applied(load_tf_model, spec, transform):
    """TF CTRL, OPT and OpenAI GPT have no ``get_lm_head()`` (their logits are a product
    inside ``call``): described in their architecture modules, the round trip through
    the head runs (it crashed), tied to the input matrix, and gives the model's logits."""
    import numpy as np

    from tfparity.adapters.hf_tf.lm_head import find_head

    model = load_tf_model(spec)
    report = check_tying(model, make_batches(model), TyingOptions())
    assert report.details["tied"] is True
    assert report.details["head_transform"].startswith(transform)
    assert report.details["roundtrip"]["lm_head"] is not None
    (batch,) = make_batches(model)
    trace = model.run(batch)
    logits = find_head(model).logits(trace["hidden_states[2]"])
    np.testing.assert_allclose(logits, trace["logits"], rtol=1e-5, atol=1e-5)


def test_a_head_without_a_readable_output_matrix_exits_2_by_name(capsys):
    """MobileBERT's head builds its output matrix from parts of its own: exit 2 naming
    the head (it crashed with a TypeError asking for a report)."""
    assert main(["embeddings", "tiny:mobilebert"]) == 2
    err = capsys.readouterr().err
    assert "TFMobileBertLMPredictionHead" in err and "please report" not in err
