"""``crosscheck --quantize`` (docs/quantised.md, "Keras quantisation"): a keras-hub
causal LM quantised by Keras is judged against its own float model by the mode's
distribution budget, apart from the port's error; a damaged scale fails naming its
layer; a quantised .keras file is read as it is, its mode named; what cannot be
quantised exits 2."""

from __future__ import annotations

import pytest

pytest.importorskip("keras_hub")

from tfparity import cli  # noqa: E402
from tfparity.api import crosscheck  # noqa: E402
from tfparity.compare.budgets import budgets_for  # noqa: E402
from tfparity.compare.growth import LayerError, ranked_layers  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402
from tfparity.report.text import render  # noqa: E402

SPEC = "keras-hub:tiny:llama/causal-lm"
# keras-hub's Llama converter drops rms_norm_eps (a known difference): the reference is
# built with keras-hub's value, so the float port passes the referee and (a) is clean
PT_EPS = ["--pt", "tiny:llama/causal-lm", "--pt-config", "rms_norm_eps=1e-06"]
DAMAGED = "transformer_layer_1/feedforward_output_dense/kernel_scale"


@pytest.fixture(scope="module")
def causal_lm():
    from tfparity.adapters.keras_hub.task import load_keras_hub_side

    return load_keras_hub_side(SPEC)


def _run(side, **kwargs):
    return crosscheck(
        side,
        pt="tiny:llama/causal-lm",
        pt_config={"rms_norm_eps": 1e-6},
        reload=False,
        quantize="int8",
        **kwargs,
    )[0]


def test_clean_int8_passes_with_the_statistics_and_their_interval(causal_lm, capsys):
    report = _run(causal_lm)
    assert report.passed, render(report)
    q = report.details["quantisation"]
    assert q["mode"] == "int8" and "default for int8" in q["budget"]
    for key in ("vs_float", "vs_pytorch"):
        d = q[key]
        assert d["positions"] > 0 and 0 <= d["kl_mean"] < 0.015 and d["same_top1"] >= 0.95
        verdict = d["budget"]
        assert verdict["verdict"] == "PASS"
        for term in verdict["terms"]:
            assert term["low"] <= term["value"] <= term["high"]
    added = [r["added"] for r in q["layers"]]
    assert len(added) == 3 and added == sorted(added, reverse=True)  # ranked, worst first
    text = render(report)
    assert "(b) quantised vs float: KL mean" in text and "(c) quantised vs PyTorch" in text
    assert "PASS: kl_mean<=0.015 PASS" in text
    assert report.details["judge"].startswith("float64 referee")  # (a) as ever


def test_a_damaged_scale_fails_naming_its_layer(causal_lm, monkeypatch):
    from tfparity.adapters.keras_hub import quantised_side as module

    real = module.quantised_side

    def damaged(side, mode):
        copy = real(side, mode)
        (scale,) = [v for v in copy.model.weights if v.path == DAMAGED]
        scale.assign(scale.numpy() * 50)
        return copy

    monkeypatch.setattr(module, "quantised_side", damaged)
    report = _run(causal_lm)
    assert not report.passed
    q = report.details["quantisation"]
    assert q["vs_float"]["budget"]["verdict"] == "FAIL"
    assert q["layers"][0]["layer"] == 1  # ranked first: the damaged layer
    assert q["worst_layer"].startswith("layer 1 ")
    failing = [c for c in report.failures if c.name.startswith("quantised int8 vs float")]
    assert failing and "quantises worst is layer 1" in failing[0].problem
    assert report.first_divergence is not None and report.first_divergence.layer == 1


def test_a_quantised_keras_file_is_read_as_it_is_and_named(causal_lm, tmp_path, capsys):
    from tfparity.adapters.tf_common.quantize import quantize

    path = tmp_path / "int8.keras"
    backbone = causal_lm.backbone.__class__.from_config(causal_lm.backbone.get_config())
    backbone.set_weights(causal_lm.backbone.get_weights())
    quantize(backbone, "int8")
    backbone.save(path)
    assert cli.main(["crosscheck", str(path), *PT_EPS]) == 0
    out = capsys.readouterr().out
    assert "quantisation: keras int8" in out and "default for keras int8" in out
    assert "is quantised by Keras (int8" in out
    assert cli.main(["crosscheck", str(path), *PT_EPS, "--quantize", "int8"]) == 2
    assert "already quantised (int8)" in capsys.readouterr().err


def test_what_cannot_be_quantised_exits_2(capsys):
    assert cli.main(["crosscheck", "tiny:bert", "--no-reload", "--quantize", "int8"]) == 2
    err = capsys.readouterr().err
    assert "--quantize int8 quantises a Keras 3 keras-hub model" in err
    with pytest.raises(TfparityError, match="Unknown quantisation mode 'int3'"):
        crosscheck("tiny:bert", quantize="int3")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["crosscheck", SPEC, "--quantize", "int3"])
    assert exit_.value.code == 2


def test_budgets_per_mode_and_the_ranking():
    int4 = budgets_for("keras int4").kl_limits()[0]
    assert [str(x) for x in int4] == ["kl_mean<=0.05", "same_top1>=0.9"]
    given = budgets_for("keras int8").kl_limits(int4)
    assert given[1] == "set by --kl-budget"
    assert budgets_for("keras float8").kl and not budgets_for("float16").kl
    rows = [
        LayerError(0, "embeddings", 0.1, 0.1),
        LayerError(1, 0, 0.2, 0.1),
        LayerError(2, 1, 0.9, 0.7),
    ]
    assert [r.layer for r in ranked_layers(rows)] == [1, "embeddings", 0]
