"""The gradients check: clean ports pass (ids vs embeds, and TF vs PyTorch), and each
gradient fault fails in the report that must catch it, localised and named, while the
forward-only checks (and the other report) pass."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity import InputOptions, assert_gradients, cli, gradients
from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.reference.pt_model import load_pt
from tfparity.api import check_embeds, make_batches
from tfparity.checks.gradients.check import GradientsOptions, check_gradients
from tfparity.errors import TfparityError
from tfparity.report.gradients import render_gradients
from tfparity.testing import gradient_faults

TINY = "tiny:bert"
INPUTS = InputOptions(random=6, seq_len=12, batch_size=3, seed=1)
FAULTS = [(check, f.name) for check, faults in gradient_faults().items() for f in faults]


@pytest.fixture(scope="module")
def reference(load_tf_model):
    """PyTorch tiny:bert (loaded from the spec, as the API does) and the batches."""
    return load_pt(TINY), make_batches(load_tf_model(TINY), INPUTS)


def by_check(reports):
    return {r.check: r for r in reports}


def test_clean_port_passes_both_comparisons(reference, load_tf_model):
    pt, batches = reference
    reports = by_check(check_gradients(load_tf_model(TINY), pt, batches))
    assert set(reports) == {"gradients-embeds", "gradients"}
    for report in reports.values():
        assert report.passed, [c.name for c in report.failures]
        assert report.first_divergence is None
    compared = {c.name for c in reports["gradients"].comparisons}
    # the embeddings, every hidden state and the weights on the scalar's path
    assert {
        "loss",
        "grad:inputs_embeds",
        "grad:hidden_states[0]",
        "grad:hidden_states[2]",
    } <= compared
    assert "grad:encoder.layer.1.output.dense.weight" in compared
    assert reports["gradients"].comparisons[0].judge == "referee"
    word = reports["gradients-embeds"].details["word_embeddings"]
    assert f"grad:{word}" in {c.name for c in reports["gradients-embeds"].comparisons}


@pytest.mark.parametrize(("check", "fault"), FAULTS)
def test_gradient_faults_fail_localised_in_their_report(reference, check, fault):
    pt, batches = reference
    f = next(x for x in gradient_faults()[check] if x.name == fault)
    broken = f.apply(TFModel.load(TINY))
    reports = by_check(check_gradients(broken, pt, batches))
    caught = reports[check]
    assert caught.passed is False
    d = caught.first_divergence
    e = f.expect
    assert (d.hidden_state, d.layer, d.component) == (e.hidden_state, e.layer, e.component), d
    assert e.hint in d.hint, d.hint
    other = "gradients" if check == "gradients-embeds" else "gradients-embeds"
    assert reports[other].passed, [c.name for c in reports[other].failures]


def test_gather_faults_pass_the_forward_embeds_check():
    """Why gradients are checked at all: the forward comparison cannot see them."""
    for fault in gradient_faults()["gradients-embeds"]:
        broken = fault.apply(TFModel.load(TINY))
        assert check_embeds(broken, inputs=INPUTS).passed, fault.name


def test_a_users_embeds_fn_with_a_wrong_custom_gradient_is_named(reference):
    import tensorflow as tf

    pt, batches = reference
    model = TFModel.load(TINY)
    matrix = model.word_embeddings()

    @tf.custom_gradient
    def doubled_backward(x):
        return tf.identity(x), lambda upstream: 2.0 * upstream

    def embeds_fn(batch):
        return doubled_backward(tf.gather(matrix, batch.input_ids))

    options = GradientsOptions(embeds_fn=embeds_fn)
    report = by_check(check_gradients(model, None, batches, options))["gradients-embeds"]
    assert not report.passed
    assert report.first_divergence.layer == "embeddings"
    assert "scaled by 2" in report.first_divergence.hint
    right = GradientsOptions(embeds_fn=lambda b: tf.gather(matrix, b.input_ids))
    assert check_gradients(model, None, batches, right)[0].passed


def test_a_task_head_is_differentiated_through_its_loss():
    reports = gradients("tiny:bert/sequence-classification", inputs=INPUTS)
    assert all(r.passed for r in reports), [c.name for r in reports for c in r.failures]
    assert "cross-entropy of logits" in reports[1].details["scalar"]
    assert "grad:classifier.weight" in {c.name for c in reports[1].comparisons}


def test_keras_hub_backbone_passes_and_its_gather_fault_is_caught():
    spec = "keras-hub:tiny:qwen2"
    reports = by_check(gradients(spec, inputs=INPUTS))
    assert all(r.passed for r in reports.values())
    assert "grad:layers.1.mlp.down_proj.weight" in {
        c.name for c in reports["gradients"].comparisons
    }
    from tfparity.api import load_model

    broken = gradient_faults()["gradients-embeds"][1].apply(load_model(spec))
    report = by_check(gradients(broken, pt=spec, inputs=INPUTS))["gradients-embeds"]
    assert not report.passed and "scaled by 0.5" in report.first_divergence.hint


def test_gpt2_says_which_hidden_states_it_cannot_differentiate():
    """transformers' TF GPT-2 returns reshaped copies of its hidden states: no gradient
    reaches them, which the report says rather than compare nothing silently."""
    report = by_check(gradients("tiny:gpt2", inputs=INPUTS))["gradients"]
    assert report.passed
    assert any("no gradient reaches it" in n for n in report.notes)


def test_report_renders_and_the_assertion_raises_with_reports(reference, load_tf_model):
    pt, batches = reference
    fault = gradient_faults()["gradients"][0]
    broken = fault.apply(TFModel.load(TINY))
    with pytest.raises(AssertionError) as info:
        assert_gradients(broken, pt, batches=batches)
    assert "FAIL gradients" in str(info.value)
    text = render_gradients(info.value.reports[1])
    assert "first divergence: hidden_states[1] · layer 1" in text
    assert "gradient w.r.t." in text and "FAIL gradients:" in text
    reports = assert_gradients(load_tf_model(TINY), pt, batches=batches)
    assert all(r.passed for r in reports)


def test_cli_exit_codes_and_json(tmp_path, capsys):
    out = tmp_path / "g.json"
    args = ["gradients", TINY, "--random", "3", "--seq-len", "8", "--json", str(out)]
    assert cli.main(args) == 0
    data = json.loads(out.read_text())
    assert data["check"] == "gradients-embeds+gradients" and data["passed"] is True
    assert {r["check"] for r in data["reports"]} == {"gradients-embeds", "gradients"}
    assert cli.main(["gradients", TINY, "--no-pt", "--random", "2", "--seq-len", "8"]) == 0
    assert cli.main(["gradients", TINY, "--no-pt", "--pt", TINY]) == 2
    assert "--pt or --no-pt" in capsys.readouterr().err
    assert cli.main(["gradients", "tiny:not-a-model", "--no-pt"]) == 2
    # left padding in a causal model: PyTorch's float64 gradients of the all-masked row
    # are NaN there, so nothing is judged (exit 2), never a verdict from NaN
    left = ["--random", "5", "--seq-len", "7", "--batch-size", "5", "--seed", "7"]
    assert cli.main(["gradients", "keras-hub:tiny:qwen2", *left, "--padding-side", "left"]) == 2
    assert "NaN or Inf" in capsys.readouterr().err


def test_the_scalar_is_seeded_and_reaches_every_token():
    a = by_check(gradients(TINY, pt=False, inputs=INPUTS, seed=0))["gradients-embeds"]
    b = by_check(gradients(TINY, pt=False, inputs=INPUTS, seed=1))["gradients-embeds"]
    loss_a = next(c for c in a.comparisons if c.name == "loss")
    loss_b = next(c for c in b.comparisons if c.name == "loss")
    assert loss_a.worst_expected != loss_b.worst_expected
    with pytest.raises(ValueError, match="seed"):
        gradients(TINY, pt=False, seed=-1)
    assert np.isfinite(loss_a.worst_expected)


# ----------------------------------------------------------------------------- frozen weights

NORM = "encoder.layer.0.attention.output.LayerNorm"
WORD = "embeddings.word_embeddings.weight"


def untrained(freeze):
    """tiny:bert with ``freeze(keras_model)`` set ``trainable = False`` on a layer, as
    users freeze a port; checked to take its variables out of ``trainable_variables``."""
    model = TFModel.load(TINY)
    layer = freeze(model.model)
    layer.trainable = False
    trainable = {id(v) for v in model.model.trainable_variables}
    assert layer.weights and not any(id(v) in trainable for v in layer.weights)
    return model


def frozen_norm(keras_model):
    return keras_model.bert.encoder.layer[0].attention.dense_output.LayerNorm


def test_a_weight_tf_does_not_train_fails_named_and_localised(reference):
    pt, batches = reference
    reports = by_check(check_gradients(untrained(frozen_norm), pt, batches))
    report = reports["gradients"]
    assert report.passed is False
    failing = {c.name: c for c in report.failures}
    assert set(failing) == {f"grad:{NORM}.weight", f"grad:{NORM}.bias"}
    assert "PyTorch differentiates it, TF has no gradient" in failing[f"grad:{NORM}.weight"].problem
    d = report.first_divergence
    assert (d.hidden_state, d.layer, d.component) == (1, 0, "attention"), d
    assert f"{NORM}.weight" in d.hint
    assert report.details["excluded_weights"] == []
    assert any("--frozen" in n for n in report.notes)  # what to do, if it is on purpose
    text = render_gradients(report)
    assert "first divergence: hidden_states[1] · layer 0 · component attention" in text
    # TF's own two paths agree: the frozen norm changes neither
    assert reports["gradients-embeds"].passed


def test_a_weight_frozen_on_purpose_is_excluded_and_listed(reference):
    pt, batches = reference
    model = untrained(frozen_norm)
    options = GradientsOptions(frozen=(NORM,))
    report = by_check(check_gradients(model, pt, batches, options))["gradients"]
    assert report.passed, [c.name for c in report.failures]
    assert report.details["excluded_weights"] == [f"{NORM}.bias", f"{NORM}.weight"]
    assert any(n.startswith("Frozen on purpose") and NORM in n for n in report.notes)
    compared = {c.name for c in report.comparisons}
    assert f"grad:{NORM}.weight" not in compared
    # a glob over layers excludes both layers' norms; the assertion takes it too
    reports = assert_gradients(model, pt, batches=batches, frozen="encoder.layer.*.LayerNorm.*")
    assert len(reports[1].details["excluded_weights"]) == 8


def test_frozen_embeddings_fail_naming_the_word_matrix(reference):
    pt, batches = reference
    model = untrained(lambda m: m.bert.embeddings)
    reports = by_check(check_gradients(model, pt, batches))
    report = reports["gradients"]
    assert report.passed is False
    assert f"grad:{WORD}" in {c.name for c in report.failures}
    d = report.first_divergence
    assert (d.layer, d.component) == ("embeddings", "embeddings"), d
    assert WORD in d.hint
    # neither TF path trains the matrix: nothing to compare there, and a note says so
    embeds = reports["gradients-embeds"]
    assert embeds.passed and any("not trainable in TF" in n for n in embeds.notes)
    fine = GradientsOptions(frozen=("embeddings.*",))
    assert check_gradients(model, pt, batches, fine)[1].passed


def test_a_frozen_pattern_that_matches_nothing_is_bad_input(capsys):
    quick = ["gradients", TINY, "--random", "2", "--seq-len", "8"]
    assert cli.main([*quick, "--frozen", "LayerNrom"]) == 2
    err = capsys.readouterr().err
    assert "'LayerNrom'" in err and "Traceback" not in err
    assert cli.main([*quick, "--no-pt", "--frozen", "LayerNorm"]) == 2
    assert "--no-pt" in capsys.readouterr().err
    with pytest.raises(TfparityError, match="'nothing'"):
        gradients(TINY, inputs=INPUTS, frozen=["pooler", "nothing"])


def test_cli_frozen_lists_what_it_excludes(tmp_path, capsys):
    out = tmp_path / "g.json"
    args = ["gradients", TINY, "--random", "2", "--seq-len", "8", "--json", str(out)]
    assert cli.main([*args, "--frozen", "pooler.*", "--frozen", WORD]) == 0
    assert "Frozen on purpose" in capsys.readouterr().out
    data = json.loads(out.read_text())
    excluded = data["reports"][1]["details"]["excluded_weights"]
    assert excluded == sorted(["pooler.dense.bias", "pooler.dense.weight", WORD])


def test_cli_takes_a_port_and_its_reference_as_crosscheck_does(tmp_path, capsys):
    """`gradients --tf A --pt B`: the clean port passes both reports; the same port saved
    with a broken feed-forward fails TF against PyTorch; --tf alone exits 2."""
    from tfparity.testing import perturb_ffn

    short = ["--random", "2", "--seq-len", "8"]
    assert cli.main(["gradients", "--tf", TINY, "--pt", TINY, *short]) == 0
    port = TFModel.load(TINY)
    perturb_ffn(port, 1, 1.5)
    port.model.save_pretrained(tmp_path / "port")
    port.tokenizer.save_pretrained(tmp_path / "port")
    capsys.readouterr()
    assert cli.main(["gradients", "--tf", str(tmp_path / "port"), "--pt", TINY, *short]) == 1
    out = capsys.readouterr().out
    assert "PASS gradients-embeds" in out and "FAIL gradients:" in out
    assert cli.main(["gradients", "--tf", str(tmp_path / "port"), "--no-pt"]) == 2
    assert "nothing names its PyTorch reference" in capsys.readouterr().err


def test_a_stored_reference_is_refused_by_name_a_live_one_is_differentiated(reference):
    """Stored outputs (a golden file) hold runs, not a model to differentiate: the API
    exits 2 with a sentence before any run, where a live reference of the same model
    passes (test_clean_port_passes_both_comparisons)."""
    from tfparity.adapters.reference.stored import capture

    pt_model, batches = reference
    stored = capture(pt_model, batches[:1], model=TINY)
    with pytest.raises(TfparityError) as refused:
        gradients(TINY, pt=stored, inputs=INPUTS)
    text = str(refused.value)
    assert "is stored outputs (a golden file" in text
    assert "the gradients check needs a live PyTorch model" in text and "pt= a MODEL spec" in text
    assert pt_model.gradients_refusal() is None
    with pytest.raises(TfparityError, match="needs a live PyTorch model"):
        stored.gradients(batches[0], None)


def test_xlnets_time_major_embedding_gradient_is_compared_batch_major(load_tf_model):
    """PyTorch's XLNet embeds ids transposed to [seq, batch]: its embedding gradient is
    turned batch-major, as TF's inputs_embeds are (compared as they were, every clean
    XLNet failed on the shapes). The other way: a port with an FFN weight x1.1 fails,
    its inputs_embeds gradient on values, not on a shape."""
    from tfparity.testing import perturb_ffn

    pt = load_pt("tiny:xlnet")
    batches = make_batches(load_tf_model("tiny:xlnet"), InputOptions(random=2, seq_len=5))
    clean = by_check(check_gradients(load_tf_model("tiny:xlnet"), pt, batches))["gradients"]
    rows = {c.name: c for c in clean.comparisons}
    assert clean.passed and rows["grad:inputs_embeds"].passed
    broken = TFModel.load("tiny:xlnet")
    perturb_ffn(broken, layer=1, factor=1.1)
    failed = by_check(check_gradients(broken, pt, batches))["gradients"]
    row = next(c for c in failed.comparisons if c.name == "grad:inputs_embeds")
    assert not failed.passed and not row.passed
    assert "shape" not in (row.problem or "") and row.max_abs_diff > 0


def test_a_float64_referee_that_breaks_where_float32_does_not_is_named(capsys):
    """PyTorch's Longformer differentiates to NaN in float64 over the positions its
    window padding masks (float32 is finite on the same inputs): exit 2 saying that the
    model's float64 code is the cause, not the inputs or the weights."""
    assert cli.main(["gradients", "tiny:longformer", "--random", "2", "--seq-len", "14"]) == 2
    err = capsys.readouterr().err
    assert "where PyTorch's float32 run on the same inputs is finite" in err
    assert "pad on the right" not in err and "please report" not in err


def test_ctrls_in_place_embedding_scale_leaves_the_embedding_gradient_alone(load_tf_model):
    """PyTorch's CTRL scales its embeddings in place (``inputs_embeds *= sqrt(d)``): the
    embedding output kept for its gradient must be the module's, not the scaled tensor
    (kept as it was, every clean CTRL failed on grad:inputs_embeds). The other way: an
    FFN weight x1.1 fails."""
    from tfparity.testing import perturb_ffn

    pt = load_pt("tiny:ctrl")
    batches = make_batches(load_tf_model("tiny:ctrl"), InputOptions(random=2, seq_len=6))
    clean = by_check(check_gradients(load_tf_model("tiny:ctrl"), pt, batches))["gradients"]
    assert clean.passed, [c.name for c in clean.failures]
    assert "grad:inputs_embeds" in {c.name for c in clean.comparisons}
    broken = TFModel.load("tiny:ctrl")
    perturb_ffn(broken, layer=1, factor=1.1)
    assert not by_check(check_gradients(broken, pt, batches))["gradients"].passed
