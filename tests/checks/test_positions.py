"""positions: s1..s4 scenarios, equivariance, explicit position_ids."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.api import make_batches
from tfparity.checks.positions import Answer, PositionsOptions, check_positions
from tfparity.cli import main
from tfparity.report.sections import positions_verdict, render_positions

FEW = PositionsOptions(permutations=3, seed=0)
ONE = PositionsOptions(permutations=1, seed=0)
FAST = ("--permutations", "1", "--random", "1", "--seq-len", "8")


def test_tiny_bert_four_scenarios(load_tf_model):
    model = load_tf_model("tiny:bert")
    report = check_positions(model, make_batches(model), FEW)
    d = report.details
    assert set(d["scenarios"]) == {"s1_s2", "s1_s3", "s1_s4", "s2_s3", "s2_s4", "s3_s4"}
    assert d["scenarios"]["s1_s4"]["max_abs_diff"] < 1e-5
    for pair in ("s1_s2", "s1_s3", "s2_s3", "s2_s4", "s3_s4"):
        assert d["scenarios"][pair]["mean_abs_diff"] > 0.1, pair
    assert d["equivariant"] is True and d["explicit_positions_match"] is True
    assert report.passed


class _IgnoresPositions(TFModel):
    """A broken model: explicit position_ids never reach it."""

    def call_kwargs(self, batch):
        return super().call_kwargs(replace(batch, position_ids=None))


class _ReversesPositions(TFModel):
    """A broken model: explicit position_ids arrive reversed."""

    def call_kwargs(self, batch):
        if batch.position_ids is not None:
            batch = replace(batch, position_ids=batch.position_ids[:, ::-1].copy())
        return super().call_kwargs(batch)


def _as(cls, model):
    return cls(model.name, model.model, model.tokenizer, model.config)


def test_ignored_position_ids_fail_equivariance(load_tf_model):
    model = _as(_IgnoresPositions, load_tf_model("tiny:bert"))
    report = check_positions(model, make_batches(model), FEW)
    s = report.details["scenarios"]
    assert s["s1_s2"]["max_abs_diff"] == 0.0  # permuting positions changed nothing
    assert s["s1_s4"]["mean_abs_diff"] > 0.1
    assert report.details["equivariant"] is False
    assert report.passed is False
    assert positions_verdict(report).startswith(
        "FAIL positions: equivariant NO (permuting position_ids alone changes nothing: they "
        "do not reach the model)"
    )


def test_mangled_position_ids_fail_explicit_match(load_tf_model):
    model = _as(_ReversesPositions, load_tf_model("tiny:bert"))
    report = check_positions(model, make_batches(model), FEW)
    assert report.details["explicit_positions_match"] is False
    assert report.passed is False
    line = positions_verdict(report)  # the failing facts, each with its output and size
    assert "equivariant NO (tokens and position_ids permuted together move " in line
    assert "explicit positions match NO (position_ids equal to the defaults, passed " in line
    assert "by up to " in line and "last_hidden_state" in line


@pytest.mark.parametrize(
    "spec, kind, tokens",
    [
        ("tiny:longformer", "sliding-window attention", 4),
        ("tiny:convbert", "span-based dynamic convolution", 9),
        ("tiny:mobilebert", "trigram input embeddings", 3),
        ("tiny:mpnet", "relative attention bias", None),
    ],
)
def test_a_window_in_sequence_order_is_not_held_to_equivariance(load_tf_model, spec, kind, tokens):
    """Longformer's attention windows, ConvBERT's convolution, MobileBERT's trigram input
    and MPNet's relative attention bias follow sequence order whatever the position_ids
    say: s1 and s4 differ by design (each failed a clean model), so equivariance does not
    apply and the explicit positions are judged alone; mangled ones still fail."""
    model = load_tf_model(spec)
    report = check_positions(model, make_batches(model), FEW)
    assert report.passed and report.details["equivariant"] is None
    assert report.details["local_window"] == {"kind": kind, "tokens": tokens}
    assert report.details["scenarios"]["s1_s4"]["max_abs_diff"] > 1e-3  # it does differ
    size = f" ({tokens} tokens)" if tokens is not None else ""
    assert any(n.startswith(f"{kind.capitalize()}{size}: ") for n in report.notes)
    broken = _as(_ReversesPositions, model)
    report = check_positions(broken, make_batches(broken), FEW)
    assert report.details["explicit_positions_match"] is False and not report.passed


@pytest.fixture(scope="module")
def mlm(load_tf_model):
    return load_tf_model("tiny:bert/masked-lm")


@pytest.fixture(scope="module")
def classifier(load_tf_model):
    return load_tf_model("tiny:bert/sequence-classification")


def test_a_masked_lm_is_judged_on_its_logits_token_by_token(mlm):
    """A head model answers with logits, not last_hidden_state (which it does not
    return): s1 == s4 on the logits, s2 and s3 far off."""
    report = check_positions(mlm, make_batches(mlm), ONE)
    d, s = report.details, report.details["scenarios"]
    assert d["compared"] == "logits" and d["per_token"] is True
    assert s["s1_s4"]["max_abs_diff"] < 1e-5
    for pair in ("s1_s2", "s1_s3"):
        assert s[pair]["mean_abs_diff"] > 1e4 * s["s1_s4"]["mean_abs_diff"], pair
    assert report.comparisons[0].name == "s4_vs_s1:logits" and report.comparisons[0].passed
    assert d["equivariant"] is True and d["explicit_positions_match"] is True and report.passed


def test_a_masked_lm_ignoring_position_ids_fails_on_its_logits(mlm):
    report = check_positions(_as(_IgnoresPositions, mlm), make_batches(mlm), ONE)
    assert report.details["scenarios"]["s1_s2"]["max_abs_diff"] == 0.0
    failing = [c.name for c in report.comparisons if not c.passed]
    assert failing == ["s4_vs_s1:logits"]
    assert report.details["equivariant"] is False and report.passed is False


def test_a_classifier_keeps_its_pooled_token_in_place_and_judges_its_logits(classifier):
    """Sequence logits have no token axis; the head reads token 0, which every
    permutation keeps, so s4 pools the same token as s1 (moving it would not)."""
    report = check_positions(classifier, make_batches(classifier), ONE)
    d, s = report.details, report.details["scenarios"]
    assert (d["compared"], d["per_token"], d["pooled_token"]) == ("logits", False, 0)
    assert s["s1_s4"]["max_abs_diff"] < 1e-6
    assert s["s1_s2"]["mean_abs_diff"] > 1e3 * s["s1_s4"]["mean_abs_diff"]
    assert d["equivariant"] is True and report.passed
    assert "one per sequence, read at token 0" in render_positions(report)
    perms = [Answer.of(classifier.head).permutation(np.random.default_rng(i), 9) for i in range(5)]
    assert all(p[0] == 0 and sorted(p) == list(range(9)) for p in perms)
    assert any(not np.array_equal(p, np.arange(9)) for p in perms)


def test_a_classifier_ignoring_position_ids_fails(classifier):
    report = check_positions(_as(_IgnoresPositions, classifier), make_batches(classifier), ONE)
    assert [c.name for c in report.comparisons if not c.passed] == ["s4_vs_s1:logits"]
    assert report.passed is False


@pytest.mark.parametrize("arch", ["xlnet", "t5"])
def test_relative_position_models_do_not_fail(load_tf_model, arch):
    model = load_tf_model(f"tiny:{arch}")
    report = check_positions(model, make_batches(model), FEW)
    d = report.details
    assert d["equivariant"] is None and d["position_kind"] == "relative"
    assert d["scenarios"]["s1_s3"] is not None and d["scenarios"]["s1_s4"] is None
    assert report.passed
    assert any("relative" in n for n in report.notes)


@pytest.mark.parametrize("spec", ["tiny:gpt2", "tiny:gpt2/causal-lm"])
def test_decoder_is_not_judged_on_equivariance(load_tf_model, spec):
    model = load_tf_model(spec)
    report = check_positions(model, make_batches(model), FEW)
    assert report.details["compared"] == ("logits" if "/" in spec else "last_hidden_state")
    assert report.details["equivariant"] is None and report.details["causal"] is True
    assert report.details["scenarios"]["s1_s4"]["max_abs_diff"] > 1e-3  # causal mask
    assert report.details["explicit_positions_match"] is True and report.passed


@pytest.mark.slow
def test_minilm_is_equivariant_over_ten_permutations(minilm):
    report = check_positions(minilm, make_batches(minilm), PositionsOptions(permutations=10))
    s = report.details["scenarios"]
    assert report.details["equivariant"] is True
    assert s["s1_s4"]["max_abs_diff"] < 1e-4
    assert s["s2_s3"]["mean_abs_diff"] > 1000 * s["s1_s4"]["mean_abs_diff"]
    assert s["s2_s3"]["mean_abs_diff"] > 0.05
    assert report.details["explicit_positions_match"] is True and report.passed


def test_cli(tmp_path):
    out = tmp_path / "p.json"
    args = ["positions", "tiny:roberta", "--permutations", "2", "--json", str(out)]
    assert main(args) == 0
    data = json.loads(out.read_text())
    assert data["equivariant"] is True and data["explicit_positions_match"] is True
    assert np.isfinite(data["scenarios"]["s2_s3"]["max_abs_diff"])
    assert main(["positions", "tiny:bert", "--permutations", "0"]) == 2


def test_head_picks_the_class_and_what_is_judged(tmp_path, monkeypatch, capsys):
    """--head base on a masked-LM checkpoint judges its base model's last_hidden_state,
    --head masked-lm on tiny:bert the head's logits: both PASS. Position ids that never
    reach the model FAIL (exit 1) under --head base, the verdict line saying so."""
    for spec, head, compared in (
        ("tiny:bert/masked-lm", "base", "last_hidden_state"),
        ("tiny:bert", "masked-lm", "logits"),
    ):
        out = tmp_path / f"{head}.json"
        argv = ["positions", spec, "--head", head, *FAST, "--json", str(out)]
        assert main(argv) == 0, capsys.readouterr()
        data = json.loads(out.read_text())
        assert data["details"]["compared"] == compared and data["equivariant"] is True
    own = TFModel.call_kwargs
    monkeypatch.setattr(TFModel, "call_kwargs", lambda m, b: own(m, replace(b, position_ids=None)))
    capsys.readouterr()
    assert main(["positions", "tiny:bert/masked-lm", "--head", "base", *FAST]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("FAIL positions: equivariant NO (permuting position_ids alone")


def test_a_keras_hub_side_exits_2_by_name_not_a_silent_pass(capsys):
    """The positions check reads how the model encodes positions off the model; a
    keras-hub backbone does not expose it, so it is refused (exit 2), never a PASS of
    n/a scenarios; an HF TF model is judged (exit 0)."""
    assert main(["positions", "tiny:bert", "--permutations", "1"]) == 0
    capsys.readouterr()
    assert main(["positions", "keras-hub:tiny:bert", "--permutations", "1"]) == 2
    err = capsys.readouterr().err
    assert "The positions check needs how the model encodes positions" in err
    assert "keras-hub:tiny:bert (a keras-hub backbone (BertBackbone)) does not expose" in err
