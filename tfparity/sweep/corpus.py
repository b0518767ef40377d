"""Reading a corpus lazily: plain text (one item per line) or JSONL (a ``text`` field
and an optional ``id``), one shard of it, without holding it in memory.

An item's *index* is its position among the corpus's items (blank lines in a text
file are not items). Indices, not ids, key results: they are unique by construction,
decide the shard (index modulo N), and let resume mark finished items in a bitmap of
one byte per item, so memory stays flat in the corpus size.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import TfparityError
from ..validation import unicode_text

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus.txt"
_SHARD = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class Item:
    """One corpus entry: ``index`` (0-based, among items), the user's ``id`` (the index
    as a string when the corpus gives none) and the text."""

    index: int
    id: str
    text: str


@dataclass(frozen=True)
class Shard:
    """Shard ``k`` of ``n``: the items whose index modulo ``n`` is ``k``."""

    k: int = 0
    n: int = 1

    def __contains__(self, index: int) -> bool:
        return index % self.n == self.k

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"

    def size(self, total: int) -> int:
        """How many of ``total`` items fall in this shard."""
        return len(range(self.k, total, self.n))


def parse_shard(text: str) -> Shard:
    m = _SHARD.match(text.strip())
    if not m or int(m.group(2)) < 1 or int(m.group(1)) >= int(m.group(2)):
        raise TfparityError(
            f"--shard must be K/N with 0 <= K < N (e.g. 0/4 for the first of four shards); "
            f"got '{text}'."
        )
    return Shard(int(m.group(1)), int(m.group(2)))


@dataclass(frozen=True)
class CorpusInfo:
    """What one validating pass over the file found (the file is not kept)."""

    path: str
    format: str  # "txt" or "jsonl"
    items: int
    sha256: str

    def to_dict(self) -> dict:
        """For reports: the path as the user gave it; the built-in corpus by its name in
        the package, not by where the package is installed."""
        builtin = Path(self.path).resolve() == DEFAULT_CORPUS
        return {
            "path": "tfparity/data/corpus.txt (built in)" if builtin else self.path,
            "format": self.format,
            "items": self.items,
            "sha256": self.sha256,
        }


def detect_format(path: Path) -> str:
    """``jsonl`` for ``*.jsonl``/``*.json`` files, or when the first non-blank line is a
    JSON object; ``txt`` otherwise."""
    if path.suffix.lower() in (".jsonl", ".json"):
        return "jsonl"
    for _, line in _lines(path):
        if line.strip():
            return "jsonl" if line.lstrip().startswith("{") and _is_object(line) else "txt"
    return "txt"


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def scan(path: str | Path) -> CorpusInfo:
    """Validate the whole corpus and count its items, streaming (one line at a time):
    bad input is reported before any model work, and the count gives the progress ETA."""
    path = Path(path)
    fmt = detect_format(path)
    digest = hashlib.sha256()
    count = 0
    with open(path, "rb") as raw:
        for block in iter(lambda: raw.read(1 << 20), b""):
            digest.update(block)
    for _ in _items(path, fmt):
        count += 1
    if count == 0:
        raise TfparityError(f"The corpus {path} holds no text (empty, or only blank lines).")
    return CorpusInfo(str(path), fmt, count, digest.hexdigest())


def iter_items(info: CorpusInfo, shard: Shard = Shard()) -> Iterator[Item]:
    """The items of ``shard``, in corpus order, read lazily."""
    for item in _items(Path(info.path), info.format):
        if item.index in shard:
            yield item


def _items(path: Path, fmt: str) -> Iterator[Item]:
    index = 0
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        if fmt == "jsonl":
            text, item_id = _json_item(path, lineno, line)
        else:
            text, item_id = line.rstrip("\r\n"), None
        yield Item(index, str(index) if item_id is None else item_id, text)
        index += 1


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)``, each line decoded on its own, so that a byte that is not
    UTF-8 is refused with its line number by :func:`scan`, before any model work (it
    used to end a sweep thousands of items in, and every ``--resume`` after it)."""
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise TfparityError(f"Cannot read the corpus {path}: {exc.strerror}.") from exc
    with raw:
        for lineno, data in enumerate(raw, 1):
            try:
                yield lineno, data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise TfparityError(
                    f"{path} line {lineno} is not UTF-8 text (byte 0x{data[exc.start]:02x} at "
                    f"column {exc.start + 1}); is it a binary file? Save the corpus as UTF-8."
                ) from None


def _json_item(path: Path, lineno: int, line: str) -> tuple[str, str | None]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise TfparityError(f"{path} line {lineno} is not valid JSON: {exc}.") from exc
    text = record.get("text") if isinstance(record, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise TfparityError(
            f'{path} line {lineno} has no "text" field with a non-empty string; each JSONL line '
            'needs {"text": "...", "id": ...} (id optional).'
        )
    unicode_text(text, f'{path} line {lineno}: "text"')
    item_id = record.get("id")
    return text, None if item_id is None else str(item_id)


def check_shard(shard: Shard, info: CorpusInfo) -> None:
    """A shard that holds no item would finish at once with nothing checked: refuse it."""
    if shard.size(info.items) == 0:
        raise TfparityError(
            f"Shard {shard} of the corpus {info.path} holds no item: the corpus has only "
            f"{info.items} item(s), so with N={shard.n} shards K must be below {info.items}. "
            "Nothing would be checked; use fewer shards."
        )
