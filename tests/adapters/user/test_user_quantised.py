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
