"""``crosscheck --quantize MODE --attribute`` (docs/quantised.md, "Which layer, quantised
alone"): each layer of a keras-hub causal LM quantised alone, one forward pass each,
ranked by the KL mean it moves; validated against the per-layer table, and a damaged
layer ranked first.

The tiny Llama (``tiny:llama``) has 2 blocks: with the embeddings, 3 parts, so "the top 3
of both rankings share 2" would hold by construction there. The validation runs on a
6-block Llama checkpoint written here as tfparity writes its tiny ones (the tiny config,
weights seeded by parameter name): 7 parts, so the top 3 of each is a real choice."""

from __future__ import annotations

import pytest

pytest.importorskip("keras_hub")

from tfparity import InputOptions, cli  # noqa: E402
from tfparity.api import crosscheck, load_model  # noqa: E402
from tfparity.errors import TfparityError  # noqa: E402
from tfparity.report.text import render  # noqa: E402

BLOCKS = 6
INPUTS = InputOptions(random=4, seq_len=8, batch_size=4, seed=1)
DAMAGED = "transformer_layer_3/feedforward_output_dense/kernel_scale"


@pytest.fixture(scope="module")
def deep_llama(tmp_path_factory):
    """A 6-block tiny Llama checkpoint directory (rms_norm_eps at keras-hub's value, so
    the float port passes the referee and the quantisation is all that differs)."""
    from tfparity.adapters.runtime.imports import import_transformers
    from tfparity.adapters.sources.tiny import seed_torch_parameters, tiny_config

    config = tiny_config("llama")
    config.num_hidden_layers, config.rms_norm_eps = BLOCKS, 1e-6
    model = import_transformers().LlamaForCausalLM._from_config(config, attn_implementation="eager")
    seed_torch_parameters(model, seed="tiny:llama-6")
    directory = tmp_path_factory.mktemp("llama6")
    model.save_pretrained(str(directory), safe_serialization=True)
    return directory


@pytest.fixture(scope="module")
def causal_lm(deep_llama):
    return load_model(f"keras-hub:{deep_llama}")


def _run(side, directory, mode="int8"):
    (report,) = crosscheck(
        side, pt=str(directory), reload=False, quantize=mode, attribute=True, inputs=INPUTS
    )
    return report


def test_one_at_a_time_agrees_with_the_per_layer_ranking(causal_lm, deep_llama):
    report = _run(causal_lm, deep_llama)
    assert report.passed, render(report)
    q = report.details["quantisation"]
    a = q["attribution"]
    assert a["metric"] == "kl_mean" and a["passes"] == BLOCKS + 1  # L+1 forward passes
    rows = a["layers"]
    assert [r["rank"] for r in rows] == list(range(1, BLOCKS + 2))
    assert {r["layer"] for r in rows} == {"embeddings", *range(BLOCKS)}
    values = [r["value"] for r in rows]
    assert values == sorted(values, reverse=True) and values[-1] > 0
    # the validation: the top 3 of both rankings share at least 2 layers
    per_layer = [r["layer"] for r in q["layers"]][:3]
    alone = [r["layer"] for r in rows][:3]
    assert len(set(per_layer) & set(alone)) >= 2, (per_layer, alone)
    assert a["top3_overlap"] == len(set(per_layer) & set(alone))
    text = render(report)
    assert f"each layer quantised alone ({BLOCKS + 1} forward passes)" in text
    assert "transformer_layer_5" in text


def test_a_damaged_layer_is_ranked_first_and_named_in_the_hint(causal_lm, deep_llama, monkeypatch):
    """The damage is done by a hook on the quantised copies: attribution quantises the
    float model afresh per layer, so it sees a layer whose quantisation hurts, never a
    scale damaged in a stored artefact (the per-layer table names that one)."""
    from tfparity.adapters.keras_hub import quantised_side as module

    real = module.quantised_side

    def damaged(side, mode, layers=None):
        copy = real(side, mode, layers)
        for v in copy.model.weights:
            if v.path == DAMAGED:  # in the full copy and in layer 3's alone
                v.assign(v.numpy() * 50)
        return copy

    monkeypatch.setattr(module, "quantised_side", damaged)
    report = _run(causal_lm, deep_llama)
    assert not report.passed
    q = report.details["quantisation"]
    assert q["attribution"]["layers"][0]["layer"] == 3
    assert q["layers"][0]["layer"] == 3
    failing = [c for c in report.failures if c.name.startswith("quantised int8 vs float")]
    assert failing and "quantised alone, layer 3 (transformer_layer_3)" in failing[0].problem
    hint = report.first_divergence.hint
    assert "worst is layer 3" in hint and "quantised alone, layer 3" in hint


def test_the_parts_are_the_embeddings_and_each_block_by_exact_path(causal_lm):
    from tfparity.adapters.keras_hub.quantised_side import quantisable_parts
    from tfparity.adapters.tf_common.quantize import _under

    parts = quantisable_parts(causal_lm)
    assert parts[0] == ("embeddings", "token_embedding")
    assert parts[1:] == [(i, f"transformer_layer_{i}") for i in range(BLOCKS)]

    class Layer:
        def __init__(self, path):
            self.path = path

    chosen = _under(("transformer_layer_1",))
    assert chosen(Layer("transformer_layer_1/self_attention/query"))
    assert not chosen(Layer("transformer_layer_10/self_attention/query"))


def test_attribute_without_quantize_or_on_a_side_keras_cannot_quantise_exits_2(capsys):
    assert cli.main(["crosscheck", "keras-hub:tiny:llama/causal-lm", "--attribute"]) == 2
    assert "--attribute quantises one layer at a time" in capsys.readouterr().err
    argv = ["crosscheck", "tiny:bert", "--no-reload", "--quantize", "int8", "--attribute"]
    assert cli.main(argv) == 2
    assert "--quantize int8 quantises a Keras 3 keras-hub model" in capsys.readouterr().err
    with pytest.raises(TfparityError, match="--attribute quantises"):
        crosscheck("tiny:bert", attribute=True)


def test_a_backbone_is_ranked_by_its_last_hidden_state(monkeypatch):
    """No LM head: each part quantised alone is ranked by the relative error of the
    last hidden state; a damaged block comes first (undamaged, block 0 leads here)."""
    from tfparity.adapters.keras_hub import quantised_side as module

    real = module.quantised_side

    def damaged(side, mode, layers=None):
        copy = real(side, mode, layers)
        for v in copy.model.weights:
            if v.path == "transformer_layer_1/feedforward_output_dense/kernel_scale":
                v.assign(v.numpy() * 50)
        return copy

    monkeypatch.setattr(module, "quantised_side", damaged)
    (report,) = crosscheck(
        "keras-hub:tiny:llama",
        pt_config={"rms_norm_eps": 1e-6},
        reload=False,
        quantize="int8",
        attribute=True,
        inputs=INPUTS,
    )
    a = report.details["quantisation"]["attribution"]
    assert a["metric"] == "relative_error of the last hidden state" and a["passes"] == 3
    assert [r["layer"] for r in a["layers"]][0] == 1
    assert all(r["value"] > 0 for r in a["layers"])
