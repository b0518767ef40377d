"""The side contract's run entry: ``TFSideBase.run`` checks the batch against the side's
limits in one place, for every kind of side, before the side's own ``_run``."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.adapters.user.side import UserModel, user_model
from tfparity.errors import TfparityError
from tfparity.inputs import Batch


def _never(*args, **kwargs):
    raise AssertionError("_run was reached with a batch over the side's limits")


def _batch(ids: list[list[int]]) -> Batch:
    input_ids = np.asarray(ids, dtype=np.int32)
    return Batch(input_ids=input_ids, attention_mask=np.ones_like(input_ids))


@pytest.fixture(scope="module")
def sides(load_tf_model):
    """Two kinds of side over the same tiny BERT config: the Hugging Face TF model and a
    callable of one's own bound to the same reference."""
    hf = load_tf_model("tiny:bert")
    mine = user_model(lambda inputs: hf.model(**inputs).last_hidden_state, name="mine")
    return hf, mine.bound("tiny:bert")


def test_a_batch_over_the_vocabulary_is_refused_alike_before_any_side_runs(sides, monkeypatch):
    hf, mine = sides
    assert hf.limits.vocab_size == mine.limits.vocab_size
    over = _batch([[1, hf.limits.vocab_size, 2]])
    messages = []
    for side in (hf, mine):
        monkeypatch.setattr(type(side), "_run", _never)
        with pytest.raises(TfparityError, match="input_ids") as refused:
            side.run(over)
        messages.append(str(refused.value))
    assert messages[0] == messages[1] and str(hf.limits.vocab_size) in messages[0]


def test_a_batch_within_the_limits_reaches_the_sides_run(sides):
    hf, mine = sides
    fine = _batch([[1, hf.limits.vocab_size - 1, 2]])
    assert np.allclose(
        hf.run(fine)["last_hidden_state"], mine.run(fine)["last_hidden_state"], atol=1e-5
    )


def test_an_unbound_model_of_ones_own_is_refused_by_name_before_its_limits():
    unbound = user_model(lambda inputs: inputs["input_ids"], name="mine")
    assert isinstance(unbound, UserModel)
    with pytest.raises(TfparityError, match="takes its Hugging Face config"):
        unbound.run(_batch([[1, 2]]))


def test_every_kind_of_side_keeps_to_the_hooks_not_the_entries():
    """A side that overrode ``run`` itself would skip the one limits check."""
    from tfparity.adapters.exported.litert import LiteRTModel
    from tfparity.adapters.exported.saved_model import SavedModelSide
    from tfparity.adapters.interfaces.sides import TFSideBase
    from tfparity.adapters.keras_hub.side import KerasHubModel

    entries = ("run", "run_gathered", "tapped_run", "gradients")
    for kind in (TFModel, UserModel, KerasHubModel, SavedModelSide, LiteRTModel):
        assert issubclass(kind, TFSideBase)
        assert [e for e in entries if getattr(kind, e) is not getattr(TFSideBase, e)] == []


def test_a_refusal_says_what_the_user_gave_not_tfparitys_class(sides):
    """gradients and generate refuse a side they cannot drive by its name and what it
    is in words (a callable of your own, a SavedModel, ...), never by tfparity's own
    class (UserModel, SavedModelSide); every kind of side says what it is."""
    from tfparity.adapters.exported.litert import LiteRTModel
    from tfparity.adapters.exported.saved_model import SavedModelSide
    from tfparity.adapters.interfaces.sides import TFSideBase

    _, mine = sides
    with pytest.raises(TfparityError) as refused:
        mine.gradients(_batch([[1, 2]]), objective=None)
    assert str(refused.value).startswith(
        "mine (a callable of your own) cannot be differentiated here"
    )
    with pytest.raises(TfparityError, match="^mine is a callable of your own, which tfparity"):
        mine.generator()
    for kind in (TFModel, UserModel, SavedModelSide, LiteRTModel):
        assert kind.side_kind is not TFSideBase.side_kind, kind
