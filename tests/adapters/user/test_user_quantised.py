"""A Keras 3 model of your own quantised by Keras (``model.quantize("int8")``; the same
once saved to ``.keras`` and loaded with its layers' module imported) is judged as a
quantised keras-hub model is: by its mode's budgets, not the float64 referee; a damaged
quantisation scale fails them. The hand-written BERT of docs/your-own-model.md."""

from __future__ import annotations

import pytest

keras = pytest.importorskip("keras")

from tfparity import InputOptions, load_pt  # noqa: E402
from tfparity.api import crosscheck  # noqa: E402
from tfparity.architectures.faults import scale  # noqa: E402
from tfparity.examples.keras_bert import (  # noqa: E402
    build_bert,
    layer_map,
    port_weights,
    weight_map,
)

INPUTS = InputOptions(random=4, seq_len=8, seed=2)


@pytest.fixture(scope="module")
def quantised():
    """tiny:bert's weights in the Keras 3 BERT, quantised to int8, and its maps."""
    reference = load_pt("tiny:bert")
    model = build_bert(reference.config)
    port_weights(model, weight_map(reference.config), reference.weights())
    model.quantize("int8")
    return model, {"layers": layer_map(reference.config)}


def _check(model, maps):
    (report,) = crosscheck(tf=model, pt="tiny:bert", inputs=INPUTS, **maps)
    return report


def test_a_quantised_model_of_your_own_passes_its_int8_budgets(quantised):
    model, maps = quantised
    report = _check(model, maps)
    assert report.passed, [(c.name, c.max_abs_diff) for c in report.failures]
    assert report.details["quantisation"] == "keras int8"
    assert "judged by budgets" in report.details["judge"]
    assert report.worst().max_abs_diff > 1e-4  # int8 really ran: far beyond float32 noise


def test_a_damaged_scale_in_a_quantised_model_of_your_own_fails_its_budgets(quantised):
    """The word embeddings' int8 scale x5 (Keras divides by it: the words weigh a fifth
    beside the positions) fails at the embeddings' output."""
    model, maps = quantised
    embeddings_scale = model.get_layer("embeddings").words.embeddings_scale
    scale(embeddings_scale, 5.0)
    try:
        report = _check(model, maps)
    finally:
        scale(embeddings_scale, 1 / 5.0)
    assert not report.passed
    assert report.first_divergence.hidden_state == 0


# ----------------------------------------------------------------------------- exact check


@pytest.fixture(scope="module")
def float_source():
    """The same float model, unquantised: the source the quantised one came from."""
    reference = load_pt("tiny:bert")
    model = build_bert(reference.config)
    port_weights(model, weight_map(reference.config), reference.weights())
    return model


def _against_source(model, source, maps):
    reports = crosscheck(tf=model, pt="tiny:bert", source=source, inputs=INPUTS, **maps)
    return {r.check: r for r in reports}


def test_a_quantised_model_of_your_own_reproduces_its_fresh_quantisation(quantised, float_source):
    """``source=`` the float model: Keras quantises a clone of it afresh in the stored
    mode, and every quantised variable matches; the three reports of a source all pass
    (the quantised model against its float source by the int8 budgets)."""
    model, maps = quantised
    by = _against_source(model, float_source, maps)
    assert set(by) == {"export-vs-source", "crosscheck", "crosscheck-source"}
    assert all(r.passed for r in by.values()), {k: r.failures for k, r in by.items()}
    found = by["crosscheck"].details["requantisation"]
    assert found["skipped"] is None and found["reproduces"] and found["mode"] == "int8"
    assert found["compared"] == found["identical"] > 10  # 4 dense kernels a block, scales


def test_one_kernel_scale_x1_5_fails_the_exact_check_naming_it(quantised, float_source):
    model, maps = quantised
    kernel_scale = model.get_layer("block_1").ffn_up.kernel_scale
    scale(kernel_scale, 1.5)
    try:
        by = _against_source(model, float_source, maps)
    finally:
        scale(kernel_scale, 1 / 1.5)
    report = by["crosscheck"]
    assert not report.passed
    (d,) = report.details["requantisation"]["differences"]
    assert (d["path"], d["kind"], d["block"]) == ("block_1/ffn_up/kernel_scale", "scaled", 1)
    assert "scaled by 1.5" in d["detail"]
    assert d["effect"]["with_fresh"] < d["effect"]["error"]
    hint = report.first_divergence.hint
    assert "block 1's block_1/ffn_up/kernel_scale" in hint and "scaled by 1.5" in hint


def test_without_a_source_the_exact_check_says_what_to_give(quantised):
    from tfparity.adapters.requantise import fresh_twin
    from tfparity.api import load_model

    model, maps = quantised
    twin = fresh_twin(load_model(model, pt="tiny:bert", **maps), None, "tiny:bert")
    assert twin.skipped.startswith("no float source: give --source FLOAT.keras")
