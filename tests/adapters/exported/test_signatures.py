"""Mapping a serving signature's tensors onto tfparity's names (no framework needed),
and choosing one of a SavedModel's signatures (``--signature``, on real exports)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tfparity import cli
from tfparity.adapters.exported.signatures import (
    TensorInfo,
    map_inputs,
    map_outputs,
)
from tfparity.errors import TfparityError
from tfparity.inputs import Batch

CONFIG = SimpleNamespace(hidden_size=32)
IDS = TensorInfo("int32", (None, None))
SEQ = TensorInfo("float32", (None, None, 32))
POOLED = TensorInfo("float32", (None, 32))


def _batch() -> Batch:
    ids = np.array([[0, 5, 2, 1]], np.int32)
    return Batch(ids, np.array([[1, 1, 1, 0]], np.int32), np.zeros_like(ids))


def test_hugging_face_and_keras_hub_input_names_feed_the_same_fields():
    hf = map_inputs("s", {"input_ids": IDS, "attention_mask": IDS, "token_type_ids": IDS})
    kh = map_inputs("s", {"token_ids": IDS, "padding_mask": IDS, "segment_ids": IDS})
    batch = _batch()
    a, b = hf.feed(batch), kh.feed(batch)
    np.testing.assert_array_equal(a["input_ids"], b["token_ids"])
    np.testing.assert_array_equal(a["attention_mask"], b["padding_mask"])
    np.testing.assert_array_equal(a["token_type_ids"], b["segment_ids"])
    assert hf.takes_ids and not hf.takes_embeds


def test_inputs_are_cast_to_the_dtype_the_signature_declares():
    mapped = map_inputs("s", {"input_ids": TensorInfo("int64", (None, None))})
    assert mapped.feed(_batch())["input_ids"].dtype == np.int64


def test_an_unknown_input_is_refused_listing_what_the_signature_has():
    with pytest.raises(TfparityError) as err:
        map_inputs("serving_default", {"input_ids": IDS, "mystery": IDS})
    assert "mystery" in str(err.value) and "input_ids int32 [?, ?]" in str(err.value)


def test_a_signature_of_ids_and_embeds_together_or_neither_is_refused():
    with pytest.raises(TfparityError, match="one of the two"):
        map_inputs("s", {"input_ids": IDS, "inputs_embeds": SEQ})
    with pytest.raises(TfparityError, match="one of the two"):
        map_inputs("s", {"attention_mask": IDS})


def test_outputs_map_by_name_hidden_states_by_index_and_keras_hub_names():
    out = map_outputs(
        "s",
        {"sequence_output": SEQ, "pooled_output": POOLED, "hidden_states_0": SEQ, "extra": SEQ},
        CONFIG,
    )
    assert out.names == {
        "sequence_output": "last_hidden_state",
        "pooled_output": "pooler_output",
        "hidden_states_0": "hidden_states[0]",
    }
    assert out.unmapped == ("extra",)  # a second [b, s, 32] tensor is not guessed at
    assert out.has_hidden_states


def test_an_unnamed_output_maps_by_shape_only_when_one_fits():
    one = map_outputs("s", {"output_0": SEQ}, CONFIG)
    assert one.names == {"output_0": "last_hidden_state"} and one.by_shape == ("output_0",)
    with pytest.raises(TfparityError) as err:
        map_outputs("s", {"output_0": TensorInfo("float32", (None, None, 7))}, CONFIG)
    assert "output_0 float32 [?, ?, 7]" in str(err.value)  # lists what it has


def test_a_stacked_hidden_states_output_splits_per_layer():
    out = map_outputs("s", {"hidden_states": TensorInfo("float32", (3, None, None, 32))}, CONFIG)
    arrays = out.arrays({"hidden_states": np.arange(3 * 2).reshape(3, 1, 1, 2)})
    assert list(arrays) == ["hidden_states[0]", "hidden_states[1]", "hidden_states[2]"]
    assert out.targets(["hidden_states[0]", "hidden_states[1]", "x"]) == {
        "hidden_states[0]",
        "hidden_states[1]",
    }


# ------------------------------------------------------------- --signature (a SavedModel)


def _crosscheck_json(export, out, *extra: str) -> dict:
    """The one report of a passing CLI cross-check of ``export``, read from ``out``."""
    import json

    args = ["crosscheck", str(export), "--pt", "tiny:bert", *extra, "--json", str(out)]
    assert cli.main([*args, "--random", "3", "--seq-len", "10"]) == 0
    report = json.loads(out.read_text())  # one report: at the top level
    assert report["check"] == "crosscheck"
    return report


def test_signature_picks_each_of_two_and_defaults_to_serving_default(tiny_bert_export, tmp_path):
    export = tiny_bert_export("two-signatures")
    chosen = _crosscheck_json(export, tmp_path / "a.json", "--signature", "ids_only")
    assert "takes no attention mask" in chosen["details"]["unpadded"]
    assert any("signature 'ids_only' runs the input_ids path" in n for n in chosen["notes"])
    serving = _crosscheck_json(export, tmp_path / "b.json", "--signature", "serving_default")
    assert "unpadded" not in serving["details"]
    assert any("signature 'serving_default' runs" in n for n in serving["notes"])
    default = _crosscheck_json(export, tmp_path / "c.json")
    assert default["notes"] == serving["notes"]


def test_an_unknown_signature_exits_2_listing_those_it_has(tiny_bert_export, capsys, tmp_path):
    export = str(tiny_bert_export("two-signatures"))
    assert cli.main(["crosscheck", export, "--pt", "tiny:bert", "--signature", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no signature 'nope'; its signatures: ids_only, serving_default." in err
    sweep = ["sweep", export, "--out", str(tmp_path / "s"), "--progress", "none", "--pt"]
    for command in (["check", export, "--source"], sweep):
        assert cli.main([*command, "tiny:bert", "--signature", "nope"]) == 2
        assert "no signature 'nope'" in capsys.readouterr().err


def test_signature_for_a_model_that_is_no_export_exits_2(capsys):
    assert cli.main(["crosscheck", "tiny:bert", "--signature", "serving_default"]) == 2
    assert "tiny:bert is not one" in capsys.readouterr().err
    from tfparity.api import crosscheck

    with pytest.raises(TfparityError, match="names a signature of an export"):
        crosscheck("tiny:bert", signature="serving_default")


def test_the_pytest_helpers_take_a_signature_as_the_cli_does(tiny_bert_export):
    """assert_crosscheck(signature=) runs the signature named (ids_only takes no mask:
    the report says its batches ran unpadded; serving_default's did not), and an
    unknown one is refused listing those the SavedModel has; check_embeds and
    assert_embeds_parity pass it on too."""
    from tfparity import assert_crosscheck, assert_embeds_parity
    from tfparity.api import check_embeds
    from tfparity.inputs import InputOptions

    export = str(tiny_bert_export("two-signatures"))
    inputs = InputOptions(random=3, seq_len=10, batch_size=3)
    kwargs = dict(inputs=inputs, reload=False)
    (ids_only,) = assert_crosscheck(export, "tiny:bert", signature="ids_only", **kwargs)
    assert "takes no attention mask" in ids_only.details["unpadded"]
    (serving,) = assert_crosscheck(export, "tiny:bert", signature="serving_default", **kwargs)
    assert "unpadded" not in serving.details
    listed = "no signature 'nope'; its signatures: ids_only, serving_default."
    with pytest.raises(TfparityError, match=listed):
        assert_crosscheck(export, "tiny:bert", signature="nope", **kwargs)
    with pytest.raises(TfparityError, match=listed):
        assert_embeds_parity(export, source="tiny:bert", signature="nope", inputs=inputs)
    with pytest.raises(TfparityError, match=listed):
        check_embeds(export, source="tiny:bert", signature="nope", inputs=inputs)
