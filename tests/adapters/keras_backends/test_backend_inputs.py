"""The inputs of a keras-hub model saved to ``.keras``: its tokenised inputs, by name,
from a batch as a keras-hub spec makes it (no framework: numpy only)."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.keras_backends.inputs import keras_hub_model, tokenised
from tfparity.errors import TfparityError
from tfparity.inputs import random_batches


@pytest.fixture(scope="module")
def batch():
    return random_batches(3, 8, 50, batch_size=3, seed=0)[0]


def test_a_keras_hub_model_is_told_by_its_registered_class():
    assert keras_hub_model({"registered_name": "keras_hub>LlamaBackbone"})
    assert keras_hub_model({"registered_name": "keras_hub>QwenCausalLM"})
    assert not keras_hub_model({"registered_name": None, "class_name": "Functional"})
    # a user's subclass of a keras-hub backbone: no Input declared, a backbone's arguments
    subclass = {"registered_name": "mine>Skewed", "config": {"vocabulary_size": 9}}
    assert keras_hub_model(subclass)
    graph = {"layers": [{"class_name": "InputLayer", "config": {"batch_shape": [None, 4]}}]}
    assert not keras_hub_model(
        {"registered_name": "mine>M", "config": {**graph, "vocabulary_size": 9}}
    )


def test_tokenised_inputs_follow_the_model_s_input_order(batch):
    ids, mask = tokenised(batch, ["token_ids", "padding_mask"])
    assert ids.dtype == np.int32 and mask.tolist() == batch.attention_mask.tolist()
    assert mask.min() == 0 and mask.max() == 1  # rows of mixed lengths, padded
    mask2, segments, ids2 = tokenised(batch, ["padding_mask", "segment_ids", "token_ids"])
    assert (ids2 == ids).all() and (mask2 == mask).all() and not segments.any()


def test_an_input_tfparity_cannot_make_is_named(batch):
    with pytest.raises(TfparityError, match="takes images, which tfparity cannot make"):
        tokenised(batch, ["token_ids", "images"])
