"""The walk backwards, on comparisons made from plain arrays (no model): the first
hidden state from the top whose gradient fails names the layer; a forward divergence
names its own layer instead; the weights that differ most are listed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tfparity.checks.gradients.localise import GRAD, localise, weight_table
from tfparity.compare import compare_batches


@dataclass
class _Side:  # what localise reads of a TF side
    known_difference: object = None


def rows(failing: set[str]) -> list:
    names = ["loss", f"{GRAD}inputs_embeds"] + [f"{GRAD}hidden_states[{k}]" for k in range(3)]
    names += [f"{GRAD}encoder.layer.1.output.dense.weight", f"{GRAD}embeddings.LayerNorm.weight"]
    x = np.ones((2, 3))
    return [compare_batches([x * (2 if n in failing else 1)], [x], name=n) for n in names]


def test_the_first_failing_gradient_from_the_top_names_its_layer():
    found = rows({f"{GRAD}hidden_states[1]", f"{GRAD}hidden_states[0]"})
    d = localise(found, [], _Side(), None, "TF", "PyTorch")
    assert (d.hidden_state, d.layer) == (1, 1) and "backward pass" in d.hint
    assert d.cause == "layer 1's backward pass differs from its forward"  # the verdict line's


def test_a_forward_divergence_is_named_instead():
    found = rows({f"{GRAD}hidden_states[1]", f"{GRAD}encoder.layer.1.output.dense.weight"})
    d = localise(found, [2, 1], _Side(), None, "TF", "PyTorch")
    assert (d.hidden_state, d.layer) == (1, 0) and "forward pass already differs" in d.hint
    assert d.cause == "the forward pass already differs at hidden_states[1]"
    assert "encoder.layer.1.output.dense.weight" in d.hint


def test_the_last_hidden_state_the_embeddings_and_weights_alone():
    d = localise(rows({f"{GRAD}hidden_states[2]"}), [], _Side(), None, "TF", "PyTorch")
    assert d.layer == "head" and "head or final norm" in d.cause
    d = localise(rows({f"{GRAD}inputs_embeds"}), [], _Side(), None, "TF", "PyTorch")
    assert d.layer == "embeddings" and "embedding layer's backward pass" in d.cause
    only = rows({f"{GRAD}embeddings.LayerNorm.weight"})
    d = localise(only, [], _Side(), None, "TF", "PyTorch")
    assert d.layer == "weights" and "embeddings.LayerNorm.weight" in d.hint
    assert d.cause == ""  # which weight's backward pass is wrong is not known
    table = weight_table(only, {}, {})
    assert (table["compared"], table["passed"]) == (2, 1)
    assert table["differing_most"][0]["name"] == "embeddings.LayerNorm.weight"
