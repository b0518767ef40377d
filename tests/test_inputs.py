"""Tests for tfparity.inputs: texts files, tokenized batches, random ids, limits.

A real tokenizer (the tiny WordPiece one shipped with tfparity, model_max_length 64)
is used for text batches; no model is loaded here.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from tfparity.adapters.interfaces.sides import TFSideBase
from tfparity.errors import TfparityError
from tfparity.inputs import (
    DEFAULT_TEXTS,
    Batch,
    InputOptions,
    Limits,
    check_limits,
    make_batches,
    random_batches,
    read_texts_file,
    text_batches,
)

LONG_TEXT = "the quick brown fox jumps over the lazy dog " * 12  # far over 64 tokens
LIMITS = Limits(vocab_size=100, max_positions=16, type_vocab_size=2)


@pytest.fixture(scope="module")
def tok():
    from tfparity.adapters.sources.tiny import tiny_tokenizer

    return tiny_tokenizer()


# ---------------------------------------------------------------- read_texts_file


def test_read_texts_file_skips_blank_lines(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("first text\n\n   \nsecond text\n\t\nthird\n", encoding="utf-8")
    assert read_texts_file(path) == ["first text", "second text", "third"]


def test_read_texts_file_missing_file(tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(TfparityError, match="Cannot read the texts file") as info:
        read_texts_file(missing)
    assert str(missing) in str(info.value)


def test_read_texts_file_only_blank_lines(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n  \n\t\n", encoding="utf-8")
    with pytest.raises(TfparityError, match="holds no text"):
        read_texts_file(path)


# ---------------------------------------------------------------- text_batches


def test_text_batches_split_by_batch_size(tok):
    texts = ["hello world", "why", "the lazy dog", "a fox", "numerical parity"]
    batches = text_batches(tok, texts, batch_size=2)
    assert [b.texts for b in batches] == [tuple(texts[0:2]), tuple(texts[2:4]), (texts[4],)]
    assert [b.shape[0] for b in batches] == [2, 2, 1]
    for batch in batches:
        assert batch.input_ids.dtype == np.int32
        assert batch.attention_mask.dtype == np.int32
        assert batch.input_ids.shape == batch.attention_mask.shape
        assert batch.token_type_ids is not None
        assert batch.token_type_ids.shape == batch.input_ids.shape
        # The longest text of each batch has no padding.
        assert batch.attention_mask.sum(axis=1).max() == batch.shape[1]
    # Same ids as tokenizing one text on its own.
    alone = tok("why")["input_ids"]
    assert batches[0].input_ids[1, : len(alone)].tolist() == alone


def test_text_batches_right_padding(tok):
    (batch,) = text_batches(tok, ["why", "the quick brown fox jumps"], padding_side="right")
    short = batch.attention_mask[0]
    n = int(short.sum())
    assert 0 < n < batch.shape[1]
    assert short[:n].tolist() == [1] * n  # real tokens first
    assert short[n:].tolist() == [0] * (batch.shape[1] - n)  # zeros at the end
    assert (batch.input_ids[0, n:] == tok.pad_token_id).all()
    assert batch.input_ids[0, 0] == tok.cls_token_id


def test_text_batches_left_padding(tok):
    (batch,) = text_batches(tok, ["why", "the quick brown fox jumps"], padding_side="left")
    short = batch.attention_mask[0]
    n = int(short.sum())
    pad = batch.shape[1] - n
    assert pad > 0
    assert short[:pad].tolist() == [0] * pad  # zeros at the start
    assert short[pad:].tolist() == [1] * n
    assert (batch.input_ids[0, :pad] == tok.pad_token_id).all()
    assert batch.input_ids[0, pad] == tok.cls_token_id
    # The tokenizer's own setting is restored afterwards.
    assert tok.padding_side == "right"
    right = text_batches(tok, ["why", "the quick brown fox jumps"])[0]
    np.testing.assert_array_equal(right.attention_mask[0], short[::-1])


@pytest.mark.parametrize("empty", ["", "   ", "\t\n"])
def test_text_batches_empty_text_names_its_number(tok, empty):
    with pytest.raises(TfparityError, match=r"Text 3 is empty"):
        text_batches(tok, ["hello", "world", empty, "why"])


def test_text_batches_too_long_mentions_truncate(tok):
    texts = ["hello", "why", "a fox", LONG_TEXT]
    # batch_size 2: the long text is the 2nd of the 2nd batch, i.e. text 4 overall.
    with pytest.raises(TfparityError, match="--truncate") as info:
        text_batches(tok, texts, batch_size=2)
    message = str(info.value)
    assert message.startswith("Text 4 is ")
    assert "maximum of 64 positions" in message


def test_text_batches_limit_is_smaller_of_model_and_tokenizer(tok):
    text = "the quick brown fox jumps over the lazy dog"  # over 16, under 64 tokens
    assert 16 < len(tok(text)["input_ids"]) < 64
    with pytest.raises(TfparityError, match="maximum of 16 positions"):
        text_batches(tok, [text], max_positions=16)
    assert text_batches(tok, [text], max_positions=100)[0].shape[1] < 64


def test_text_batches_truncate_cuts_to_limit(tok):
    batches = text_batches(tok, [LONG_TEXT, "why"], truncate=True)
    assert batches[0].shape == (2, 64)
    assert batches[0].attention_mask[0].sum() == 64
    assert batches[0].input_ids[0, -1] == tok.sep_token_id  # special tokens kept
    (batch,) = text_batches(tok, [LONG_TEXT], max_positions=16, truncate=True)
    assert batch.shape == (1, 16)
    np.testing.assert_array_equal(batch.input_ids[0, :15], batches[0].input_ids[0, :15])


def test_text_batches_without_tokenizer():
    with pytest.raises(TfparityError, match="no tokenizer"):
        text_batches(None, ["hello"])


def test_text_batches_batch_size_must_be_positive(tok):
    with pytest.raises(TfparityError, match="--batch-size must be at least 1"):
        text_batches(tok, ["hello"], batch_size=0)


# ---------------------------------------------------------------- random_batches


def _concat(batches: list[Batch], field: str) -> np.ndarray:
    return np.concatenate([getattr(b, field) for b in batches])


def test_random_batches_same_seed_identical():
    a = random_batches(10, 12, 50, batch_size=4, seed=7)
    b = random_batches(10, 12, 50, batch_size=4, seed=7)
    assert [x.shape for x in a] == [(4, 12), (4, 12), (2, 12)]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.input_ids, y.input_ids)
        np.testing.assert_array_equal(x.attention_mask, y.attention_mask)
        assert x.input_ids.dtype == np.int32
        assert x.texts is None


def test_random_batches_different_seed_differs():
    a = random_batches(4, 12, 50, seed=0)[0]
    b = random_batches(4, 12, 50, seed=1)[0]
    assert not np.array_equal(a.input_ids, b.input_ids)


def test_random_batches_lengths():
    batches = random_batches(16, 20, 50, batch_size=8, seed=3)
    for batch in batches:
        lengths = batch.attention_mask.sum(axis=1)
        assert lengths[0] == 20  # the first row of every batch is full length
        assert lengths.min() >= 10  # at least half of seq_len
        assert lengths.max() <= 20
    all_lengths = _concat(batches, "attention_mask").sum(axis=1)
    assert len(set(all_lengths.tolist())) > 2  # mixed lengths
    # Right padding: each mask row is ones then zeros.
    for row in _concat(batches, "attention_mask"):
        n = int(row.sum())
        assert row[:n].all() and not row[n:].any()


def test_random_batches_left_padding():
    right = random_batches(8, 16, 50, seed=5)[0]
    left = random_batches(8, 16, 50, seed=5, padding_side="left")[0]
    np.testing.assert_array_equal(left.attention_mask, right.attention_mask[:, ::-1])
    assert (left.attention_mask[:, -1] == 1).all()  # the last position is always real
    assert (left.attention_mask[:, 0] == 0).any()  # some rows start with padding
    for row in left.attention_mask:
        n = int(row.sum())
        assert not row[: 16 - n].any() and row[16 - n :].all()


@pytest.mark.parametrize("side", ["right", "left"])
def test_random_batches_avoid_ids_and_pad(side):
    avoid = (1, 0, 5)
    batches = random_batches(24, 16, 8, seed=11, padding_side=side, avoid_ids=avoid)
    ids, mask = _concat(batches, "input_ids"), _concat(batches, "attention_mask")
    real = ids[mask == 1]
    assert not np.isin(real, avoid).any()
    assert set(real.tolist()) == {2, 3, 4, 6, 7}  # everything else is drawn
    assert (mask == 0).any()
    assert (ids[mask == 0] == 1).all()  # padded positions hold the pad id (first avoided)
    assert (_concat(batches, "token_type_ids") == 0).all()


def test_random_batches_pad_defaults_to_zero():
    batch = random_batches(8, 16, 50, seed=2)[0]
    assert (batch.attention_mask == 0).any()
    assert (batch.input_ids[batch.attention_mask == 0] == 0).all()
    assert batch.input_ids.max() < 50 and batch.input_ids.min() >= 0


@pytest.mark.parametrize(
    ("n", "seq_len", "batch_size", "flag"),
    [(0, 8, 8, "--random"), (4, 0, 8, "--seq-len"), (4, 8, 0, "--batch-size")],
)
def test_random_batches_rejects_non_positive(n, seq_len, batch_size, flag):
    with pytest.raises(TfparityError, match=f"{flag} must be at least 1"):
        random_batches(n, seq_len, 50, batch_size=batch_size)


# ---------------------------------------------------------------- check_limits


def _batch(ids, **extra) -> Batch:
    ids = np.asarray(ids, np.int32)
    return Batch(ids, np.ones_like(ids), **extra)


def test_check_limits_accepts_valid_batch():
    ids = np.array([[0, 5, 99], [1, 2, 3]])
    check_limits(
        _batch(ids, token_type_ids=np.ones_like(ids), position_ids=np.full_like(ids, 15)),
        LIMITS,
    )


@pytest.mark.parametrize(("value", "index"), [(-1, (0, 2)), (100, (1, 0)), (2**30, (1, 1))])
def test_check_limits_input_ids_out_of_range(value, index):
    ids = np.array([[0, 5, 9], [1, 2, 3]])
    ids[index] = value
    with pytest.raises(TfparityError) as info:
        check_limits(_batch(ids), LIMITS)
    message = str(info.value)
    assert message.startswith("input_ids out of range")
    assert f"{value} at index {index}" in message
    assert "[0, 99]" in message


def test_check_limits_token_type_ids():
    ids = np.zeros((2, 4), np.int32)
    types = np.zeros_like(ids)
    types[1, 3] = 2
    with pytest.raises(TfparityError, match=r"token_type_ids out of range: 2 at index \(1, 3\)"):
        check_limits(_batch(ids, token_type_ids=types), LIMITS)
    # Not checked when the model has no token types.
    check_limits(
        _batch(ids, token_type_ids=types), dataclasses.replace(LIMITS, type_vocab_size=None)
    )


def test_check_limits_position_ids():
    ids = np.zeros((1, 4), np.int32)
    positions = np.array([[0, 1, 16, 3]], np.int32)
    with pytest.raises(TfparityError, match=r"position_ids out of range: 16 at index \(0, 2\)"):
        check_limits(_batch(ids, position_ids=positions), LIMITS)
    positions[0, 2] = -3
    with pytest.raises(TfparityError, match=r"-3 at index \(0, 2\)"):
        check_limits(_batch(ids, position_ids=positions), LIMITS)


def test_check_limits_sequence_longer_than_positions():
    with pytest.raises(TfparityError, match="17 tokens long, more than the model's 16"):
        check_limits(_batch(np.zeros((1, 17))), LIMITS)
    check_limits(_batch(np.zeros((1, 17))), Limits(vocab_size=100))  # no position limit


# ---------------------------------------------------------------- make_batches


class _Side(TFSideBase):
    """What make_batches reads of a TF side (tokenizer, limits, pad token); it admits
    each batch as every side does (TFSideBase.admit)."""

    def __init__(self, tokenizer, limits, pad_token_id):
        self.tokenizer, self.limits = tokenizer, limits
        self.config = SimpleNamespace(pad_token_id=pad_token_id)


def test_make_batches_default_texts(tok):
    limits = Limits(vocab_size=tok.vocab_size, max_positions=64, type_vocab_size=2)
    batches = make_batches(_Side(tok, limits, tok.pad_token_id), InputOptions())
    assert len(batches) == 1
    assert batches[0].texts == DEFAULT_TEXTS
    assert batches[0].shape[0] == len(DEFAULT_TEXTS)
    assert batches[0].shape[1] <= 64
    two = make_batches(_Side(tok, limits, tok.pad_token_id), InputOptions(batch_size=2))
    assert [b.texts for b in two] == [DEFAULT_TEXTS[0:2], DEFAULT_TEXTS[2:4], DEFAULT_TEXTS[4:]]
    with pytest.raises(TfparityError, match="No texts"):
        make_batches(_Side(tok, limits, tok.pad_token_id), InputOptions(texts=()))


def test_make_batches_checks_limits_of_text_ids(tok):
    # A model whose vocabulary is smaller than the tokenizer's: ids are rejected.
    limits = Limits(vocab_size=10, max_positions=64)
    with pytest.raises(TfparityError, match="input_ids out of range"):
        make_batches(_Side(tok, limits, 1), InputOptions(texts=("the quick brown fox",)))


def test_make_batches_random_path():
    options = InputOptions(random=5, seq_len=10, batch_size=4, seed=3, padding_side="left")
    # No tokenizer is needed for random ids.
    batches = make_batches(_Side(None, LIMITS, 1), options)
    assert [b.shape for b in batches] == [(4, 10), (1, 10)]
    expected = random_batches(5, 10, 100, batch_size=4, seed=3, padding_side="left", avoid_ids=(1,))
    for got, want in zip(batches, expected, strict=True):
        np.testing.assert_array_equal(got.input_ids, want.input_ids)
        np.testing.assert_array_equal(got.attention_mask, want.attention_mask)
    ids, mask = _concat(batches, "input_ids"), _concat(batches, "attention_mask")
    assert (mask[:, -1] == 1).all()
    assert not (ids[mask == 1] == 1).any()  # the pad id is never a real token
    assert (ids < 100).all()


def test_make_batches_seq_len_above_max_positions():
    with pytest.raises(TfparityError, match="--seq-len 17 is more than the model's 16"):
        make_batches(_Side(None, LIMITS, 1), InputOptions(random=2, seq_len=17))
    assert make_batches(_Side(None, LIMITS, 1), InputOptions(random=2, seq_len=16))[0].shape == (
        2,
        16,
    )


# ---------------------------------------------------------------- --truncate in reports


def test_truncate_records_which_texts_it_cut_and_how_long_they_were(tok):
    from tfparity.inputs import note_truncation
    from tfparity.results import Report

    full = len(tok(LONG_TEXT, verbose=False)["input_ids"])
    batches = text_batches(tok, ["hi", LONG_TEXT, "why", LONG_TEXT], batch_size=2, truncate=True)
    assert [b.truncated for b in batches] == [((2, full, 64),), ((4, full, 64),)]
    assert text_batches(tok, ["hi", "why"], truncate=True)[0].truncated == ()
    report = note_truncation(Report("embeds", "tiny:bert", True), batches)
    assert report.details["truncated"] == [
        {"text": 2, "tokens": full, "kept": 64},
        {"text": 4, "tokens": full, "kept": 64},
    ]
    assert report.notes == [
        f"--truncate cut 2 of 4 texts to 64 tokens (the model's maximum of 64 positions): "
        f"text 2 ({full} "
        f"tokens), text 4 ({full} tokens)."
    ]
    untouched = note_truncation(Report("embeds", "tiny:bert", True), batches[:0])
    assert untouched.notes == [] and "truncated" not in untouched.details


def test_every_check_on_batches_says_what_truncate_cut(load_tf_model):
    """embeds, crosscheck, positions, modes and embeddings end with the same helper."""
    from tfparity import api
    from tfparity.checks.modes import ModesOptions, check_modes

    model = load_tf_model("tiny:bert")
    inputs = InputOptions(texts=("hello", LONG_TEXT), truncate=True)
    batches = api.make_batches(model, inputs)
    reports = [
        api.check_embeds(model, batches=batches),
        *api.crosscheck(model, batches=batches, reload=False),
        api.check_positions(model, inputs=inputs, permutations=1),
        check_modes(model, batches, ModesOptions(devices="cpu", modes=("graph",))),
        api.check_tying(model, inputs=inputs),
    ]
    for report in reports:
        assert [t["text"] for t in report.details["truncated"]] == [2], report.check
        assert any(n.startswith("--truncate cut 1 of 2 texts to 64") for n in report.notes)


# ---------------------------------------------------------------- unpadded batches

NO_MASK = "the signature 'serving_default' takes no attention mask"


def _padded(rows: list[list[int]], side: str = "right") -> Batch:
    """A batch of ``rows`` padded with 0 on ``side``, its texts 't<n>'."""
    width = max(len(r) for r in rows)
    ids = np.zeros((len(rows), width), np.int32)
    mask = np.zeros_like(ids)
    for i, row in enumerate(rows):
        cols = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        ids[i, cols], mask[i, cols] = row, 1
    texts = tuple(f"t{r[0]}" for r in rows)
    return Batch(ids, mask, np.ones_like(ids), texts=texts)


@pytest.mark.parametrize("side", ["right", "left"])
def test_unpadded_regroups_sequences_by_length_keeping_their_tokens(side):
    from tfparity.inputs import unpadded

    batches = [_padded([[1, 2, 3], [4], [5, 6, 7]], side), _padded([[8], [9, 9, 9], [10]], side)]
    out = unpadded(batches, 2, NO_MASK)
    assert [b.input_ids.tolist() for b in out] == [
        [[1, 2, 3], [5, 6, 7]],  # length 3, in the order first seen, at most 2 a batch
        [[9, 9, 9]],
        [[4], [8]],
        [[10]],
    ]
    assert all(b.attention_mask.all() and b.unpadded == NO_MASK for b in out)
    assert [b.texts for b in out] == [("t1", "t5"), ("t9",), ("t4", "t8"), ("t10",)]
    assert out[0].token_type_ids.shape == (2, 3) and out[0].position_ids is None


def test_unpadded_leaves_batches_without_padding_as_they_are():
    from tfparity.inputs import unpadded

    batches = [_padded([[1, 2], [3, 4]]), _padded([[5]])]
    assert unpadded(batches, 8, NO_MASK) == batches
    assert all(b.unpadded == "" for b in batches)


def test_unpadded_refuses_padding_inside_a_sequence():
    from tfparity.inputs import unpadded

    gap = Batch(np.array([[1, 0, 3], [4, 5, 6]], np.int32), np.array([[1, 0, 1], [1, 1, 1]]))
    with pytest.raises(TfparityError, match="sequence 0 of these batches has padding inside"):
        unpadded([gap], 8, NO_MASK)


def test_unpadded_texts_keep_their_truncate_records_and_the_report_says_both(tok):
    from tfparity.inputs import note_inputs, unpadded
    from tfparity.results import Report

    texts = ["hi", LONG_TEXT, "why", LONG_TEXT, "a longer text here"]
    batches = text_batches(tok, texts, batch_size=2, truncate=True)
    out = unpadded(batches, 2, NO_MASK)
    assert sorted(t for b in out for t in b.truncated) == sorted(
        t for b in batches for t in b.truncated
    )
    long = next(b for b in out if b.texts == (LONG_TEXT, LONG_TEXT))
    assert [t[0] for t in long.truncated] == [2, 4]  # both cut texts, by their numbers
    report = note_inputs(Report("crosscheck", "x", True), out)
    assert report.details["unpadded"] == f"{NO_MASK}: batches of one length each"
    assert "ran unpadded" in report.notes[-1] and "--truncate cut 2 of 5" in report.notes[0]
    plain = note_inputs(Report("crosscheck", "x", True), batches)
    assert "unpadded" not in plain.details
