"""Task heads: the checkpoint's own model class on both sides, every head output judged,
task-level agreement beside the numbers, and a broken head localised to it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity.adapters.sources.specs import parse_spec
from tfparity.architectures.heads import Head, head_of_class, head_of_config
from tfparity.errors import TfparityError

# Every (architecture, head) pair CI runs: the clean port passes, a broken head fails there.
PAIRS = [
    ("tiny:bert/sequence-classification", "classifier/bias", "classifier.bias", "label"),
    ("tiny:bert/token-classification", "classifier/bias", "classifier.bias", "label"),
    ("tiny:bert/question-answering", "qa_outputs/bias", "qa_outputs.bias", "span"),
    ("tiny:bert/masked-lm", "predictions/bias", "predictions.bias", "top-1"),
    ("tiny:roberta/sequence-classification", "classifier/out_proj/bias", "out_proj.bias", "label"),
    ("tiny:distilbert/question-answering", "qa_outputs/bias", "qa_outputs.bias", "span"),
    ("tiny:gpt2/sequence-classification", "score/kernel", "score.weight", "label"),
    ("tiny:gpt2/causal-lm", None, None, "top-1"),  # its LM head is the tied embedding
    # TF holds weights PyTorch ties (ALBERT's decoder bias, MobileBERT's decoder weight):
    # the tiny models seed them as a converted checkpoint holds them, equal on both sides
    ("tiny:albert/masked-lm", "predictions/dense/bias", "predictions.dense.bias", "top-1"),
    ("tiny:mobilebert/masked-lm", "transform/dense/bias", "transform.dense.bias", "top-1"),
]


def test_kinds_follow_transformers_class_names():
    assert head_of_class("BertForSequenceClassification") is Head.SEQUENCE_CLASSIFICATION
    assert head_of_class("TFBertForTokenClassification") is Head.TOKEN_CLASSIFICATION
    assert head_of_class("GPT2LMHeadModel") is Head.CAUSAL_LM
    assert head_of_class("XLNetForQuestionAnsweringSimple") is Head.QUESTION_ANSWERING
    assert head_of_class("BertModel") is Head.BASE
    assert head_of_class("Model") is None and head_of_class("Something") is None
    assert head_of_config(["BertForMaskedLM"]) is Head.MASKED_LM
    assert head_of_config(None) is Head.BASE and head_of_config(["Custom"]) is Head.BASE


def test_tiny_specs_spell_a_head_after_a_slash():
    spec = parse_spec("tiny:bert/question-answering")
    assert (spec.location, spec.head) == ("bert", Head.QUESTION_ANSWERING)
    assert parse_spec("tiny:bert").head is None
    with pytest.raises(TfparityError, match="Unknown head 'classifier'.*sequence-classification"):
        parse_spec("tiny:bert/classifier")


def _pair(spec: str):
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import load_pt

    return TFModel.load(spec), load_pt(spec)


def _crosscheck(tf_model, pt_model):
    from tfparity.api import crosscheck

    return crosscheck(tf_model, pt=pt_model, reload=False, localise="on_failure")[0]


@pytest.mark.parametrize("spec, tf_weight, pt_weight, measure", PAIRS, ids=[p[0] for p in PAIRS])
def test_clean_head_passes_and_a_broken_head_fails_there(spec, tf_weight, pt_weight, measure):
    tf_model, pt_model = _pair(spec)
    assert type(tf_model.model).__name__ == "TF" + type(pt_model.model).__name__
    clean = _crosscheck(tf_model, pt_model)
    names = [c.name for c in clean.comparisons]
    assert clean.passed, [(c.name, c.max_abs_diff) for c in clean.failures]
    assert "logits" in names or {"start_logits", "end_logits"} <= set(names)
    agreement = {a["measure"]: a for a in clean.details["agreement"]}
    assert agreement[measure]["agree"] == agreement[measure]["total"] > 0
    if tf_weight is None:
        return
    (variable,) = [v for v in tf_model.model.weights if tf_weight in v.name]
    variable.assign(variable + 0.01)
    broken = _crosscheck(tf_model, pt_model)
    assert not broken.passed
    assert {c.name for c in broken.failures} <= {"logits", "start_logits", "end_logits"}
    d = broken.first_divergence
    assert (d.hidden_state, d.layer) == (None, "head")
    assert f"weight {pt_weight}" in d.hint or pt_weight in d.hint, d.hint


def test_the_text_report_names_the_head_and_its_agreement():
    from tfparity.report.text import render

    tf_model, pt_model = _pair("tiny:bert/sequence-classification")
    (bias,) = [v for v in tf_model.model.weights if "classifier/bias" in v.name]
    bias.assign(bias + 0.01)
    text = render(_crosscheck(tf_model, pt_model))
    assert "first divergence: head (past the last hidden state)" in text
    assert "hint: weight classifier.bias differs" in text
    assert "label agreement (logits): 5/5" in text or "label agreement (logits):" in text


def test_a_flip_at_a_near_tie_is_labelled_as_one():
    from tfparity.checks.crosscheck.agreement import task_agreement
    from tfparity.trace import Trace

    mask = np.ones((2, 1))
    pt = [Trace({"logits": np.array([[1.0, 1.0 + 1e-7], [2.0, 0.0]])})]
    near = [Trace({"logits": np.array([[1.0 + 1e-7, 1.0], [2.0, 0.0]])})]
    far = [Trace({"logits": np.array([[1.5, 1.0], [2.0, 0.0]])})]
    (tie,) = task_agreement(near, pt, [mask], language_model=False, noise={"logits": 1e-6})
    assert (tie.agree, tie.total, tie.flip_count, tie.near_ties) == (1, 2, 1, 1)
    assert tie.flips[0].near_tie and tie.flips[0].where == (0, 0)
    (defect,) = task_agreement(far, pt, [mask], language_model=False, noise={"logits": 1e-6})
    assert defect.flip_count == 1 and defect.near_ties == 0
    assert defect.flips[0].tf_margin == pytest.approx(0.5)


def test_spans_and_tokens_count_non_padding_positions_only():
    from tfparity.checks.crosscheck.agreement import task_agreement
    from tfparity.trace import Trace

    mask = np.array([[1, 1, 0]])
    start = np.array([[0.0, 1.0, 0.0]])
    pt = [Trace({"start_logits": start, "end_logits": start})]
    padded_peak = np.array([[0.0, 1.0, 9.0]])  # a peak on padding does not count
    tf = [Trace({"start_logits": padded_peak, "end_logits": padded_peak})]
    (span,) = task_agreement(tf, pt, [mask], language_model=False, noise={})
    assert (span.measure, span.agree, span.total) == ("span", 1, 1)
    tokens = np.zeros((1, 3, 2))
    tokens[0, 2, 1] = 5.0  # differs only on the padding token
    (labels,) = task_agreement(
        [Trace({"logits": tokens})],
        [Trace({"logits": np.zeros((1, 3, 2))})],
        [mask],
        language_model=False,
        noise={},
    )
    assert (labels.agree, labels.total) == (2, 2)


def test_a_fine_tuned_checkpoint_directory_is_checked_as_its_own_class(tmp_path, capsys):
    """config.architectures picks the class on both sides; --head base overrides it."""
    torch = pytest.importorskip("torch")
    import transformers

    from tfparity.adapters.sources.tiny import tiny_config, tiny_tokenizer
    from tfparity.cli import main

    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(tiny_config("bert"))
    model.save_pretrained(tmp_path / "seqcls", safe_serialization=True)
    tiny_tokenizer().save_pretrained(tmp_path / "seqcls")
    config = json.loads((tmp_path / "seqcls" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    out = tmp_path / "r.json"
    argv = ["crosscheck", str(tmp_path / "seqcls"), "--no-reload", "--json", str(out)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert "logits" in [c["name"] for c in report["comparisons"]]
    assert report["details"]["reference"].startswith("BertForSequenceClassification")
    assert [a["measure"] for a in report["details"]["agreement"]] == ["label"]
    assert main([*argv, "--head", "base"]) == 0
    base = json.loads(out.read_text())
    assert "logits" not in [c["name"] for c in base["comparisons"]]
    assert base["details"]["reference"].startswith("BertModel")


def test_head_model_objects_are_taken_by_the_api():
    from tfparity import InputOptions
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import PTModel
    from tfparity.api import crosscheck

    tf_obj = TFModel.load("tiny:bert/token-classification").model
    pt_obj = PTModel.from_tf(tf_obj).model
    inputs = InputOptions(random=4, seq_len=8)  # objects come without a tokenizer
    (report,) = crosscheck(tf=tf_obj, pt=pt_obj, inputs=inputs, reload=False)
    assert report.passed and "logits" in [c.name for c in report.comparisons]


def test_unsupported_heads_are_refused_naming_why():
    from tfparity.adapters.hf_tf.tf_model import TFModel

    with pytest.raises(TfparityError, match="multiple-choice.*choices"):
        TFModel.load("tiny:bert/multiple-choice")


def test_the_pytest_assertion_checks_heads_both_ways():
    from tfparity import assert_crosscheck
    from tfparity.adapters.hf_tf.tf_model import TFModel

    (report,) = assert_crosscheck("tiny:bert/question-answering", "tiny:bert/question-answering")
    assert {"start_logits", "end_logits"} <= {c.name for c in report.comparisons}
    broken = TFModel.load("tiny:bert", head=Head.TOKEN_CLASSIFICATION)
    (bias,) = [v for v in broken.model.weights if "classifier/bias" in v.name]
    bias.assign(bias + 0.01)
    with pytest.raises(AssertionError) as info:
        assert_crosscheck(broken, "tiny:bert/token-classification")
    first = str(info.value).splitlines()[0]
    assert first.startswith("head diverges") and "FAIL crosscheck" in first


def test_a_broken_head_against_stored_outputs_is_localised_without_weight_claims(tmp_path):
    """Golden outputs carry no weights: the head is still found, and the hint says the
    weights were not compared (not that they agree)."""
    from tfparity import InputOptions
    from tfparity.adapters.reference.stored import StoredReference, capture
    from tfparity.api import crosscheck, make_batches
    from tfparity.golden import save_reference

    spec = "tiny:bert/sequence-classification"
    tf_model, pt_model = _pair(spec)
    batches = make_batches(tf_model, InputOptions(random=4, seq_len=8))
    save_reference(tmp_path / "g.npz", capture(pt_model, batches, model=spec).golden)
    (bias,) = [v for v in tf_model.model.weights if "classifier/bias" in v.name]
    bias.assign(bias + 0.01)
    stored = StoredReference.load(tmp_path / "g.npz", batches)
    (report,) = crosscheck(tf_model, pt=stored, batches=batches, reload=False)
    d = report.first_divergence
    assert not report.passed and d.layer == "head"
    assert "weights were not compared" in d.hint and "agree here" not in d.hint


def test_lm_agreement_reports_top5_overlap_even_when_nothing_is_shared():
    from tfparity.checks.crosscheck.agreement import task_agreement
    from tfparity.trace import Trace

    logits = np.random.default_rng(0).normal(size=(2, 3, 10))
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    same = task_agreement(
        [Trace({"logits": logits})],
        [Trace({"logits": logits})],
        [mask],
        language_model=True,
        noise={},
    )
    assert [(a.measure, a.agree, a.total) for a in same] == [
        ("top-1", 5, 5),
        ("top-5 overlap", 5.0, 5),
    ]
    opposite = task_agreement(
        [Trace({"logits": logits})],
        [Trace({"logits": -logits})],
        [mask],
        language_model=True,
        noise={},
    )
    assert [(a.measure, a.agree) for a in opposite] == [("top-1", 0), ("top-5 overlap", 0.0)]
    assert opposite[0].flip_count == 5 and opposite[0].flips[0].where == (0, 0, 0)
