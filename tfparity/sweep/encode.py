"""Tokenizing corpus items in chunks (the fast tokenizer is much quicker on a list
than one text at a time), unpadded: padding is the bucketer's job."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from ..errors import TfparityError
from .bucketing import Encoded
from .corpus import Item

CHUNK = 256


@dataclass(frozen=True)
class TooLong:
    """An item longer than the model's positions (and ``--truncate`` not given)."""

    item: Item
    tokens: int
    limit: int
    new_tokens: int = 0  # --generate's new tokens, which ``limit`` leaves room for

    @property
    def reason(self) -> str:
        if self.new_tokens:
            return (
                f"{self.tokens} tokens, and with {self.new_tokens} new tokens more than the "
                f"model's {self.limit + self.new_tokens} positions (pass --truncate to cut "
                f"it to {self.limit})"
            )
        return (
            f"{self.tokens} tokens, more than the model's {self.limit} positions "
            "(pass --truncate to cut it)"
        )


def encode(
    tokenizer: Any,
    items: Iterable[Item],
    *,
    limit: int | None,
    truncate: bool,
    new_tokens: int = 0,
) -> Iterator[Encoded | TooLong]:
    """Encoded items (or TooLong), in the order given; ``limit``: the longest item (for
    ``--generate``, the model's positions less ``new_tokens``)."""
    if tokenizer is None:
        raise TfparityError("This model has no tokenizer, so it cannot run over a text corpus.")
    it = iter(items)
    while chunk := list(islice(it, CHUNK)):
        enc = tokenizer(
            [item.text for item in chunk],
            padding=False,
            truncation=bool(truncate and limit),
            max_length=limit if truncate else None,
        )
        types = enc.get("token_type_ids")
        for row, item in enumerate(chunk):
            ids = np.asarray(enc["input_ids"][row], np.int32)
            if limit and len(ids) > limit:
                yield TooLong(item, len(ids), limit, new_tokens)
                continue
            tt = None if types is None else np.asarray(types[row], np.int32)
            yield Encoded(item, ids, tt)
