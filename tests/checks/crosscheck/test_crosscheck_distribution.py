"""crosscheck's distribution metrics on LM heads (docs/quantised.md): reported on every
LM run, judged by a bootstrap interval only under ``--kl-budget``; a clean head passes,
a broken one fails by name; a budget without LM logits, or a malformed one, exits 2."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity import cli
from tfparity.api import crosscheck
from tfparity.checks.crosscheck.distribution import next_token_targets
from tfparity.inputs import Batch
from tfparity.report.text import render

BUDGET = "kl_mean=0.01,same_top1=0.9"


@pytest.fixture(scope="module")
def masked_lm():
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import load_pt

    return TFModel.load("tiny:bert/masked-lm"), load_pt("tiny:bert/masked-lm")


def _check(tf_model, pt_model, kl_budget=None):
    return crosscheck(tf_model, pt=pt_model, reload=False, kl_budget=kl_budget)[0]


def test_next_token_targets_skip_padding_either_side():
    ids = np.array([[5, 6, 7, 0], [0, 8, 9, 4]])
    mask = np.array([[1, 1, 1, 0], [0, 1, 1, 1]])
    targets = next_token_targets(Batch(ids, mask))
    assert targets.tolist() == [[6, 7, -1, -1], [-1, 9, 4, -1]]


def test_causal_lm_reports_the_statistics_and_passes_its_budget(load_tf_model, capsys):
    report = crosscheck("tiny:gpt2/causal-lm", reload=False, kl_budget=BUDGET)[0]
    d = report.details["distribution"]
    assert report.passed and d["budget"]["verdict"] == "PASS"
    assert d["dp_at"] == "target" and d["items"] == report.details["sequences"]
    assert 0 <= d["kl_mean"] < 1e-6 and d["same_top1"] == 1.0
    assert abs(d["ln_ppl_ratio"]) < 1e-5
    text = render(report)
    assert "distribution (logits, " in text and "same top-1 100.0%" in text
    assert "distribution budget PASS over " in text


def test_a_broken_lm_head_fails_the_budget_and_a_clean_one_passes(masked_lm):
    tf_model, pt_model = masked_lm
    clean = _check(tf_model, pt_model, BUDGET)
    assert clean.passed and clean.details["distribution"]["budget"]["verdict"] == "PASS"
    assert clean.details["distribution"]["dp_at"] == "reference top-1"
    assert clean.details["distribution"]["ln_ppl_ratio"] is None  # no next token
    (bias,) = [v for v in tf_model.model.weights if "predictions/bias" in v.name]
    saved = bias.numpy()
    try:
        noise = np.random.default_rng(0).normal(size=saved.shape).astype(saved.dtype)
        bias.assign(saved + 2 * noise)
        broken = _check(tf_model, pt_model, BUDGET)
    finally:
        bias.assign(saved)
    d = broken.details["distribution"]
    assert not broken.passed and d["budget"]["verdict"] == "FAIL"
    assert d["kl_mean"] > 0.01
    failed = {c.name for c in broken.failures}
    assert "distribution kl_mean (logits)" in failed
    assert "distribution kl_mean (logits)" in render(broken)


def test_a_constant_bias_shift_moves_logits_but_not_the_distribution(masked_lm):
    """The referee fails a logit shift no softmax can see; the KL says it is harmless."""
    tf_model, pt_model = masked_lm
    (bias,) = [v for v in tf_model.model.weights if "predictions/bias" in v.name]
    saved = bias.numpy()
    try:
        bias.assign(saved + 0.5)
        shifted = _check(tf_model, pt_model, BUDGET)
    finally:
        bias.assign(saved)
    assert not shifted.passed  # the float64 referee still judges the float model
    assert {c.name for c in shifted.failures} == {"logits"}
    d = shifted.details["distribution"]
    assert d["budget"]["verdict"] == "PASS" and d["kl_max"] < 1e-9


def test_kl_budget_cli_exit_2_cases(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["crosscheck", "tiny:bert", "--kl-budget", "kl_avg=1"]) == 2
    assert "Unknown distribution metric 'kl_avg'" in capsys.readouterr().err
    code = cli.main(["crosscheck", "tiny:bert", "--no-reload", "--kl-budget", "kl_mean=0.01"])
    assert code == 2
    assert "judges an LM head's logits" in capsys.readouterr().err
    golden = ["--load-outputs", "x.npz", "--kl-budget", "kl_mean=0.01"]
    assert cli.main(["crosscheck", "tiny:gpt2/causal-lm", *golden]) == 2
    # judged on golden runs (tests/adapters/reference/test_golden_kl_budget.py): the
    # file is read before any budget, and this one is missing
    assert "x.npz does not exist" in capsys.readouterr().err


def test_one_sequence_is_inconclusive_saying_how_many_to_give(masked_lm):
    """One sequence resampled is itself: no interval, so no verdict (the issue's
    "[0.957, 0.957]"), however the value sits against the budget; a broken head too."""
    from tfparity.compare.bootstrap import MIN_ITEMS
    from tfparity.inputs import InputOptions

    tf_model, pt_model = masked_lm
    (report,) = crosscheck(
        tf_model,
        pt=pt_model,
        reload=False,
        kl_budget="kl_mean=1e-30,same_top1=0.96",  # a KL no float32 run is within
        inputs=InputOptions(texts=("One sentence only.",)),
    )
    v = report.details["distribution"]["budget"]
    assert v["items"] == 1 and v["verdict"] == "INCONCLUSIVE" and v["needed"] == MIN_ITEMS
    assert all(t["low"] is None and t["verdict"] == "INCONCLUSIVE" for t in v["terms"])
    assert report.passed  # INCONCLUSIVE fails nothing: it asks for more sequences
    text = render(report)
    assert f"(1 sequence: too few for an interval; give at least {MIN_ITEMS})" in text
    assert "CI [" not in text
