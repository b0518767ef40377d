"""The Keras gather layer and the ids -> embeds wrapper."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.keras import EmbedsModel, IdsOutOfRangeError, WordEmbeddingGather


def test_gather_returns_the_rows_of_the_model_matrix(load_tf_model):
    model = load_tf_model("tiny:bert")
    layer = WordEmbeddingGather.from_model(model.model)
    ids = np.array([[0, 5, 7], [1, 1, 2]])
    out = layer(ids).numpy()
    np.testing.assert_array_equal(out, model.word_embeddings().numpy()[ids])
    assert out.shape == (2, 3, model.config.hidden_size)


@pytest.mark.parametrize("bad", [-1, 10**6])
def test_out_of_range_ids_raise_eagerly(load_tf_model, bad):
    model = load_tf_model("tiny:bert")
    layer = WordEmbeddingGather.from_model(model.model)
    with pytest.raises(IdsOutOfRangeError, match=r"out of range: .* at index \(0, 1\)"):
        layer(np.array([[3, bad]]))


def test_out_of_range_ids_raise_inside_tf_function(load_tf_model):
    import tensorflow as tf

    model = load_tf_model("tiny:bert")
    layer = WordEmbeddingGather.from_model(model.model)
    fn = tf.function(lambda ids: layer(ids))
    fn(tf.constant([[1, 2]]))  # fine
    with pytest.raises(tf.errors.InvalidArgumentError, match="vocabulary size"):
        fn(tf.constant([[1, layer.vocab_size]]))


def test_last_valid_id_is_accepted(load_tf_model):
    model = load_tf_model("tiny:bert")
    layer = WordEmbeddingGather.from_model(model.model)
    out = layer(np.array([[layer.vocab_size - 1]])).numpy()
    np.testing.assert_array_equal(out[0, 0], model.word_embeddings().numpy()[-1])


def test_embeds_model_matches_the_ids_path(load_tf_model):
    model = load_tf_model("tiny:bert")
    wrapper = EmbedsModel(model.model)
    ids = np.array([[0, 10, 11, 2, 1], [0, 12, 2, 1, 1]], np.int32)
    mask = (ids != 1).astype(np.int32)
    got = wrapper({"input_ids": ids, "attention_mask": mask}).last_hidden_state.numpy()
    want = model.model(ids, attention_mask=mask).last_hidden_state.numpy()
    np.testing.assert_array_equal(got[mask == 1], want[mask == 1])


def test_embeds_model_rejects_out_of_range(load_tf_model):
    wrapper = EmbedsModel(load_tf_model("tiny:bert").model)
    with pytest.raises(IdsOutOfRangeError):
        wrapper(np.array([[0, 99999]]))
