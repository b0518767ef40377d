"""The TF adapter: embedding matrices, call arguments and limits for every tiny arch."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.architectures import tiny_types
from tfparity.errors import TfparityError
from tfparity.inputs import Batch


@pytest.mark.parametrize("arch", tiny_types())
def test_word_embeddings_are_the_matrix_the_ids_path_uses(load_tf_model, arch):
    model = load_tf_model(f"tiny:{arch}")
    matrix = model.word_embeddings()
    assert matrix.shape[0] == model.limits.vocab_size
    # Changing one row of that matrix must change the ids path's embedding output.
    ids = np.array([[5, 6, 7, 8, 9]], np.int32)
    batch = Batch(ids, np.ones_like(ids), np.zeros_like(ids))
    before = model.run(batch)["hidden_states[0]"]
    saved = matrix.numpy()
    try:
        bumped = saved.copy()
        bumped[6] += np.linspace(-1.0, 1.0, bumped.shape[1])
        matrix.assign(bumped)
        after = model.run(batch)["hidden_states[0]"]
    finally:
        matrix.assign(saved)
    assert np.abs(after[0, 1] - before[0, 1]).max() > 1e-3
    # A token two places away keeps its embedding output (MobileBERT's trigram input mixes
    # each token with its neighbours, so the next one may move).
    np.testing.assert_array_equal(after[0, 4], before[0, 4])


def test_trace_order_puts_hidden_states_first(load_tf_model):
    model = load_tf_model("tiny:bert")
    ids = np.array([[2, 5, 3]], np.int32)
    names = list(model.run(Batch(ids, np.ones_like(ids))))
    assert names[:3] == ["hidden_states[0]", "hidden_states[1]", "hidden_states[2]"]
    assert names[3:] == ["last_hidden_state", "pooler_output"]


def test_call_kwargs_follow_the_model_signature(load_tf_model):
    ids = np.array([[2, 5, 3]], np.int32)
    batch = Batch(ids, np.ones_like(ids), np.zeros_like(ids))
    assert "token_type_ids" in load_tf_model("tiny:bert").call_kwargs(batch)
    assert "token_type_ids" not in load_tf_model("tiny:distilbert").call_kwargs(batch)
    assert "token_type_ids" not in load_tf_model("tiny:t5").call_kwargs(batch)


def test_limits(load_tf_model):
    assert load_tf_model("tiny:bert").limits.max_positions == 64
    assert load_tf_model("tiny:roberta").limits.max_positions == 64  # 66 - padding_idx - 1
    assert load_tf_model("tiny:xlnet").limits.max_positions is None
    assert load_tf_model("tiny:bert").limits.type_vocab_size == 2


def test_run_rejects_out_of_range_ids_before_the_model(load_tf_model):
    model = load_tf_model("tiny:bert")
    ids = np.array([[2, model.limits.vocab_size, 3]], np.int32)
    with pytest.raises(TfparityError, match=r"input_ids out of range: \d+ at index \(0, 1\)"):
        model.run(Batch(ids, np.ones_like(ids)))
    types = np.array([[0, 2, 0]], np.int32)
    with pytest.raises(TfparityError, match="token_type_ids out of range"):
        model.run(Batch(np.array([[2, 5, 3]], np.int32), np.ones_like(ids), types))


def test_wrap_adopts_a_user_model(load_tf_model):
    inner = load_tf_model("tiny:bert").model
    wrapped = TFModel.wrap(inner)
    assert wrapped.model is inner and wrapped.name == "TFBertModel"


def test_roberta_position_ids_may_use_the_whole_position_table(load_tf_model):
    """RoBERTa's own position ids run up to seq_len + padding_idx: not out of range."""
    model = load_tf_model("tiny:roberta")
    ids = np.full((1, 63), 5, np.int32)
    positions = np.arange(2, 65, dtype=np.int32)[None]
    out = model.run(Batch(ids, np.ones_like(ids), None, positions))
    assert out["last_hidden_state"].shape == (1, 63, 32)
    with pytest.raises(TfparityError, match="position_ids out of range: 66"):
        model.run(Batch(ids[:, :2], np.ones_like(ids[:, :2]), None, np.array([[2, 66]])))


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_the_gathered_path_feeds_rows_as_the_ids_path_does(load_tf_model, mode):
    """``run_gathered`` (the sweep's embeds path) gathers inside the run: XGLM's ids
    path scales its rows, so the gathered ones must be scaled too (they were not, and a
    sweep of tiny:xglm failed every item). BERT has no such change: the other way."""
    from dataclasses import replace

    from tfparity.inputs import InputOptions, make_batches

    for spec in ("tiny:xglm", "tiny:bert"):
        model = load_tf_model(spec)
        if mode == "graph":
            model = model.executed(replace(model.execution, graph=True))
        (batch,) = make_batches(model, InputOptions(random=2, seq_len=7))
        ids, gathered = model.run(batch), model.run_gathered(batch)
        assert all(np.array_equal(ids[k], gathered[k]) for k in ids), spec
    scale = load_tf_model("tiny:xglm").ids_only_change
    assert scale is not None and load_tf_model("tiny:bert").ids_only_change is None
