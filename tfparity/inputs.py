"""Deterministic input batches: tokenized texts or seeded random ids, with padding.

Only numpy here; a tokenizer is any object with the Hugging Face call signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .errors import TfparityError

PaddingSide = Literal["right", "left"]

DEFAULT_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Hello world.",
    "Numerical parity means two implementations agree on every output, within tolerance.",
    "A transformer model turns token ids into embeddings, adds positions, and mixes them "
    "with attention, layer after layer, until the last hidden state.",
    "Why?",
)


@dataclass(frozen=True)
class Batch:
    """One padded batch. ``texts`` is None for generated ids."""

    input_ids: np.ndarray  # int32 [batch, seq]
    attention_mask: np.ndarray  # int32 [batch, seq], 1 = real token
    token_type_ids: np.ndarray | None = None
    position_ids: np.ndarray | None = None
    texts: tuple[str, ...] | None = None
    # The texts --truncate cut: (text number from 1, its tokens, the tokens kept).
    truncated: tuple[tuple[int, int, int], ...] = ()
    # What the truncated texts were cut to fit ("the model's maximum of 64 positions").
    limit_text: str = ""
    # Why the batch was regrouped without padding (a side that cannot mask it), for the
    # report; "" for a batch as made.
    unpadded: str = ""
    # Each row's sequence number (from 0) among all the sequences given, so per-sequence
    # facts (gold labels) follow a row through regrouping; None where unknown.
    numbers: tuple[int, ...] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.input_ids.shape)  # type: ignore[return-value]


@dataclass(frozen=True)
class Limits:
    """What the model accepts: ids are checked against these before any run."""

    vocab_size: int
    max_positions: int | None = None  # the longest sequence
    type_vocab_size: int | None = None
    position_table: int | None = None  # rows of the position table (default max_positions)
    # Where max_positions comes from, named in every refusal: "" for the model's own
    # positions; a side whose static input shape is shorter names it instead ("the
    # flatbuffer's static sequence length"), so 16 is never called the model's maximum.
    positions_source: str = ""

    def positions_text(self) -> str:
        """``the model's 512 positions`` or ``the flatbuffer's static sequence length 16``."""
        if self.positions_source:
            return f"{self.positions_source} {self.max_positions}"
        return f"the model's {self.max_positions} positions"


def read_texts_file(path: str | Path) -> list[str]:
    """One text per line; blank lines are skipped."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TfparityError(f"Cannot read the texts file {path}: {exc.strerror}.") from exc
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TfparityError(
            f"The texts file {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line "
            f"{line}); is it a binary file? Save it as UTF-8."
        ) from None
    texts = [line for line in lines if line.strip()]
    if not texts:
        raise TfparityError(f"The texts file {path} holds no text (only blank lines).")
    return texts


def text_batches(
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 8,
    padding_side: PaddingSide | None = None,
    max_positions: int | None = None,
    truncate: bool = False,
    positions_text: str | None = None,
) -> list[Batch]:
    """Tokenize ``texts`` into padded batches, refusing empty or too-long texts;
    ``positions_text`` names where ``max_positions`` comes from in the refusal."""
    if tokenizer is None:
        raise TfparityError(
            "This model has no tokenizer, so it cannot tokenize texts (the default "
            "inputs, or --text/--texts); give --random N --seq-len L for generated ids."
        )
    from . import validation

    texts = validation.texts(list(texts))
    limit = _token_limit(tokenizer, max_positions)
    if limit is not None and not (positions_text and limit == max_positions):
        positions_text = f"the model's maximum of {limit} positions"
    side = padding_side or getattr(tokenizer, "padding_side", "right")
    batches = []
    for start in range(0, len(texts), _positive(batch_size, "--batch-size")):
        chunk = list(texts[start : start + batch_size])
        batch = _tokenize(tokenizer, chunk, side, (limit, positions_text), truncate, start)
        batches.append(batch)
    return batches


def _token_limit(tokenizer: Any, max_positions: int | None) -> int | None:
    tok_max = getattr(tokenizer, "model_max_length", None)
    candidates = [n for n in (max_positions, tok_max) if n and 0 < n < 10**6]
    return min(candidates) if candidates else None


def _tokenize(tokenizer, chunk, side, limits, truncate, start) -> Batch:
    limit, limit_text = limits
    old_side = tokenizer.padding_side
    tokenizer.padding_side = side
    try:
        enc = tokenizer(
            chunk,
            padding=True,
            truncation=bool(truncate and limit),
            max_length=limit if truncate else None,
            return_tensors="np",
        )
    finally:
        tokenizer.padding_side = old_side
    lengths = enc["attention_mask"].sum(axis=1)
    if limit and not truncate and lengths.max() > limit:
        i = int(np.argmax(lengths))
        raise TfparityError(
            f"Text {start + i + 1} is {int(lengths[i])} tokens long, more than {limit_text}. "
            f"Shorten it, or pass --truncate to cut it to {limit}."
        )
    tt = enc.get("token_type_ids")
    return Batch(
        input_ids=enc["input_ids"].astype(np.int32),
        attention_mask=enc["attention_mask"].astype(np.int32),
        token_type_ids=None if tt is None else tt.astype(np.int32),
        texts=tuple(chunk),
        truncated=_cut(tokenizer, chunk, lengths, start) if truncate and limit else (),
        limit_text=limit_text or "" if truncate else "",
        numbers=tuple(range(start, start + len(chunk))),
    )


def _cut(tokenizer, chunk, kept, start) -> tuple[tuple[int, int, int], ...]:
    """The texts of ``chunk`` that truncation cut: (text number from 1, its full length
    in tokens, the tokens kept). Their full lengths take a second, uncut tokenization
    (``verbose=False``: without transformers' warning about too-long sequences)."""
    full = tokenizer(chunk, padding=False, truncation=False, verbose=False)["input_ids"]
    return tuple(
        (start + i + 1, len(ids), int(kept[i]))
        for i, ids in enumerate(full)
        if len(ids) > int(kept[i])
    )


def token_ids(tokenizer: Any, text: str) -> list[int]:
    """The ids ``tokenizer`` makes of one text, special tokens included, unpadded."""
    return [int(i) for i in tokenizer(text)["input_ids"]]


def token_strings(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    """The tokens of ``ids``, as the tokenizer spells them (``[UNK]``, ``##s``)."""
    return [str(t) for t in tokenizer.convert_ids_to_tokens(list(ids))]


def tokenizer_source(tokenizer: Any) -> str:
    """Whose tokenizer this is, for a report: the MODEL spec it was loaded from (the
    loaders set ``name_or_path`` to it) and its class; a tokenizer of the user's own
    says whatever its ``name_or_path`` holds."""
    where = getattr(tokenizer, "name_or_path", "") or "given in memory"
    return f"{where} ({type(tokenizer).__name__})"


def note_truncation(report: Any, batches: Sequence[Batch]) -> Any:
    """Say in ``report`` which texts ``--truncate`` (or the fit of the default texts)
    cut, if any: a note (how many, which, their lengths, the limit and where it comes
    from) and ``details["truncated"]`` (one ``{"text", "tokens", "kept"}`` per text,
    texts numbered from 1). Every check that runs on batches ends with this."""
    cut = sorted(t for b in batches for t in b.truncated)
    if not cut:
        return report
    texts = sum(len(b.texts or ()) for b in batches)
    report.details["truncated"] = [{"text": n, "tokens": t, "kept": k} for n, t, k in cut]
    which = ", ".join(f"text {n} ({t} tokens)" for n, t, _ in cut[:10])
    more = f" and {len(cut) - 10} more" if len(cut) > 10 else ""
    limit = max(k for _, _, k in cut)
    fit = next((b.limit_text for b in batches if b.limit_text), "") or "the model's maximum"
    defaults = all(t in DEFAULT_TEXTS for b in batches for t in b.texts or ())
    who = "The default texts were cut to fit:" if defaults else "--truncate cut"
    own = " (give --text or --texts FILE for texts of your own)" if defaults else ""
    report.notes.append(
        f"{who} {len(cut)} of {texts} texts to {limit} tokens ({fit}): {which}{more}{own}."
    )
    return report


def note_inputs(report: Any, batches: Sequence[Batch]) -> Any:
    """Say in ``report`` what was done to the inputs: the texts ``--truncate`` cut
    (:func:`note_truncation`) and the batches regrouped without padding
    (:func:`unpadded`). Every check that runs on batches ends with this."""
    note_truncation(report, batches)
    reason = next((b.unpadded for b in batches if b.unpadded), "")
    if reason:
        lengths = sorted({b.input_ids.shape[1] for b in batches})
        span = f"{lengths[0]}" if len(lengths) == 1 else f"{lengths[0]} to {lengths[-1]}"
        report.details["unpadded"] = f"{reason}: batches of one length each"
        report.notes.append(
            f"{reason[0].upper()}{reason[1:]}, so padding would be attended to: the inputs "
            f"ran unpadded, in {len(batches)} batches of one length each ({span} tokens), "
            "on both sides."
        )
    return report


def unpadded(batches: Sequence[Batch], batch_size: int, reason: str) -> list[Batch]:
    """``batches`` regrouped without padding, for a side that cannot mask it (``reason``:
    why, in words): each sequence cut to its real tokens, sequences of one length batched
    together (at most ``batch_size``, in the order first seen). Grouping by length rather
    than batch size 1 keeps the batch dimension (what a server batches) with no padding;
    each row's numbers are its own either way. Batches without padding come back as
    they are. A mask with a gap inside a sequence cannot be cut away: exit 2."""
    if all(b.attention_mask.all() for b in batches):
        return list(batches)
    rows: list[_Row] = []
    for batch in batches:
        rows += _rows(batch, len(rows), reason)
    groups: dict[int, list[_Row]] = {}
    for row in rows:
        groups.setdefault(len(row.ids), []).append(row)
    size = _positive(batch_size, "--batch-size")
    return [
        _stacked(group[start : start + size], reason)
        for group in groups.values()
        for start in range(0, len(group), size)
    ]


@dataclass(frozen=True)
class _Row:
    """One sequence without its padding, with the --truncate record of its text."""

    ids: np.ndarray
    types: np.ndarray | None
    positions: np.ndarray | None
    text: str | None
    truncated: tuple[tuple[int, int, int], ...]
    number: int


def _rows(batch: Batch, before: int, reason: str) -> list[_Row]:
    """``batch``'s sequences cut to their real tokens; ``before``: the sequences of the
    batches before it (text numbers run across batches, as text_batches makes them)."""
    check_mask(batch.attention_mask, batch.input_ids.shape)  # no sequence of padding only
    cut = {t[0]: t for t in batch.truncated}
    rows = []
    for r, mask in enumerate(np.asarray(batch.attention_mask)):
        real = np.flatnonzero(mask)
        if real[-1] - real[0] + 1 != real.size:
            raise TfparityError(
                f"{reason[0].upper()}{reason[1:]}, and sequence {before + r} of these batches "
                "has padding inside it (its attention_mask has a 0 between 1s), which cannot "
                "be cut away. Give sequences whose padding is only at one end, or batches "
                "without padding (each of one length)."
            )
        keep = (r, slice(int(real[0]), int(real[-1]) + 1))
        number = before + r + 1
        rows.append(
            _Row(
                ids=np.asarray(batch.input_ids)[keep],
                types=None if batch.token_type_ids is None else batch.token_type_ids[keep],
                positions=None if batch.position_ids is None else batch.position_ids[keep],
                text=None if batch.texts is None else batch.texts[r],
                truncated=(cut[number],) if number in cut else (),
                number=(batch.numbers[r] if batch.numbers is not None else number - 1),
            )
        )
    return rows


def _stacked(rows: list[_Row], reason: str) -> Batch:
    def stack(parts: list[np.ndarray | None]) -> np.ndarray | None:
        return None if parts[0] is None else np.stack(parts).astype(np.int32)

    ids = stack([r.ids for r in rows])
    texts = tuple(r.text for r in rows) if rows[0].text is not None else None
    return Batch(
        input_ids=ids,
        attention_mask=np.ones_like(ids),
        token_type_ids=stack([r.types for r in rows]),
        position_ids=stack([r.positions for r in rows]),
        texts=texts,  # type: ignore[arg-type]
        truncated=tuple(t for r in rows for t in r.truncated),
        unpadded=reason,
        numbers=tuple(r.number for r in rows),
    )


def random_batches(
    n: int,
    seq_len: int,
    vocab_size: int,
    *,
    batch_size: int = 8,
    seed: int = 0,
    padding_side: PaddingSide = "right",
    avoid_ids: Sequence[int] = (),
) -> list[Batch]:
    """``n`` seeded random sequences of mixed lengths (the longest is ``seq_len``).

    Ids in ``avoid_ids`` (e.g. the pad token, which RoBERTa treats as padding when it
    makes position ids) are never drawn.
    """
    _positive(n, "--random")
    _positive(seq_len, "--seq-len")
    rng = np.random.default_rng(seed)
    allowed = np.setdiff1d(np.arange(vocab_size), np.asarray(avoid_ids, dtype=np.int64))
    batches = []
    for start in range(0, n, _positive(batch_size, "--batch-size")):
        rows = min(batch_size, n - start)
        lengths = rng.integers(max(1, seq_len // 2), seq_len + 1, size=rows)
        lengths[0] = seq_len
        ids = rng.choice(allowed, size=(rows, seq_len)).astype(np.int32)
        mask = (np.arange(seq_len)[None, :] < lengths[:, None]).astype(np.int32)
        if padding_side == "left":
            mask = mask[:, ::-1].copy()
        pad = int(avoid_ids[0]) if len(avoid_ids) else 0
        ids = np.where(mask == 1, ids, pad).astype(np.int32)
        numbers = tuple(range(start, start + rows))
        batches.append(Batch(ids, mask, np.zeros_like(ids), numbers=numbers))
    return batches


def check_limits(batch: Batch, limits: Limits) -> None:
    """Reject ids the model cannot embed, before they reach it.

    On a GPU, ``tf.gather`` returns zeros for out-of-range ids instead of raising, so
    a bad id would silently give a wrong (and possibly matching) answer.
    """
    _check_range(batch.input_ids, limits.vocab_size, "input_ids", "vocabulary size")
    check_mask(batch.attention_mask, batch.input_ids.shape)
    if batch.token_type_ids is not None and limits.type_vocab_size:
        _check_range(
            batch.token_type_ids, limits.type_vocab_size, "token_type_ids", "type_vocab_size"
        )
    table = limits.position_table or limits.max_positions
    if batch.position_ids is not None and table:
        _check_range(batch.position_ids, table, "position_ids", "max_position_embeddings")
    if limits.max_positions and batch.input_ids.shape[1] > limits.max_positions:
        raise TfparityError(
            f"The batch is {batch.input_ids.shape[1]} tokens long, more than "
            f"{limits.positions_text()}."
        )


def check_mask(mask: np.ndarray, shape: tuple[int, ...], what: str = "attention_mask") -> None:
    """Refuse a mask that is not 0/1 of the ids' shape, or that leaves a sequence with no
    real token: its outputs would be excluded from every comparison, so the check would
    compare nothing for it and could pass vacuously."""
    mask = np.asarray(mask)
    if mask.shape != tuple(shape):
        raise TfparityError(
            f"{what} has shape {list(mask.shape)}, but input_ids has {list(shape)}."
        )
    if mask.size == 0:
        raise TfparityError(f"{what} is empty ({list(mask.shape)}): nothing to compare.")
    if not np.isin(mask, (0, 1)).all():
        raise TfparityError(f"{what} must hold only 0 (padding) and 1 (real token).")
    empty_rows = np.flatnonzero(mask.reshape(mask.shape[0], -1).sum(axis=1) == 0)
    if empty_rows.size:
        raise TfparityError(
            f"{what} masks every token of sequence {int(empty_rows[0])}"
            + (f" (and {empty_rows.size - 1} more)" if empty_rows.size > 1 else "")
            + ": nothing of it would be compared. Every sequence needs at least one 1."
        )


def integer_ids(array: Any, what: str) -> np.ndarray:
    """``array`` as int32 ids, range-checked in the dtype it arrives in, *before* any
    cast: an int64 id of 2**32 + 5 would otherwise become 5, and a float id 1.5 or Inf
    would be truncated (with a RuntimeWarning) into some valid-looking id."""
    array = np.asarray(array)
    if array.dtype == bool or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise TfparityError(f"{what} must hold integers; it holds {array.dtype} values.")
    if array.size == 0:
        raise TfparityError(f"{what} is empty (shape {list(array.shape)}): nothing to compare.")
    if np.issubdtype(array.dtype, np.floating):
        bad = ~np.isfinite(array)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise TfparityError(
                f"{what} holds {float(array[where])} at index {where}; ids are integers."
            )
        frac = array != np.round(array)
        if frac.any():
            where = tuple(int(i) for i in np.argwhere(frac)[0])
            raise TfparityError(
                f"{what} holds {float(array[where])} at index {where}, not a whole number; ids are "
                "integers."
            )
    limit = np.iinfo(np.int32)
    bad = (array < limit.min) | (array > limit.max)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise TfparityError(
            f"{what} out of range: {int(array[where])} at index {where} does not fit in int32, "
            "and no model has that many rows."
        )
    return array.astype(np.int32)


def _check_range(ids: np.ndarray, upper: int, what: str, limit_name: str) -> None:
    bad = (ids < 0) | (ids >= upper)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise TfparityError(
            f"{what} out of range: {int(ids[where])} at index {where}; the model's "
            f"{limit_name} is {upper}, so ids must be in [0, {upper - 1}]."
        )


def _positive(value: int, flag: str) -> int:
    if value < 1:
        raise TfparityError(f"{flag} must be at least 1 (got {value}).")
    return value


@dataclass(frozen=True)
class InputOptions:
    """Which inputs a check runs on: texts (default: built-in sentences) or random ids."""

    texts: tuple[str, ...] | None = None
    random: int | None = None
    seq_len: int = 32
    batch_size: int = 8
    seed: int = 0
    padding_side: PaddingSide | None = None
    truncate: bool = False

    def __post_init__(self) -> None:
        """Refuse wrong types here, where every path (CLI, API, plugin) builds inputs: a
        ``str`` as ``texts`` would otherwise be run one character per sequence."""
        from . import validation

        object.__setattr__(self, "texts", validation.texts(self.texts))
        for name in ("random", "seq_len", "batch_size", "seed"):
            value = getattr(self, name)
            if value is None and name == "random":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}.")
        if self.seed < 0:
            raise TfparityError(f"seed must not be negative (got {self.seed}).")
        _positive(self.batch_size, "--batch-size")
        if self.random is not None:  # only random ids have a --seq-len to honour
            _positive(self.random, "--random")
            _positive(self.seq_len, "--seq-len")
        if self.padding_side not in (None, "right", "left"):
            raise TfparityError(
                f"padding_side must be 'right' or 'left', not {self.padding_side!r}."
            )


def check_input_arguments(*, texts: Any = None, inputs: Any = None, batches: Any = None) -> None:
    """The input arguments the API's check functions share, each None or: ``texts`` a
    sequence of texts, ``inputs`` an InputOptions, ``batches`` a non-empty sequence of
    Batch; a wrong type raises TypeError naming the parameter, before any model loads
    (:mod:`tfparity.validation`)."""
    from . import validation

    validation.texts(texts)
    validation.instance(inputs, InputOptions, "inputs", "an InputOptions")
    validation.sequence_of(batches, Batch, "batches")


def make_batches(side: Any, options: InputOptions) -> list[Batch]:
    """The batches ``options`` asks for, by the TF ``side``'s tokenizer, limits and pad
    token, each admitted by the side (:meth:`TFSideBase.admit`)."""
    limits, pad_token_id = side.limits, side.pad_token_id
    if options.random is not None:
        if limits.max_positions and options.seq_len > limits.max_positions:
            raise TfparityError(
                f"--seq-len {options.seq_len} is more than {limits.positions_text()}."
            )
        avoid = () if pad_token_id is None else (pad_token_id,)
        batches = random_batches(
            options.random,
            options.seq_len,
            limits.vocab_size,
            batch_size=options.batch_size,
            seed=options.seed,
            padding_side=options.padding_side or "right",
            avoid_ids=avoid,
        )
    else:
        texts = options.texts if options.texts is not None else DEFAULT_TEXTS
        if not texts:
            raise TfparityError("No texts given.")
        batches = text_batches(
            side.tokenizer,
            texts,
            batch_size=options.batch_size,
            padding_side=options.padding_side,
            max_positions=limits.max_positions,
            # the default texts are tfparity's, not the user's: cut to fit a short
            # limit (a static-shape export's), said in the report, rather than refused
            truncate=options.truncate or options.texts is None,
            positions_text=limits.positions_text() if limits.max_positions else None,
        )
    # checked by the side's own admit (its runs' one check) here, before PyTorch sees them
    for batch in batches:
        side.admit(batch)
    return batches


def available_inputs(batch: Batch, config: Any) -> dict[str, np.ndarray]:
    """The batch's tensors as int32 arrays, as a model of one's own is fed them (a TF
    callable, or a torch module as the reference): token types (zeros where the batch
    has none) where the config has a token-type table."""
    feed = {
        "input_ids": np.asarray(batch.input_ids, np.int32),
        "attention_mask": np.asarray(batch.attention_mask, np.int32),
    }
    if getattr(config, "type_vocab_size", 0):
        types = batch.token_type_ids
        feed["token_type_ids"] = np.asarray(
            np.zeros_like(feed["input_ids"]) if types is None else types, np.int32
        )
    if batch.position_ids is not None:
        feed["position_ids"] = np.asarray(batch.position_ids, np.int32)
    return feed
