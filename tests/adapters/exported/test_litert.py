"""The LiteRT side on real flatbuffers converted from tiny BERT: a clean float32 model
passes against PyTorch, one with a layer-1 FFN fault fails localised to layer 1 inside
the flatbuffer, a dynamic-range int8 model is recognised and judged by budgets with its
worst layer named. Flatbuffers are converted once per session (static [2, 16] inputs:
conftest's ``tiny_bert_litert``)."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity import cli
from tfparity.adapters.exported import load_export
from tfparity.adapters.sources.specs import parse_spec
from tfparity.api import crosscheck
from tfparity.errors import TfparityError
from tfparity.inputs import Batch, InputOptions

# 5 random sequences of up to 12 tokens in batches of 3: every batch is padded to the
# static [2, 16] (rows in chunks of 2, tokens to 16) and cut back.
INPUTS = InputOptions(random=5, seq_len=12, batch_size=3)


@pytest.fixture(scope="module")
def flatbuffers(tiny_bert_litert):
    return {kind: tiny_bert_litert(kind) for kind in ("fp32", "int8", "full", "fault")}


def side(path):
    return load_export(parse_spec(str(path)), "tiny:bert")


def test_fp32_passes_against_pytorch_hidden_states_from_intermediates(flatbuffers):
    model = side(flatbuffers["fp32"])
    assert model.quantisation is None
    assert model.localisable()  # sub-layers found by their TF names
    (report,) = crosscheck(model, pt="tiny:bert", inputs=INPUTS, localise="always")
    assert report.passed, report.comparisons
    names = {c.name for c in report.comparisons}
    # the signature returns no hidden states: they come from the intermediate tensors
    assert {"hidden_states[0]", "hidden_states[1]", "hidden_states[2]"} <= names
    assert report.details["judge"].startswith("float64 referee")
    assert report.details["sequences"] == 5
    assert {c["name"] for c in report.details["components"]} >= {
        "layer_0.attention",
        "layer_1.intermediate",
        "layer_1.output",
    }
    assert all(c["accumulated_ok"] for c in report.details["components"])


def test_layer_1_ffn_fault_fails_localised_inside_the_flatbuffer(flatbuffers):
    (report,) = crosscheck(side(flatbuffers["fault"]), pt="tiny:bert", inputs=INPUTS)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (2, 1, "intermediate")
    # the float32 constants are the weights: the hint names the scaled one
    assert "intermediate.dense.weight" in d.hint and "scaled by 1.1" in d.hint
    passed = {c.name: c.passed for c in report.comparisons}
    assert passed["hidden_states[1]"] and not passed["hidden_states[2]"]


def test_dynamic_range_int8_is_judged_by_budgets_with_its_worst_layer(flatbuffers):
    model = side(flatbuffers["int8"])
    assert model.quantisation == "dynamic-range int8"
    (report,) = crosscheck(model, pt="tiny:bert", inputs=INPUTS)
    judge = report.details["judge"]
    assert judge.startswith("quantised (dynamic-range int8): judged by budgets")
    assert "not by the float64 referee" in judge
    assert report.passed
    assert all(c.judge == "budget" for c in report.comparisons)
    assert report.details["worst_layer"].split(" (")[0] in ("embeddings", "layer 0", "layer 1")
    growth = report.details["error_growth"]
    assert [r["hidden_state"] for r in growth] == [0, 1, 2]
    assert all(r["relative_error"] > 0 for r in growth)  # it is quantised: it differs


def test_full_int8_reads_every_hidden_state_dequantised_and_is_judged_by_budgets(flatbuffers):
    model = side(flatbuffers["full"])
    assert model.quantisation == "full int8"
    (report,) = crosscheck(model, pt="tiny:bert", inputs=INPUTS)
    assert report.details["judge"].startswith("quantised (full int8): judged by budgets")
    by_name = {c.name: c for c in report.comparisons}
    # the hidden states are int8 tensors inside the flatbuffer: read with their scales,
    # every layer is there, close to PyTorch's (a raw int8 read would be far off)
    assert {"hidden_states[0]", "hidden_states[1]", "hidden_states[2]"} <= set(by_name)
    assert all(by_name[f"hidden_states[{k}]"].cosine > 0.99 for k in range(3))
    assert report.passed
    growth = report.details["error_growth"]
    assert [r["hidden_state"] for r in growth] == [0, 1, 2]
    tight = crosscheck(model, pt="tiny:bert", inputs=INPUTS, budget="cosine=0.99999")[0]
    assert not tight.passed and "quantises worst" in tight.first_divergence.hint


def test_a_tight_user_budget_fails_the_int8_model_naming_where(flatbuffers):
    (report,) = crosscheck(
        side(flatbuffers["int8"]), pt="tiny:bert", inputs=INPUTS, budget="max=1e-4"
    )
    assert not report.passed
    assert "(set by the user)" in report.details["judge"]
    d = report.first_divergence
    assert d.hidden_state == 0  # the int8 word embeddings are over 1e-4 already
    assert "quantises worst" in d.hint
    failing = [c for c in report.comparisons if not c.passed]
    assert all(c.problem.startswith("Over budget: max abs error") for c in failing)


def test_padding_to_static_shapes_is_cut_from_outputs(flatbuffers):
    model = side(flatbuffers["fp32"])
    ids = np.array([[0, 7, 8, 9, 2], [0, 5, 2, 1, 1], [0, 6, 6, 2, 1]], np.int32)
    mask = (ids != 1).astype(np.int32)
    trace = model.run(Batch(ids, mask))
    assert trace["last_hidden_state"].shape == (3, 5, 32)
    assert trace["pooler_output"].shape == (3, 32)
    # a row's outputs do not depend on what it was padded with, or batched with
    alone = model.run(Batch(ids[1:2], mask[1:2]))
    np.testing.assert_allclose(alone["last_hidden_state"][0], trace["last_hidden_state"][1])


def test_longer_than_the_static_shape_is_refused(flatbuffers):
    model = side(flatbuffers["fp32"])
    assert model.limits.max_positions == 16
    ids = np.full((1, 20), 5, np.int32)
    with pytest.raises(TfparityError, match="16"):
        model.run(Batch(ids, np.ones_like(ids)))


def test_cli_checks_a_flatbuffer_and_refuses_a_malformed_budget(flatbuffers, capsys):
    args = ["crosscheck", "--tf", str(flatbuffers["int8"]), "--pt", "tiny:bert"]
    code = cli.main([*args, "--random", "3", "--seq-len", "10"])
    out = capsys.readouterr().out
    assert code == 0
    assert "quantised (dynamic-range int8): judged by budgets" in out
    assert "error growth" in out and "<- worst" in out
    assert cli.main([*args, "--budget", "max=big"]) == 2
    assert "max='big'" in capsys.readouterr().err
    assert cli.main([*args, "--budget", "tol=1"]) == 2


def test_a_flatbuffer_without_a_companion_is_refused(flatbuffers):
    with pytest.raises(TfparityError, match="--source MODEL"):
        load_export(parse_spec(str(flatbuffers["fp32"])), None)


def test_a_flatbuffer_signature_without_a_mask_refuses_padding():
    """No conversion needed: the refusal comes before the interpreter runs."""
    from pathlib import Path

    from tfparity.adapters.exported.litert import LiteRTModel
    from tfparity.adapters.exported.litert_runner import Runner

    runner = Runner(Path("m.tflite"), "serving_default", {"ids": "input_ids"}, (None, 8), 0)
    model = LiteRTModel("m.tflite", runner, graph=None, config=None, tokenizer=None)
    assert model.unmasked_reason == "the LiteRT signature 'serving_default' takes no attention mask"
    ids = np.array([[5, 6, 7], [5, 6, 0]], np.int32)
    with pytest.raises(TfparityError, match="takes no attention mask, and this batch holds"):
        runner.run(Batch(ids, (ids != 0).astype(np.int32)))
    with pytest.raises(TfparityError, match="exactly 8 tokens"):  # its static shape pads
        runner.run(Batch(ids[:1], np.ones_like(ids[:1])))
    masked = Runner(
        Path("m.tflite"), "s", {"ids": "input_ids", "mask": "attention_mask"}, (1, 8), 0
    )
    assert LiteRTModel("m", masked, graph=None, config=None, tokenizer=None).unmasked_reason is None


def test_signature_names_the_flatbuffers_signature_or_exits_2_listing_them(flatbuffers):
    spec = parse_spec(str(flatbuffers["fp32"]))
    name = side(flatbuffers["fp32"]).runner.signature  # the converter's one signature
    assert load_export(spec, "tiny:bert", signature=name).runner.signature == name
    with pytest.raises(TfparityError, match=f"has no signature 'nope'; its signatures: {name}."):
        load_export(spec, "tiny:bert", signature="nope")


def test_the_docs_first_command_runs_on_a_static_shape_flatbuffer(flatbuffers, capsys):
    """`tfparity crosscheck --tf model.tflite --pt MODEL`, as docs/litert.md gives it: the
    default texts (up to 60 tokens) are cut to the static 16 and the report says so; a
    text of the user's own that long is refused naming the flatbuffer's static length,
    not the model's 64 positions."""
    args = ["crosscheck", "--tf", str(flatbuffers["fp32"]), "--pt", "tiny:bert"]
    code = cli.main(args)
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        "note: The default texts were cut to fit: 3 of 5 texts to 16 tokens (the "
        "flatbuffer's static sequence length 16): text 1 (23 tokens)" in out
    ), out
    assert cli.main([*args, "--text", "word " * 30]) == 2
    err = capsys.readouterr().err
    assert "more than the flatbuffer's static sequence length 16" in err, err
    assert "the model's" not in err
    assert cli.main([*args, "--random", "2", "--seq-len", "20"]) == 2
    assert "the flatbuffer's static sequence length 16" in capsys.readouterr().err


def test_full_int8_is_said_not_to_be_reproducible_without_its_calibration_data(flatbuffers):
    from tfparity.adapters.exported.litert_requantise import litert_twin
    from tfparity.adapters.hf_tf.tf_model import TFModel

    twin = litert_twin(side(flatbuffers["full"]), TFModel.load("tiny:bert"))
    assert twin.mode == "full int8" and "calibration data" in twin.skipped
    assert not twin.stored  # nothing compared: the budgets judge it alone
