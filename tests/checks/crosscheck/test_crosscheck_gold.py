"""crosscheck on a sequence classifier: the distribution metrics over its labels, and,
with ``--labels``, each side's accuracy and the flips between them (correct->wrong,
wrong->correct), counted right through batching and regrouping; bad labels exit 2."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity import cli
from tfparity.api import crosscheck
from tfparity.inputs import Batch, InputOptions, unpadded
from tfparity.report.text import render

SPEC = "tiny:bert/sequence-classification"
TEXTS = [
    "the cat sat on the mat",
    "a dog ran home",
    "hello there",
    "it was fine today",
    "nobody came",
    "the weather is bad",
    "good morning to you all",
    "what a day",
    "see you soon",
    "the end",
]


@pytest.fixture(scope="module")
def classifier():
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import load_pt

    return TFModel.load(SPEC), load_pt(SPEC)


def _check(tf_model, pt_model, labels):
    inputs = InputOptions(texts=tuple(TEXTS), batch_size=4)
    return crosscheck(tf_model, pt=pt_model, reload=False, inputs=inputs, labels=labels)[0]


def _predictions(report_model, pt_model):
    """Both sides' labels per text, computed here independently of the check."""
    tf_model, _ = report_model, pt_model
    ids = []
    for model in (tf_model, pt_model):
        picks = []
        for text in TEXTS:
            enc = tf_model.tokenizer([text], return_tensors="np")
            batch = Batch(enc["input_ids"].astype(np.int32), enc["attention_mask"].astype(np.int32))
            picks.append(int(np.asarray(model.run(batch)["logits"]).argmax()))
        ids.append(np.array(picks))
    return ids


def test_a_clean_classifier_gets_label_distribution_and_equal_accuracy(classifier):
    tf_model, pt_model = classifier
    labels = [str(i % 2) for i in range(len(TEXTS))]
    report = _check(tf_model, pt_model, labels)
    assert report.passed
    d = report.details["distribution"]
    assert d["over"] == "labels" and d["positions"] == d["items"] == len(TEXTS)
    assert d["same_top1"] == 1.0 and 0 <= d["kl_max"] < 1e-9
    g = report.details["gold"]
    assert g["total"] == len(TEXTS) and g["tf_correct"] == g["pt_correct"]
    assert g["correct_to_wrong"] == g["wrong_to_correct"] == 0 and not g["flips"]
    text = render(report)
    assert "distribution (logits over labels, " in text and "reference top-1 label" in text
    assert "flips: 0 correct->wrong, 0 wrong->correct" in text


def test_a_shifted_head_flips_answers_counted_both_ways(classifier):
    """The TF classifier's bias pushed towards label 1: texts PyTorch labels 0 flip.
    Gold labels chosen so some flips are correct->wrong and some wrong->correct; the
    counts must equal those computed here from each side's own predictions."""
    tf_model, pt_model = classifier
    (bias,) = [v for v in tf_model.model.weights if "classifier/bias" in v.name]
    saved = bias.numpy()
    try:
        _, pt_pred = _predictions(tf_model, pt_model)
        bias.assign(saved + np.array([0.0, 50.0], saved.dtype))
        tf_pred, _ = _predictions(tf_model, pt_model)
        assert (tf_pred != pt_pred).sum() >= 2, "the shift must flip at least two texts"
        flipped = np.flatnonzero(tf_pred != pt_pred)
        gold = pt_pred.copy()
        gold[flipped[1::2]] = tf_pred[flipped[1::2]]  # every other flip TF is right
        report = _check(tf_model, pt_model, [str(g) for g in gold])
    finally:
        bias.assign(saved)
    g = report.details["gold"]
    assert g["tf_correct"] == int((tf_pred == gold).sum())
    assert g["pt_correct"] == int((pt_pred == gold).sum())
    assert g["correct_to_wrong"] == int(((pt_pred == gold) & (tf_pred != gold)).sum()) > 0
    assert g["wrong_to_correct"] == int(((tf_pred == gold) & (pt_pred != gold)).sum()) > 0
    assert [f["text"] for f in g["flips"]] == [int(i) + 1 for i in flipped[:5]]
    assert not report.passed  # the logits fail the referee, the report says why
    assert report.details["distribution"]["same_top1"] < 1.0


def test_label_names_are_read_by_the_config(classifier):
    tf_model, pt_model = classifier
    names = [tf_model.config.id2label[i % 2] for i in range(len(TEXTS))]
    by_name = _check(tf_model, pt_model, names).details["gold"]
    by_id = _check(tf_model, pt_model, [str(i % 2) for i in range(len(TEXTS))]).details["gold"]
    assert by_name == by_id


def test_numbers_follow_rows_through_regrouping():
    ids = np.array([[5, 6, 0], [7, 0, 0], [8, 9, 0]], np.int32)
    mask = (ids > 0).astype(np.int32)
    batch = Batch(ids, mask, numbers=(0, 1, 2))
    regrouped = unpadded([batch], 8, "the export has no attention mask")
    by_length = {b.input_ids.shape[1]: b.numbers for b in regrouped}
    assert by_length == {2: (0, 2), 1: (1,)}


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ("0\n1\n", "--labels has 2 labels for 10 texts"),
        ("0\n" * 9 + "SARCASM\n", "label 10 ('SARCASM') is neither a class id below 2"),
        ("0\n" * 9 + "7\n", "label 10 ('7') is neither a class id below 2"),
    ],
)
def test_bad_labels_exit_2_naming_what_is_wrong(tmp_path, capsys, labels, says):
    texts, gold = tmp_path / "texts.txt", tmp_path / "labels.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    gold.write_text(labels)
    argv = ["crosscheck", SPEC, "--no-reload", "--texts", str(texts), "--labels", str(gold)]
    assert cli.main(argv) == 2
    assert says in capsys.readouterr().err


def test_labels_on_an_lm_head_exit_2(capsys):
    argv = ["crosscheck", "tiny:bert/masked-lm", "--no-reload", "--text", "a b", "--labels"]
    assert cli.main([*argv, __file__]) == 2
    assert "one label per sequence (sequence-classification)" in capsys.readouterr().err
