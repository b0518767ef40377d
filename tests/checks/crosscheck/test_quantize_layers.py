"""``crosscheck --quantize``'s per-layer budget (docs/quantised.md, "Budgets that see one
damaged layer"): a layer whose error growth is far above a correct quantisation's FAILs
and is named, on a backbone (no LM head: judged by its hidden states alone) and on
MiniLM's real weights; a correct quantisation passes."""

from __future__ import annotations

import pytest

pytest.importorskip("keras_hub")

from tfparity.api import crosscheck, load_model  # noqa: E402
from tfparity.compare.growth import (  # noqa: E402
    DEFAULT_GROWTH,
    LayerError,
    growth_limit,
    over_limit,
)
from tfparity.errors import TfparityError  # noqa: E402
from tfparity.report.text import render  # noqa: E402
from tfparity.testing import damage_quantised_copies  # noqa: E402

TINY = "keras-hub:tiny:bert"


@pytest.fixture(scope="module")
def tiny_backbone():
    return load_model(TINY)


@pytest.fixture(scope="module")
def hub_minilm():
    """MiniLM's real weights through keras-hub's BERT converter, loaded once."""
    return load_model("keras-hub:minilm")


# keras-hub's BERT computes the tanh GELU (a known difference): the reference does too,
# so the float port passes the referee and the quantisation is all that differs
GELU = {"hidden_act": "gelu_new"}


def _run(side, pt):
    (report,) = crosscheck(side, pt=pt, pt_config=GELU, reload=False, quantize="int8")
    return report


def _assert_named(report, layer):
    assert not report.passed
    q = report.details["quantisation"]
    assert q["growth"]["verdict"] == "FAIL"
    assert q["growth"]["over"][0]["layer"] == layer
    failing = [c for c in report.failures if "growth" in c.name]
    assert failing and f"layer {layer} (hidden_states[{layer + 1}]) has x" in failing[0].problem
    assert report.first_divergence is not None and report.first_divergence.layer == layer
    assert f"judged by its hidden states: each layer's growth <= x{DEFAULT_GROWTH['int8']:g}" in (
        render(report)
    )


def test_a_clean_backbone_passes_by_its_hidden_states(tiny_backbone):
    report = _run(tiny_backbone, "tiny:bert")
    assert report.passed, render(report)
    q = report.details["quantisation"]
    assert q["vs_float"] == {}  # no LM head: no distribution
    assert q["growth"]["verdict"] == "PASS" and q["growth"]["over"] == []
    assert q["judged"].startswith("judged by its hidden states") and "PASS" in q["judged"]
    assert "not judged" not in render(report)


@pytest.mark.parametrize("factor", [1.5, 50])
def test_a_backbone_with_one_damaged_scale_fails_naming_its_block(
    tiny_backbone, monkeypatch, factor
):
    damage_quantised_copies(monkeypatch, 1, factor)
    _assert_named(_run(tiny_backbone, "tiny:bert"), 1)


def test_minilm_quantised_cleanly_passes(hub_minilm):
    report = _run(hub_minilm, "minilm")
    assert report.passed, render(report)
    growth = [r["growth"] for r in report.details["quantisation"]["layers"] if r["growth"]]
    assert len(growth) == 6 and max(growth) < DEFAULT_GROWTH["int8"]


def test_minilm_with_one_damaged_scale_fails_naming_its_block(hub_minilm, monkeypatch):
    """x1.5 on one feed-forward scale (x50 is caught as surely: the tiny backbone's test)."""
    damage_quantised_copies(monkeypatch, 3, 1.5)
    _assert_named(_run(hub_minilm, "minilm"), 3)


def test_limits_per_mode_and_a_mixed_mode_takes_the_coarsest():
    rows = [
        LayerError(0, "embeddings", 0.01, 0.01),
        LayerError(1, 0, 0.015, 0.005),  # x1.5
        LayerError(2, 1, 0.045, 0.03),  # x3
    ]
    (over,) = over_limit(rows, "int8")
    assert over.layer == 1 and over.growth == pytest.approx(3)
    assert "layer 1 (hidden_states[2]) has x3 its input's" in over.text()
    assert over_limit(rows[:2], "int8") == []
    # each layer by its own mode's limit where the model names it (int4 after int8
    # would be fed a finer mode's error: not held to a limit, the mixed-mode tests below)
    (by_mode,) = over_limit(rows, "int8", {0: "int4", 1: "int4"})
    assert by_mode.layer == 1 and by_mode.limit.mode == "int4"
    assert by_mode.limit.growth == DEFAULT_GROWTH["int4"]
    mixed = growth_limit("int4+int8")
    assert mixed.growth == max(DEFAULT_GROWTH["int4"], DEFAULT_GROWTH["int8"])
    with pytest.raises(TfparityError, match="No per-layer growth limit"):
        growth_limit("int3")


@pytest.fixture(scope="module")
def llama_backbone():
    """A fresh copy of the tiny Llama backbone per call (one conversion per module)."""
    float_side = load_model("keras-hub:tiny:llama")

    def fresh():
        b = float_side.backbone
        twin = type(b).from_config(b.get_config())
        twin.set_weights(b.get_weights())
        return twin

    return fresh


LLAMA = {"pt": "tiny:llama", "pt_config": {"rms_norm_eps": 1e-6}, "reload": False}


@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_a_stored_int8_file_is_held_to_the_per_layer_limit(llama_backbone, tmp_path, factor):
    """A .keras file saved after quantize("int8"), clean, and with block 1's feed-forward
    scale x1.5: judged against PyTorch, each layer's growth by int8's limit."""
    from tfparity.adapters.tf_common.quantize import quantize
    from tfparity.testing import quantised_ffn_scale, scale_variable

    backbone = llama_backbone()
    quantize(backbone, "int8")
    scale_variable(backbone, quantised_ffn_scale(backbone, 1), factor)
    backbone.save(tmp_path / "int8.keras")
    (report,) = crosscheck(str(tmp_path / "int8.keras"), **LLAMA)
    growth = report.details["growth"]
    if factor == 1.0:
        assert report.passed and growth["verdict"] == "PASS", render(report)
        return
    assert not report.passed and growth["over"][0]["layer"] == 1
    assert report.first_divergence.layer == 1
    failing = [c for c in report.failures if "growth" in c.name]
    assert failing[0].name == "keras int8 vs PyTorch: growth (hidden_states[2])"


@pytest.fixture(scope="module")
def mixed_file(llama_backbone, tmp_path_factory):
    """A tiny Llama backbone saved with block 0 in int4 and the rest in int8, as
    ``quantize("int4", filters=...)`` then ``quantize("int8", ...)`` make one."""
    from tfparity.adapters.tf_common.quantize import quantize

    backbone = llama_backbone()
    quantize(backbone, "int4", ["transformer_layer_0"])
    quantize(backbone, "int8", ["token_embedding", "transformer_layer_1"])
    path = tmp_path_factory.mktemp("mixed") / "mixed.keras"
    backbone.save(path)
    return path


def test_a_mixed_mode_file_is_judged_by_its_modes_named_by_layer(mixed_file):
    (report,) = crosscheck(str(mixed_file), **LLAMA)
    assert report.passed, render(report)
    judge = report.details["judge"]
    assert "default for keras int4, the coarsest of keras int4+int8" in judge
    assert "max abs error 1," in judge  # int4's budget, not float32's 0.0001
    assert "int4: layer 0; int8: embeddings, layer 1" in "\n".join(report.notes)
    growth = report.details["growth"]
    assert growth["modes"] == {"embeddings": "int8", "0": "int4", "1": "int8"}
    assert growth["verdict"] == "PASS" and "in int4" in growth["limit"]
    # block 0, int4 fed int8's error, grows far more than a uniform quantisation does
    # (x13 here): its growth measures the change of mode, so it is not held to a limit
    assert growth["coarser_than_their_input"] == [0]


def test_a_mixed_mode_layer_is_judged_by_its_own_mode():
    rows = [
        LayerError(0, "embeddings", 0.005, 0.005),
        LayerError(1, 0, 0.07, 0.065),  # int4 after int8: x14, correct
        LayerError(2, 1, 0.3, 0.23),  # int8 after int4: x4.3, damaged
    ]
    modes = {"embeddings": "int8", 0: "int4", 1: "int8"}
    (over,) = over_limit(rows, "int4+int8", modes)
    assert over.layer == 1 and over.limit.mode == "int8"
    # without the modes, the coarsest mode's limit holds every layer
    assert [o.layer for o in over_limit(rows, "int4+int8")] == [0, 1]
