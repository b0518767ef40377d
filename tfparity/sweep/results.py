"""The sweep's output directory: ``run.json`` (what was run), ``results.jsonl`` (one
line per finished item, appended and flushed as it is made) and ``summary.json``.

Appending line by line means a killed sweep loses at most the line being written;
:func:`read_done` drops such a torn last line (truncating the file to the last whole
line) so that ``--resume`` redoes exactly the items that have no whole line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import TfparityError

RESULTS, MANIFEST, SUMMARY = "results.jsonl", "run.json", "summary.json"
# Manifest fields that must agree for a resume (and, but for the shard, for a merge).
IDENTITY = ("model", "reference", "checks", "corpus_sha256", "options")


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a temp file renamed over the target)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_manifest(out: Path) -> dict | None:
    path = out / MANIFEST
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TfparityError(f"{path} is not valid JSON ({exc}); is this a sweep output?") from exc


def identity(manifest: dict) -> dict:
    return {k: manifest.get(k) for k in IDENTITY}


def differences(a: dict, b: dict) -> list[str]:
    """Identity fields where two manifests differ, as readable phrases."""
    out = []
    for key in IDENTITY:
        if a.get(key) != b.get(key):
            out.append(f"{key} {json.dumps(a.get(key))} vs {json.dumps(b.get(key))}")
    return out


def read_done(path: Path, total: int) -> tuple[bytearray, int]:
    """Indices with a whole line in ``path`` (a bitmap of ``total`` bytes) and the count.

    A torn last line (no newline, or not JSON) is cut off the file; a bad line
    anywhere else means the file is not a sweep's output (exit 2).
    """
    done = bytearray(total)
    if not path.exists():
        return done, 0
    count, good_end, torn = 0, 0, None
    with open(path, "rb") as f:
        for number, (line, end) in enumerate(_lines_with_ends(f), 1):
            if torn is not None:  # a bad line followed by more lines
                raise TfparityError(f"{path} line {torn} is not a result line; cannot resume.")
            record = _parse(line)
            if record is None:
                torn = number  # fine only if it is the last line (cut below)
                continue
            index = record.get("index")
            if not isinstance(index, int) or not 0 <= index < total:
                raise TfparityError(f"{path} line {number} has no valid item index; cannot resume.")
            if not done[index]:
                done[index] = 1
                count += 1
            good_end = end
    if good_end != path.stat().st_size:
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return done, count


def _lines_with_ends(f) -> Iterator[tuple[bytes, int]]:
    pos = 0
    for line in f:
        pos += len(line)
        yield line, pos


def _parse(line: bytes) -> dict | None:
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def iter_results(path: Path) -> Iterator[dict]:
    """Whole result lines of ``path``, lazily (a torn last line is skipped)."""
    if not path.exists():
        return
    with open(path, "rb") as f:
        for line in f:
            record = _parse(line)
            if record is not None:
                yield record


@dataclass
class ResultsWriter:
    """Appends one JSON line per item and flushes it at once."""

    file: TextIO

    @classmethod
    def open(cls, path: Path) -> ResultsWriter:
        return cls(open(path, "a", encoding="utf-8"))

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()
