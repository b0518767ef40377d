"""validation.py: the NaN scan of a model's weights, which reads large TF variables in
blocks of rows (a variable a gather has read would be copied whole)."""

from __future__ import annotations

import numpy as np
import pytest

import tfparity.validation as validation
from tfparity.inputs import InputOptions


@pytest.fixture()
def tiny_bert():
    """A fresh tiny:bert, run once so that its word embeddings are in copy-on-read mode."""
    from tfparity import api
    from tfparity.adapters.hf_tf.tf_model import TFModel

    model = TFModel.load("tiny:bert")
    model.run(api.make_batches(model, InputOptions(random=1, seq_len=4))[0])
    return model


def test_a_large_variable_is_read_in_blocks_of_rows_that_cover_it_exactly(tiny_bert):
    table = tiny_bert.word_embeddings()
    rows, width = table.shape
    block = 4 * width  # four rows a block; the last block is shorter
    assert rows % 4 != 0
    parts = list(validation._weight_blocks(table, block=block))
    assert len(parts) == -(-rows // 4) and all(p.shape[1:] == (width,) for p in parts)
    np.testing.assert_array_equal(np.concatenate(parts), table.numpy())


def test_small_variables_and_torch_tensors_are_read_whole(tiny_bert):
    torch = pytest.importorskip("torch")
    bias = tiny_bert.model.weights[-1]
    (whole,) = validation._weight_blocks(bias)
    np.testing.assert_array_equal(whole, bias.numpy())
    t = torch.arange(6.0).reshape(2, 3)
    (whole,) = validation._weight_blocks(t, block=1)
    np.testing.assert_array_equal(whole, t.numpy())


@pytest.mark.parametrize("row", [0, 4, -1])
def test_nan_in_any_block_of_the_word_embeddings_is_found(tiny_bert, monkeypatch, row):
    table = tiny_bert.word_embeddings()
    monkeypatch.setattr(validation, "_SCAN_BLOCK", 3 * table.shape[1])
    assert (
        validation.nonfinite_weights(tiny_bert.named_weights(), "TF") == []
    )  # clean: nothing found
    values = table.numpy()
    values[row, 1] = np.nan
    table.assign(values)
    (found,) = validation.nonfinite_weights(tiny_bert.named_weights(), "TF")
    assert "word_embeddings" in found.name and not found.passed
    assert f"(first at index ({row % table.shape[0]}, 1))" in found.problem
