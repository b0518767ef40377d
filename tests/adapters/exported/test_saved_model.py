"""A SavedModel as the TF side: its serving signature against PyTorch and against the
model it was exported from, clean and with a layer-1 FFN fault, through the API and CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity import InputOptions, cli
from tfparity.api import check_embeds, crosscheck
from tfparity.checks.crosscheck.export_source import export_verdict
from tfparity.errors import TfparityError

INPUTS = InputOptions(random=4, seq_len=12, batch_size=2, seed=3)
FAULT_WEIGHT = "encoder.layer.1.intermediate.dense.weight"


def test_faulty_export_fails_localised_to_layer_1_naming_the_weight(tiny_bert_export):
    (report,) = crosscheck(tiny_bert_export("faulty"), pt="tiny:bert", inputs=INPUTS)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)
    assert f"weight {FAULT_WEIGHT} is PyTorch's scaled by 1.1" in d.hint
    by = {c.name: c.passed for c in report.comparisons}
    assert by["hidden_states[0]"] and by["hidden_states[1]"]  # the layers before pass


def test_export_without_hidden_states_fails_at_the_outputs_saying_why(tiny_bert_export):
    (report,) = crosscheck(tiny_bert_export("faulty-no-hidden"), pt="tiny:bert", inputs=INPUTS)
    assert not report.passed
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (None, "output")
    assert "No hidden states were compared" in d.hint
    assert not any(c.name.startswith("hidden_states[") for c in report.comparisons)


def test_source_gives_three_comparisons_and_a_clean_export_passes_all(tiny_bert_export):
    reports = crosscheck(tiny_bert_export("clean"), source="tiny:bert", inputs=INPUTS)
    assert [r.check for r in reports] == ["export-vs-source", "crosscheck", "crosscheck-source"]
    assert all(r.passed for r in reports), [(r.check, r.failures) for r in reports]
    vs_pt = reports[1]  # per layer: the signature returns the hidden states
    assert vs_pt.details["reference"] == "PyTorch tiny:bert"  # the source's twin
    names = {c.name for c in vs_pt.comparisons}
    assert {"hidden_states[0]", "hidden_states[2]", "last_hidden_state", "pooler_output"} <= names
    assert vs_pt.details["execution"] == "graph"  # a signature is a traced graph
    assert "matches its source, and both match PyTorch" in export_verdict(reports)


def test_embeds_check_on_an_export_fails_on_embeddings_that_are_not_word_embeddings(
    tiny_bert_export,
):
    clean = tiny_bert_export("clean")  # its passing run: the CLI test below

    def shifted(batch):  # embeddings that are not the raw word embeddings
        from tfparity.api import load_model

        return np.asarray(load_model(clean, companion="tiny:bert").gather(batch.input_ids)) * 1.5

    broken = check_embeds(clean, source="tiny:bert", inputs=INPUTS, embeds_fn=shifted)
    assert not broken.passed and broken.first_divergence.hidden_state == 0


def test_embeds_check_refuses_an_export_without_inputs_embeds(tiny_bert_export):
    with pytest.raises(TfparityError, match="no signature that takes inputs_embeds"):
        check_embeds(tiny_bert_export("faulty"), source="tiny:bert", inputs=INPUTS)


# ----------------------------------------------------------------------------- CLI


def test_cli_crosscheck_with_source_writes_three_reports(tiny_bert_export, tmp_path, capsys):
    out = tmp_path / "r.json"
    args = ["crosscheck", str(tiny_bert_export("faulty")), "--source", "tiny:bert"]
    assert cli.main([*args, "--random", "2", "--seq-len", "8", "--json", str(out)]) == 1
    reports = json.loads(out.read_text())["reports"]
    assert [r["check"] for r in reports] == ["export-vs-source", "crosscheck", "crosscheck-source"]
    assert [r["passed"] for r in reports] == [False, False, True]
    assert reports[0]["first_divergence"]["layer"] == 1
    assert "export step changed the model" in capsys.readouterr().out


def test_cli_export_with_pt_alone_and_golden_outputs(tiny_bert_export, tmp_path):
    clean = str(tiny_bert_export("clean"))
    gold = tmp_path / "gold.npz"
    base = ["crosscheck", clean, "--pt", "tiny:bert", "--random", "2", "--seq-len", "8"]
    assert cli.main([*base, "--save-outputs", str(gold)]) == 0
    faulty = ["crosscheck", str(tiny_bert_export("faulty")), "--pt", "tiny:bert"]
    assert cli.main([*faulty, "--random", "2", "--seq-len", "8", "--load-outputs", str(gold)]) == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "holds no Hugging Face config or tokenizer"),
        (["--source", "EXPORT"], "is a TensorFlow SavedModel directory"),
    ],
)
def test_cli_export_without_a_usable_companion_exits_2(tiny_bert_export, capsys, extra, message):
    export = str(tiny_bert_export("clean"))
    extra = [export if a == "EXPORT" else a for a in extra]
    assert cli.main(["crosscheck", export, *extra, "--random", "2"]) == 2
    assert message in capsys.readouterr().err


def test_cli_source_on_a_model_that_is_not_an_export_exits_2(capsys):
    assert cli.main(["crosscheck", "tiny:bert", "--source", "tiny:bert", "--random", "2"]) == 2
    assert "is not an export" in capsys.readouterr().err


def test_cli_check_on_an_export_without_embeds_exits_2(tiny_bert_export, capsys):
    export = str(tiny_bert_export("faulty"))
    assert cli.main(["check", export, "--source", "tiny:bert", "--random", "2"]) == 2
    assert "inputs_embeds path cannot run" in capsys.readouterr().err


def test_cli_check_on_an_export_with_embeds_runs_both_checks(tiny_bert_export, tmp_path):
    out = tmp_path / "r.json"
    export = str(tiny_bert_export("clean"))
    args = ["check", export, "--source", "tiny:bert", "--random", "2", "--seq-len", "8"]
    assert cli.main([*args, "--json", str(out)]) == 0
    reports = json.loads(out.read_text())["reports"]
    assert [(r["check"], r["passed"]) for r in reports] == [("embeds", True), ("crosscheck", True)]


def test_a_signature_that_maps_nothing_exits_2_listing_it(tmp_path, capsys):
    import tensorflow as tf

    module = tf.Module()
    module.w = tf.Variable(tf.ones([4]))

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="input_ids")])
    def serve(input_ids):
        return {"scores": tf.cast(input_ids, tf.float32)[..., None] * module.w}

    tf.saved_model.save(module, str(tmp_path / "odd"), signatures={"serving_default": serve})
    args = ["crosscheck", str(tmp_path / "odd"), "--pt", "tiny:bert", "--random", "2"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert "scores float32 [?, ?, 4]" in err and "serving_default" in err


def test_assertion_helper_takes_an_export_with_its_source(tiny_bert_export):
    from tfparity.assertions import assert_crosscheck

    reports = assert_crosscheck(tiny_bert_export("clean"), source="tiny:bert", inputs=INPUTS)
    assert len(reports) == 3
    with pytest.raises(AssertionError, match="layer 1"):
        assert_crosscheck(tiny_bert_export("faulty"), "tiny:bert", inputs=INPUTS)


def test_sweep_takes_an_export_and_refuses_embeds_it_cannot_run(tiny_bert_export, tmp_path):
    texts = tmp_path / "t.txt"
    texts.write_text("the cat sat on the mat\na short one\nhello world, a test\n")
    base = ["sweep", "--pt", "tiny:bert", "--texts", str(texts), "--progress", "none"]
    clean, faulty = str(tiny_bert_export("clean")), str(tiny_bert_export("faulty"))
    assert cli.main([*base, clean, "--out", str(tmp_path / "a")]) == 0  # embeds + crosscheck
    assert cli.main([*base, faulty, "--out", str(tmp_path / "b"), "--checks", "crosscheck"]) == 1
    assert cli.main([*base, faulty, "--out", str(tmp_path / "c")]) == 2  # no embeds signature


# ------------------------------------------------------- a signature without a mask

# Texts of mixed lengths: batched together they would be padded.
MIXED = InputOptions(
    texts=("Hello world.", "The quick brown fox jumps over the lazy dog.", "Why?", "Hi there."),
    batch_size=4,
)
UNPADDED = "the signature 'serving_default' takes no attention mask: batches of one length each"


def test_export_without_a_mask_passes_on_mixed_texts_run_unpadded(tiny_bert_export):
    (report,) = crosscheck(tiny_bert_export("clean-no-mask"), pt="tiny:bert", inputs=MIXED)
    assert report.passed, report.failures
    assert report.details["unpadded"] == UNPADDED
    assert any("ran unpadded" in n for n in report.notes)
    assert report.details["sequences"] == 4 and report.details["batches"] > 1


def test_faulty_export_without_a_mask_still_fails_localised(tiny_bert_export):
    (report,) = crosscheck(tiny_bert_export("faulty-no-mask"), pt="tiny:bert", inputs=MIXED)
    assert not report.passed and report.details["unpadded"] == UNPADDED
    d = report.first_divergence
    assert (d.hidden_state, d.layer) == (2, 1)


def test_padded_batches_given_to_an_export_without_a_mask_exit_2(tiny_bert_export):
    from tfparity.api import load_model
    from tfparity.inputs import make_batches

    side = load_model(tiny_bert_export("clean-no-mask"), companion="tiny:bert")
    padded = make_batches(side, MIXED)
    assert not padded[0].attention_mask.all()  # the texts do need padding
    with pytest.raises(TfparityError, match="takes no attention mask, and this batch holds"):
        crosscheck(side, pt="tiny:bert", batches=padded)


def test_cli_crosscheck_of_an_export_without_a_mask_on_default_texts(tiny_bert_export, capsys):
    export = str(tiny_bert_export("clean-no-mask"))
    assert cli.main(["crosscheck", export, "--pt", "tiny:bert"]) == 0
    assert "ran unpadded" in capsys.readouterr().out
    faulty = str(tiny_bert_export("faulty-no-mask"))
    assert cli.main(["crosscheck", faulty, "--pt", "tiny:bert"]) == 1


def test_sweep_of_an_export_without_a_mask_runs_one_length_per_batch(tiny_bert_export, tmp_path):
    texts = tmp_path / "t.txt"
    texts.write_text("the cat sat on the mat\na short one\nhello world, a test\nhi\n")
    base = ["sweep", "--pt", "tiny:bert", "--texts", str(texts), "--progress", "none"]
    base += ["--checks", "crosscheck"]
    clean, faulty = str(tiny_bert_export("clean-no-mask")), str(tiny_bert_export("faulty-no-mask"))
    assert cli.main([*base, clean, "--out", str(tmp_path / "a")]) == 0
    records = [json.loads(line) for line in (tmp_path / "a" / "results.jsonl").open()]
    assert all(r["bucket"] == r["tokens"] for r in records)  # no padding in any batch
    assert cli.main([*base, faulty, "--out", str(tmp_path / "b")]) == 1
