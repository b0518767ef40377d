"""The one diagnosis names what an embeddings tensor is whenever it comes from this
model and these ids, on MiniLM's real weights, and does not misname a tensor from
elsewhere (random values, or a copy whose values another checkpoint would give).

One run of the ids (all hidden states) per module feeds every diagnosis, as it does in
``tfparity diagnose`` and in the embeds check.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tfparity import check_embeds, render
from tfparity.api import make_batches
from tfparity.assertions import assert_embeds_parity
from tfparity.checks.diagnosis import MATCH_DISTANCE, diagnose_embeddings
from tfparity.inputs import Batch, InputOptions

TEXTS = ("Hello world.", "The quick brown fox jumps over the lazy dog.", "Ids and tokens.")
PAIRS = (("How old are you?", "I am six."), ("Where is it?", "Near the river, past the bridge."))


@pytest.fixture(scope="module")
def real(minilm):
    batch = make_batches(minilm, InputOptions(texts=TEXTS))[0]
    assert (batch.attention_mask == 0).any()  # right-padded rows: the shift case needs them
    return minilm, batch, minilm.run(batch), minilm.word_matrix()


def _diagnose(model, batch, embeds, reference, outputs_match=False):
    return diagnose_embeddings(model, batch, embeds, reference, outputs_match)


def _other(array, scale=0.05, seed=0):
    """The same tensor as another checkpoint of this vocabulary would give it: every
    value moved by a few percent (a fine-tuned copy's weights)."""
    rng = np.random.default_rng(seed)
    return (array * (1 + scale * rng.standard_normal(array.shape))).astype(np.float32)


@pytest.mark.parametrize("name", ["hidden_states[1]", "hidden_states[4]", "last_hidden_state"])
def test_each_hidden_state_is_named_by_index(real, name):
    model, batch, reference, _ = real
    found = _diagnose(model, batch, reference[name], reference)
    assert found.verdict == name
    same = {name, "hidden_states[6]"} if name == "last_hidden_state" else {name}
    ranked = sorted(v for k, v in found.candidates.items() if v is not None and k not in same)
    ranked.insert(0, found.candidates[name])
    assert ranked[0] < 1e-6 and ranked[1] > 10 * MATCH_DISTANCE  # no near neighbour
    assert name in found.fix["advice"] and "match no stage" not in found.fix["advice"]
    if name == "last_hidden_state":
        assert "(= hidden_states[6])" in found.fix["advice"]
    assert "Feed the raw word embeddings" in found.fix["advice"]
    other = _diagnose(model, batch, _other(reference[name]), reference)
    assert other.verdict == "unknown"
    assert "another checkpoint" in other.fix["advice"] or "this checkpoint" in other.fix["advice"]


def test_a_pairs_embeddings_without_token_types_name_the_types_that_match(minilm):
    enc = minilm.tokenizer([p[0] for p in PAIRS], [p[1] for p in PAIRS], padding=True)
    ids, mask, types = (np.array(enc[k]) for k in ("input_ids", "attention_mask", "token_type_ids"))
    pair = Batch(input_ids=ids, attention_mask=mask, token_type_ids=types)
    typed = minilm.run(pair)
    hs0 = typed["hidden_states[0]"]
    untyped = Batch(input_ids=ids, attention_mask=mask, token_type_ids=None)
    reference = minilm.run(untyped)  # the run of the ids as given, as diagnose makes it
    found = _diagnose(minilm, untyped, hs0, reference)
    assert found.verdict == "post_layernorm" and found.ids_all_match
    valid = mask.astype(bool)
    assert (found.token_types.types[valid] == types[valid]).all()
    assert found.details()["token_type_ids"] == found.token_types.types.tolist()
    second = np.flatnonzero(types[0] == 1)
    assert f"row 0: type 1 at positions {second.min()}-{second.max()}" in found.fix["advice"]
    assert "--token-type-ids" in found.fix["advice"]
    # the other way: with the right types there is nothing to add, and word embeddings
    # of the pair need no types (random values: the hidden-state test above)
    assert _diagnose(minilm, pair, hs0, typed).token_types is None
    word = _diagnose(minilm, untyped, minilm.word_matrix()[ids], reference, outputs_match=True)
    assert word.verdict == "word_embeddings" and word.token_types is None


def test_rows_in_another_order_are_named_with_the_permutation(real):
    model, batch, reference, word = real
    rows = [2, 0, 1]
    found = _diagnose(model, batch, word[batch.input_ids][rows], reference)
    assert found.verdict == "word_embeddings"
    assert found.layout.kind == "permuted" and found.layout.rows == rows
    assert f"rows = {rows}" in found.fix["advice"]
    assert "tokenizations" not in found.fix["advice"]
    # the other way: word embeddings of other ids are no permutation of these
    rng = np.random.default_rng(0)
    others = _diagnose(model, batch, word[rng.integers(1000, len(word), batch.shape)], reference)
    assert others.layout is None and "different tokenizations" in others.fix["advice"]


def test_a_left_padded_gather_is_named_with_its_shift(real):
    model, batch, reference, word = real
    lengths = batch.attention_mask.sum(axis=1)
    left = np.stack(
        [np.roll(row, batch.shape[1] - n) for row, n in zip(batch.input_ids, lengths, strict=True)]
    )
    found = _diagnose(model, batch, word[left], reference)
    padding = [int(batch.shape[1] - n) for n in lengths]
    assert found.verdict == "word_embeddings"
    assert found.layout.kind == "shifted" and found.layout.shifts == padding
    assert "left-padded" in found.fix["advice"] and str(padding) in found.fix["advice"]
    # and the reverse: ids padded on the left, embeddings gathered right-padded
    mask = np.stack(
        [np.roll(m, len(m) - n) for m, n in zip(batch.attention_mask, lengths, strict=True)]
    )
    lefts = Batch(input_ids=left, attention_mask=mask, token_type_ids=batch.token_type_ids)
    reverse = _diagnose(model, lefts, word[batch.input_ids], {})
    assert reverse.layout.shifts == [-p for p in padding]
    assert "right-padded batch while the ids are left-padded" in reverse.fix["advice"]
    # the other way: an off-by-one id mapping is no shift, and a right-padded gather passes
    plus_one = _diagnose(model, batch, word[batch.input_ids + 1], reference)
    assert plus_one.layout is None and "off by +1" in plus_one.fix["advice"]
    right = _diagnose(model, batch, word[batch.input_ids], reference, outputs_match=True)
    assert right.layout is None and right.fix["advice"].startswith("Nothing to fix")


def test_token_types_added_without_positions_are_named_and_their_ids_recovered(real):
    """A pipeline that adds the token-type row itself but not the positions."""
    model, batch, reference, word = real
    parts = model.embedding_parts()
    types = parts.token_type[batch.token_type_ids]
    found = _diagnose(model, batch, word[batch.input_ids] + types, reference)
    assert found.verdict == "word_plus_type" and found.candidates["word_plus_type"] < 1e-6
    assert found.ids_all_match
    assert "token-type embeddings (not the position embeddings)" in found.fix["advice"]
    # the other way: positions added too is the stage it was before
    both = _diagnose(model, batch, word[batch.input_ids] + types + _positions(model, batch), {})
    assert both.verdict == "word_plus_position_plus_type"


def _positions(model, batch):
    ids = model.default_position_ids(batch.input_ids)
    return model.embedding_parts().position[ids]


@pytest.mark.parametrize(
    "stage, factor", [("word_embeddings", 1.05), ("word_embeddings", 0.5), ("post_layernorm", 2.0)]
)
def test_a_stage_times_one_factor_is_named_with_the_factor(real, stage, factor):
    model, batch, reference, word = real
    tensors = {
        "word_embeddings": word[batch.input_ids],
        "post_layernorm": reference["hidden_states[0]"],
    }
    found = _diagnose(model, batch, tensors[stage] * factor, reference)
    assert found.verdict == stage and found.scale is not None
    assert found.scale.stage == stage and abs(found.scale.factor - factor) < 1e-5
    assert found.ids_all_match and found.rounding is None
    assert f"multiplied by {factor:.4g}" in found.fix["advice"]
    assert found.details()["scale"]["factor"] == pytest.approx(factor, rel=1e-5)
    # the other way: a factor on top of another checkpoint's values is still unknown
    other = _diagnose(model, batch, _other(tensors[stage]) * factor, reference)
    assert other.verdict == "unknown" and other.scale is None


def test_the_cli_names_the_factor_in_its_verdict(real, tmp_path, capsys):
    from tfparity import cli

    model, batch, _, word = real
    np.save(tmp_path / "ids.npy", batch.input_ids)
    np.save(tmp_path / "mask.npy", batch.attention_mask)
    np.save(tmp_path / "e.npy", (word[batch.input_ids] * 1.05).astype(np.float32))
    argv = ["diagnose", "minilm", "--ids", str(tmp_path / "ids.npy")]
    argv += ["--embeds", str(tmp_path / "e.npy"), "--attention-mask", str(tmp_path / "mask.npy")]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "scale: word_embeddings x 1.05" in out
    assert out.rstrip().endswith("FAIL diagnose: word_embeddings x 1.05")


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_precision_rounding_is_named_with_its_size_and_the_cast(real, dtype):
    model, batch, reference, word = real
    rounded = word[batch.input_ids].astype(dtype).astype(np.float32)
    found = _diagnose(model, batch, rounded, reference)
    name = np.dtype(dtype).name
    assert found.verdict == "word_embeddings" and found.rounding.dtype == name
    unit = 2.0**-11 if dtype is np.float16 else 2.0**-8
    assert 0 < found.rounding.max_abs <= unit * np.abs(word).max()
    advice = found.fix["advice"]
    assert f"rounded through {name}" in advice and f"drop the cast to {name}" in advice
    assert f"{found.rounding.max_abs:.3g}" in advice and "attention_mask" not in advice
    assert f"not cast to {name}" in found.fix["code"]
    # the other way: values moved by as much, but not onto a half-precision grid
    nudged = _diagnose(model, batch, _other(word[batch.input_ids], scale=2e-4), reference)
    assert nudged.verdict == "word_embeddings" and nudged.rounding is None
    assert "not equal" in nudged.fix["advice"] and "float16" not in nudged.fix["advice"]


def test_check_embeds_and_assert_embeds_parity_give_the_diagnosis(minilm):
    """Through ``embeds_fn`` each fault gets its own cause, not one fixed hint (the
    right embeddings pass, and hidden_states[0] is named: tests/checks/test_embeds.py)."""
    texts = TEXTS[:1]
    word = minilm.word_matrix()
    cases = {
        "rounded through float16": lambda b: word[b.input_ids].astype(np.float16),
        "off by +1": lambda b: word[b.input_ids + 1],
    }
    for words, fn in list(cases.items())[1:]:
        report = check_embeds(minilm, texts=texts, embeds_fn=fn)
        assert not report.passed
        assert words in report.first_divergence.hint
        assert "A common cause" not in report.first_divergence.hint
        assert words in render(report).splitlines()[-1]  # the verdict line says what it is
    two = check_embeds(minilm, texts=TEXTS[:2], embeds_fn=lambda b: word[b.input_ids[::-1]])
    assert "rows in another order (rows [1, 0])" in render(two).splitlines()[-1]
    right = check_embeds(minilm, texts=texts, embeds_fn=lambda b: word[b.input_ids])
    assert right.passed and right.first_divergence is None
    with pytest.raises(AssertionError, match="rounded through float16"):
        assert_embeds_parity(minilm, texts=texts, embeds_fn=cases["rounded through float16"])


def test_hidden_states_0_is_named_where_no_stage_is_rebuilt(load_tf_model):
    """OPT's embedding layer adds positions at an offset the rebuilt stages do not
    know: its own hidden_states[0] names the tensor (a random one stays unknown)."""
    model = load_tf_model("tiny:opt")
    batch = make_batches(model, InputOptions(random=2, seq_len=8, batch_size=2, seed=1))[0]
    reference = model.run(batch)
    found = _diagnose(model, batch, reference["hidden_states[0]"], reference)
    assert found.verdict == "hidden_states[0]"
    rebuilt = [found.candidates[s] for s in ("word_embeddings", "word_plus_position")]
    assert all(d is None or d > MATCH_DISTANCE for d in rebuilt)
    assert found.fix["advice"].startswith("These are hidden_states[0], the embedding layer's")
    noise = np.random.default_rng(0).standard_normal(reference["hidden_states[0]"].shape)
    assert _diagnose(model, batch, noise, reference).verdict == "unknown"
