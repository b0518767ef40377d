"""Length bucketing: items of similar length share a batch, which cuts padding.

Items are grouped by bucket (8, 16, 32, ... tokens, capped at the model's maximum) and
every batch is as long as its bucket, so an item always runs at the same length: its
numbers depend neither on which items share its batch nor on the batch size (a shard
run with another batch size merges into exactly the unsharded summary; the padded
length, unlike the batch dimension, changes a row's rounding). Without ``fixed_shapes``
(eager, and graph mode, whose one trace takes any shape) a batch holds only its real
rows. With it (XLA, which compiles once per input shape) every batch is also
``batch_size`` rows, the last batch of a bucket filled with dummy rows (one real
token, masked everywhere else) that are dropped from the results.

With ``exact_lengths`` (a side that cannot mask padding: an export's signature without
an attention mask) each length is a bucket of its own, so no batch holds padding.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..inputs import Batch
from .corpus import Item

FIRST_BUCKET = 8


def bucket_length(n_tokens: int, limit: int | None) -> int:
    """The smallest power of two >= ``n_tokens`` (at least 8), capped at ``limit``."""
    length = FIRST_BUCKET
    while length < n_tokens:
        length *= 2
    return min(length, limit) if limit else length


def bucket_lengths(limit: int | None, longest: int = 512) -> list[int]:
    """All buckets a sweep can use (for a trace budget): 8, 16, ... up to the limit."""
    top = limit or longest
    out, length = [], FIRST_BUCKET
    while True:
        out.append(min(length, top))
        if length >= top:
            return out
        length *= 2


@dataclass(frozen=True)
class Encoded:
    """An item with its token ids (unpadded) and token type ids."""

    item: Item
    ids: np.ndarray
    type_ids: np.ndarray | None


@dataclass(frozen=True)
class PaddedBatch:
    """A batch and the items of its first ``len(items)`` rows (any further rows are
    dummy rows of a fixed-shape batch)."""

    batch: Batch
    items: list[Item]
    bucket: int

    @property
    def real_rows(self) -> int:
        return len(self.items)


@dataclass
class Bucketer:
    """Collects encoded items per bucket and hands out full (then, at the end, partly
    filled) batches; ``fixed_shapes``: every batch ``batch_size`` x bucket length."""

    batch_size: int
    limit: int | None
    pad_id: int
    padding_side: str = "right"
    with_types: bool = True
    fixed_shapes: bool = False
    exact_lengths: bool = False
    _pending: dict[int, list[Encoded]] = field(default_factory=dict)

    def add(self, encoded: Encoded) -> Iterator[PaddedBatch]:
        n = len(encoded.ids)
        bucket = n if self.exact_lengths else bucket_length(n, self.limit)
        waiting = self._pending.setdefault(bucket, [])
        waiting.append(encoded)
        if len(waiting) == self.batch_size:
            del self._pending[bucket]
            yield self._pad(bucket, waiting)

    def flush(self) -> Iterator[PaddedBatch]:
        for bucket in sorted(self._pending):
            yield self._pad(bucket, self._pending[bucket])
        self._pending.clear()

    def batches(self, encoded: Iterable[Encoded]) -> Iterator[PaddedBatch]:
        for e in encoded:
            yield from self.add(e)
        yield from self.flush()

    def _pad(self, bucket: int, rows: list[Encoded]) -> PaddedBatch:
        height, length = (self.batch_size if self.fixed_shapes else len(rows)), bucket
        ids = np.full((height, length), self.pad_id, np.int32)
        mask = np.zeros((height, length), np.int32)
        types = np.zeros((height, length), np.int32)
        for r, e in enumerate(rows):
            n = len(e.ids)
            cols = slice(length - n, length) if self.padding_side == "left" else slice(0, n)
            ids[r, cols] = e.ids
            mask[r, cols] = 1
            if e.type_ids is not None:
                types[r, cols] = e.type_ids
        # Dummy rows: one real token each, so no row is fully masked.
        dummy_col = length - 1 if self.padding_side == "left" else 0
        mask[len(rows) :, dummy_col] = 1
        batch = Batch(ids, mask, types if self.with_types else None)
        return PaddedBatch(batch, [e.item for e in rows], bucket)
