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

    entries = ("run", "run_gathered", "tapped_run", "gradients", "admit")
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


# ----------------------------------------------------------------------------- weight map

FFN_UP = "encoder.layer.1.intermediate.dense.weight"
LN_OUT = "encoder.layer.1.output.LayerNorm.weight"


def _hinted(side, pt_weights: dict) -> list[tuple[str, str]]:
    """The weight hints (weight, text) of ``side``'s map against ``pt_weights``."""
    from tfparity.checks.crosscheck import hints

    tf = side.weight_map().weights_for(pt_weights)
    return [(h.weight, h.text) for h in hints.weight_differences(tf, pt_weights, "")]


def test_the_weight_map_of_each_side_names_the_scaled_weight(sides):
    """An HF TF side and a keras-hub side each name the one weight scaled by 1.05 (a
    LayerNorm's gamma, a Dense kernel) by its PyTorch name; unscaled, none."""
    pytest.importorskip("keras_hub")
    from tfparity.adapters.keras_hub.side import load_keras_hub
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.architectures.keras_hub_layouts import block

    pt = load_pt("tiny:bert").weights()
    named = {n.removeprefix("bert."): n for n in pt}
    hf, hub = sides[0], load_keras_hub("keras-hub:tiny:bert")
    assert named[FFN_UP] in hub.weight_map().weights_for(pt)
    assert _hinted(hf, pt) == _hinted(hub, pt) == []
    layer_norm = hf.model.bert.encoder.layer[1].bert_output.LayerNorm.gamma
    dense = block(hub.backbone, 1)._feedforward_intermediate_dense.kernel
    for side, variable, name in ((hf, layer_norm, LN_OUT), (hub, dense, FFN_UP)):
        held = np.array(variable.numpy())
        variable.assign(held * 1.05)
        try:
            ((weight, text),) = _hinted(side, pt)
        finally:
            variable.assign(held)  # the HF model is the session's
        assert weight == named[name] and "scaled by 1.05" in text, (weight, text)


def test_no_side_keeps_the_four_weight_members_the_map_replaced():
    """Weight hints are asked of ``weight_map()`` alone; a side with its own
    ``weights_for`` would be a second way in that callers might probe for."""
    from tfparity.adapters.exported.litert import LiteRTModel
    from tfparity.adapters.exported.saved_model import SavedModelSide
    from tfparity.adapters.interfaces.sides import TFSide, TFSideBase
    from tfparity.adapters.interfaces.weight_map import WeightMap
    from tfparity.adapters.keras_hub.side import KerasHubModel

    old = ("feed_forward", "weights_for", "unported", "weight_note")
    for kind in (
        TFSide,
        TFSideBase,
        TFModel,
        UserModel,
        KerasHubModel,
        SavedModelSide,
        LiteRTModel,
    ):
        assert [m for m in old if hasattr(kind, m)] == [], kind
    empty = TFSideBase().weight_map()
    assert isinstance(empty, WeightMap) and empty.weights_for({"w": np.ones(2)}) == {}
