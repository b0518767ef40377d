"""diagnose names each wrong tensor, recovers ids, and exits 0 only for the right one.

Each wrong tensor is built from the model itself (its tables, or its own run)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfparity.adapters.hf_tf.embedding_parts import default_position_ids, embedding_parts
from tfparity.api import make_batches
from tfparity.checks.diagnose import DiagnoseInputs, check_diagnose
from tfparity.cli import main
from tfparity.errors import TfparityError
from tfparity.inputs import InputOptions

TEXTS = InputOptions(texts=("Hello world.", "The quick brown fox jumps over the lazy dog."))


@pytest.fixture(scope="module")
def bert(load_tf_model):
    model = load_tf_model("tiny:bert")
    return model, make_batches(model, TEXTS)[0]


def _stages(model, batch):
    parts = embedding_parts(model)
    word = parts.word[batch.input_ids]
    pos = parts.position[default_position_ids(model, batch.input_ids)]
    types = parts.token_type[batch.token_type_ids]
    return {
        "word_embeddings": word,
        "word_plus_position": word + pos,
        "word_plus_position_plus_type": word + pos + types,
        "post_layernorm": model.run(batch)["hidden_states[0]"],
        "scaled_word_embeddings": word * np.sqrt(parts.width),
    }


@pytest.mark.parametrize(
    "verdict",
    [
        "word_plus_position",
        "word_plus_position_plus_type",
        "post_layernorm",
        "scaled_word_embeddings",
    ],
)
def test_each_wrong_stage_is_named_and_its_ids_recovered(bert, verdict):
    model, batch = bert
    report = check_diagnose(model, DiagnoseInputs(batch, _stages(model, batch)[verdict]))
    d = report.details
    assert d["verdict"] == verdict
    assert d["candidates"][verdict] < 1e-5
    same = {verdict, "hidden_states[0]"} if verdict == "post_layernorm" else {verdict}
    assert d["candidates"]["hidden_states[0]"] < 1e-5 or verdict != "post_layernorm"
    assert min(v for k, v in d["candidates"].items() if k not in same) > 0.1
    assert d["recovered_ids_match"] == 1.0
    assert report.passed is False
    assert d["outputs_match"] is False
    assert "inputs_embeds = tf.gather(model.get_input_embeddings().weight" in d["fix"]["code"]


def test_correct_word_embeddings_pass(bert):
    model, batch = bert
    report = check_diagnose(model, DiagnoseInputs(batch, model.gather(batch.input_ids).numpy()))
    assert report.details["verdict"] == "word_embeddings"
    assert report.details["recovered_ids_match"] == 1.0
    assert report.passed, report.failures


def test_shifted_vocabulary_is_word_embeddings_with_an_offset(bert):
    model, batch = bert
    word = embedding_parts(model).word
    shifted = word[batch.input_ids + 1]  # an off-by-one id mapping
    report = check_diagnose(model, DiagnoseInputs(batch, shifted))
    d = report.details
    assert d["verdict"] == "word_embeddings"
    assert d["recovered_ids_match"] == 0.0
    assert d["id_offset"] == 1
    assert d["id_mismatches"][0]["recovered"] == d["id_mismatches"][0]["expected"] + 1
    assert not report.passed
    assert "off by +1" in d["fix"]["advice"]


def test_noise_is_unknown_and_float16_copy_fails_on_outputs(bert):
    model, batch = bert
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(batch.input_ids.shape + (32,)).astype(np.float32)
    assert check_diagnose(model, DiagnoseInputs(batch, noise)).details["verdict"] == "unknown"
    half = model.gather(batch.input_ids).numpy().astype(np.float16)
    report = check_diagnose(model, DiagnoseInputs(batch, half))
    assert report.details["verdict"] == "word_embeddings"
    assert report.details["recovered_ids_match"] == 1.0
    assert report.passed is False  # fp16 rounding changes the outputs at fp32 tolerance
    assert "float16" in report.details["fix"]["advice"]


def test_padding_is_ignored(bert):
    model, batch = bert
    assert (batch.attention_mask == 0).any()
    embeds = model.gather(batch.input_ids).numpy()
    embeds[batch.attention_mask == 0] = 123.0
    report = check_diagnose(model, DiagnoseInputs(batch, embeds))
    assert report.details["verdict"] == "word_embeddings"
    assert report.details["tokens"] == int(batch.attention_mask.sum())


@pytest.mark.slow
def test_minilm_hidden_states_0_is_post_layernorm_with_all_ids(minilm):
    batch = make_batches(minilm)[0]
    hs0 = minilm.run(batch)["hidden_states[0]"]
    report = check_diagnose(minilm, DiagnoseInputs(batch, hs0))
    d = report.details
    assert d["verdict"] == "post_layernorm"
    assert d["recovered_ids_match"] == 1.0
    assert "hidden_states[0]" in d["fix"]["advice"]
    assert not report.passed
    correct = check_diagnose(minilm, DiagnoseInputs(batch, minilm.gather(batch.input_ids).numpy()))
    assert correct.passed and correct.details["recovered_ids_match"] == 1.0


def _save(tmp_path, **arrays):
    paths = {}
    for name, array in arrays.items():
        paths[name] = tmp_path / f"{name}.npy"
        np.save(paths[name], array)
    return paths


def test_cli_exit_codes_and_top_level_json(bert, tmp_path, capsys):
    model, batch = bert
    p = _save(
        tmp_path,
        ids=batch.input_ids,
        good=model.gather(batch.input_ids).numpy(),
        bad=model.run(batch)["hidden_states[0]"],
        mask=batch.attention_mask,
        types=batch.token_type_ids,
    )
    common = ["diagnose", "tiny:bert", "--ids", str(p["ids"]), "--attention-mask", str(p["mask"])]
    common += ["--token-type-ids", str(p["types"])]
    assert main(common + ["--embeds", str(p["good"])]) == 0
    out = tmp_path / "r.json"
    assert main(common + ["--embeds", str(p["bad"]), "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert "verdict: post_layernorm" in text and "fix:" in text
    data = json.loads(out.read_text())
    assert data["verdict"] == "post_layernorm" == data["details"]["verdict"]
    assert data["recovered_ids_match"] == 1.0
    assert set(data["candidates"]) >= {"word_embeddings", "post_layernorm"}
    assert "hidden_states[0]" in data["fix"]["advice"]
    assert data["check"] == "diagnose" and data["passed"] is False and data["comparisons"]


def test_bad_inputs_exit_2(bert, tmp_path, capsys):
    model, batch = bert
    embeds = model.gather(batch.input_ids).numpy()
    too_big = batch.input_ids.copy()
    too_big[0, 0] = 10**6
    p = _save(
        tmp_path,
        ids=batch.input_ids,
        embeds=embeds,
        short=embeds[:, :-1],
        narrow=embeds[..., :16],
        big=too_big,
    )
    (tmp_path / "corrupt.npy").write_bytes(b"not numpy")
    cases = {
        "no such file": ["--ids", str(tmp_path / "nope.npy"), "--embeds", str(p["embeds"])],
        "corrupt": ["--ids", str(p["ids"]), "--embeds", str(tmp_path / "corrupt.npy")],
        "do not match": ["--ids", str(p["ids"]), "--embeds", str(p["short"])],
        "16 wide": ["--ids", str(p["ids"]), "--embeds", str(p["narrow"])],
        "out of range": ["--ids", str(p["big"]), "--embeds", str(p["embeds"])],
    }
    for words, args in cases.items():
        assert main(["diagnose", "tiny:bert", *args]) == 2, words
        assert words in capsys.readouterr().err


def test_width_mismatch_raises_in_python(bert):
    model, batch = bert
    with pytest.raises(TfparityError, match="not for this model"):
        check_diagnose(model, DiagnoseInputs(batch, np.zeros(batch.input_ids.shape + (8,))))


def test_a_keras_hub_side_exits_2_by_name(bert, tmp_path, capsys):
    """The embeddings tiny:bert diagnoses as its word embeddings (exit 0 above) are
    refused on keras-hub's port of the same checkpoint: diagnose rebuilds the embedding
    stages from the model's tables, which a keras-hub backbone does not expose."""
    model, batch = bert
    p = _save(tmp_path, ids=batch.input_ids, good=model.gather(batch.input_ids).numpy())
    args = ["--ids", str(p["ids"]), "--embeds", str(p["good"])]
    assert main(["diagnose", "tiny:bert", *args]) == 0
    capsys.readouterr()
    assert main(["diagnose", "keras-hub:tiny:bert", *args]) == 2
    err = capsys.readouterr().err
    assert "Diagnose needs the model's embedding tables" in err
    assert "keras-hub:tiny:bert (a keras-hub backbone (BertBackbone)) does not expose" in err


def test_the_text_report_names_row_order_shift_and_rounding(bert):
    """The findings reach the rendered report as lines of their own (tiny:bert here;
    tests/checks/diagnosis/test_diagnosis.py asserts them on minilm both ways)."""
    from tfparity.report.sections import render_diagnose

    model, batch = bert
    word = embedding_parts(model).word
    lengths = batch.attention_mask.sum(axis=1)
    left = np.stack(
        [np.roll(row, batch.shape[1] - n) for row, n in zip(batch.input_ids, lengths, strict=True)]
    )
    cases = {
        "row order: embeddings row b holds ids row rows[b], rows = [1, 0]": word[
            batch.input_ids[::-1]
        ],
        f"row shift: {[int(batch.shape[1] - n) for n in lengths]} positions": word[left],
        "rounding: through float16": word[batch.input_ids].astype(np.float16),
    }
    for line, embeds in cases.items():
        text = render_diagnose(check_diagnose(model, DiagnoseInputs(batch, embeds)))
        assert line in text and "FAIL diagnose: word_embeddings" in text
    clean = render_diagnose(check_diagnose(model, DiagnoseInputs(batch, word[batch.input_ids])))
    assert not any(w in clean for w in ("row order:", "row shift:", "rounding:"))
