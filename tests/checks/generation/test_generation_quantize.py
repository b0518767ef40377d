"""``generate --quantize`` (docs/generate.md, "A quantised model"): a Keras-quantised
copy of a keras-hub causal LM generates against PyTorch and is judged by its mode's
distribution budget over the prompts, its tokens reported, not by the referee per step;
a damaged scale fails; what Keras cannot quantise exits 2."""

from __future__ import annotations

import pytest

pytest.importorskip("keras_hub")

from tfparity import cli  # noqa: E402
from tfparity.api import generate  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402
from tfparity.report.generation import render_generation  # noqa: E402

SPEC = "keras-hub:tiny:llama/causal-lm"
PT = "tiny:llama/causal-lm"
EPS = {"rms_norm_eps": 1e-6}  # keras-hub's Llama converter drops it (a known difference)
DAMAGED = "transformer_layer_1/feedforward_output_dense/kernel_scale"
N = 8
# five prompts: the bootstrap's fewest items (MIN_ITEMS) for an interval and a verdict
PROMPTS = ("The quick brown fox", "Hello world.", "One two three", "It was", "Numbers: 1, 2")


@pytest.fixture(scope="module")
def causal_lm():
    from tfparity.adapters.keras_hub.task import load_keras_hub_side

    return load_keras_hub_side(SPEC)


def _run(side):
    return generate(side, pt=PT, pt_config=EPS, new_tokens=N, quantize="int8", texts=PROMPTS)


def test_a_clean_int8_generation_passes_by_its_budget_with_its_tokens_reported(causal_lm):
    report = _run(causal_lm)
    assert report.passed, render_generation(report)
    d = report.details
    assert d["judge"].startswith("the int8 distribution budget (kl_mean<=0.015")
    q = d["quantisation"]
    assert q["mode"] == "int8" and "default for int8" in q["budget"]
    assert 0 < q["tokens_agreed"] <= q["tokens"] == N * d["prompts"]
    verdict = d["distribution"]["budget"]
    assert verdict["verdict"] in ("PASS", "INCONCLUSIVE")  # 5 prompts: few items
    assert verdict["terms"][0]["verdict"] == "PASS"  # kl_mean, far inside 0.015
    assert d["embeds_start"] == "not run"
    text = render_generation(report)
    assert "quantisation: Keras model.quantize('int8')" in text
    assert f"quantised int8 within its budget, {q['tokens_agreed']} of" in text
    assert report.model.endswith("quantised int8")  # the copy generated, not the float


def test_a_damaged_scale_fails_its_budget_with_the_attribute_hint(causal_lm, monkeypatch):
    from tfparity.adapters.keras_hub import quantised_side as module

    real = module.quantised_side

    def damaged(side, mode, layers=None):
        copy = real(side, mode, layers)
        (scale,) = [v for v in copy.model.weights if v.path == DAMAGED]
        scale.assign(scale.numpy() * 50)
        return copy

    monkeypatch.setattr(module, "quantised_side", damaged)
    report = _run(causal_lm)
    assert not report.passed
    failing = [c.name for c in report.failures]
    assert any(name.startswith("distribution same_top1") for name in failing), failing
    assert not any(name.endswith("cache") for name in failing)  # the cache is its own
    f = report.first_divergence
    assert f is not None and "--quantize int8 --attribute" in f.hint
    assert render_generation(report).splitlines()[-1].startswith("FAIL generate: distribution")


def test_what_cannot_be_quantised_exits_2(capsys):
    argv = ["generate", "tiny:gpt2/causal-lm", "--quantize", "int8", "--new-tokens", "2"]
    assert cli.main(argv) == 2
    assert "--quantize int8 quantises a Keras 3 keras-hub model" in capsys.readouterr().err
    with pytest.raises(TfparityError, match="Unknown quantisation mode 'int3'"):
        generate(SPEC, quantize="int3")
