"""Merging shard outputs: the union of their result lines, summarised by the same
function as a sweep, so N merged shards give the unsharded run's summary."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import TfparityError
from .corpus import parse_shard
from .results import (
    MANIFEST,
    RESULTS,
    SUMMARY,
    ResultsWriter,
    differences,
    iter_results,
    read_manifest,
    write_json,
)
from .summary import WORST, summarise


def merge_dirs(dirs: Sequence[str | Path], out: str | Path, *, worst: int = WORST) -> dict:
    """Combine sweep outputs of one model, checks and corpus into ``out``.

    Shards must be of one run (same identity: model, checks, corpus hash, options) and
    distinct; a missing shard leaves the summary ``complete: false``.
    """
    dirs = [Path(d) for d in dirs]
    if not dirs:
        raise TfparityError("Give at least one sweep output directory to merge.")
    manifests = [_manifest(d) for d in dirs]
    first = manifests[0]
    for d, m in zip(dirs[1:], manifests[1:], strict=True):
        diff = differences(first, m)
        if diff:
            raise TfparityError(
                f"{d} is not a shard of the same sweep as {dirs[0]}: {'; '.join(diff)}."
            )
    shards = [parse_shard(m.get("shard", "0/1")) for m in manifests]
    if len({s.n for s in shards}) != 1 or len(set(shards)) != len(shards):
        raise TfparityError(
            "The directories must hold distinct shards of one split (e.g. 0/2 and 1/2); got "
            + ", ".join(str(s) for s in shards)
            + "."
        )
    out = Path(out)
    if out.resolve() in {d.resolve() for d in dirs}:
        raise TfparityError("--out must be a new directory, not one of the inputs.")
    if out.exists() and not out.is_dir():
        raise TfparityError(f"--out {out} exists and is not a directory.")
    total = first["corpus"]["items"]
    if not isinstance(total, int) or total < 1:
        raise TfparityError(f"{dirs[0]}/{MANIFEST} has no valid corpus item count.")
    seen = bytearray(total)
    for d, shard in zip(dirs, shards, strict=True):  # all of it before anything is written
        _validate(d / RESULTS, shard, seen)
    out.mkdir(parents=True, exist_ok=True)
    if (out / RESULTS).exists() and (out / RESULTS).stat().st_size:
        raise TfparityError(f"{out} already holds {RESULTS}; choose an empty --out.")
    n = shards[0].n
    expected = sum(s.size(total) for s in shards)
    manifest = {
        **first,
        "shard": "merged " + ",".join(str(s) for s in sorted(shards, key=lambda s: s.k)),
    }
    write_json(out / MANIFEST, manifest)
    writer = ResultsWriter.open(out / RESULTS)
    try:
        for line in _lines(dirs):
            writer.write(line)
    finally:
        writer.close()
    summary = summarise(iter_results(out / RESULTS), manifest, expected_items=total, worst=worst)
    summary["run"] = {
        "merged_from": [str(d) for d in dirs],
        "shards": [str(s) for s in shards],
        "all_shards": len(shards) == n,
        "shard_items_expected": expected,
        "seconds": round(sum(_run_field(d, "seconds") for d in dirs), 3),
        "traces": int(sum(_run_field(d, "traces") for d in dirs)),
    }
    write_json(out / SUMMARY, summary)
    return summary


def _manifest(d: Path) -> dict:
    if not d.is_dir():
        raise TfparityError(f"{d} is not a directory.")
    m = read_manifest(d)
    if m is None or not (d / RESULTS).exists():
        raise TfparityError(f"{d} is not a sweep output (no {MANIFEST} and {RESULTS}).")
    return m


def _validate(path: Path, shard, seen: bytearray) -> None:
    """Every line of a shard's results must be whole JSON with an index of this corpus
    and of this shard, and no index may come twice (in one shard or across shards), as
    ``--resume`` checks: merge used to drop torn lines silently and count repeats twice.
    """
    import json

    total = len(seen)
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                raise TfparityError(
                    f"{path} line {number} is cut off (an interrupted sweep?): finish that "
                    "shard with `tfparity sweep ... --resume` before merging."
                )
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                raise TfparityError(f"{path} line {number} is not a sweep result line (JSON).")
            index = record.get("index")
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < total:
                raise TfparityError(
                    f"{path} line {number} has item index {index!r}, outside the corpus's "
                    f"{total} items: not a result of this sweep."
                )
            if index not in shard:
                raise TfparityError(
                    f"{path} line {number} holds item {index}, which is not in shard {shard}."
                )
            if seen[index]:
                raise TfparityError(
                    f"{path} line {number} repeats item {index}, already merged: the results "
                    "would count it twice."
                )
            seen[index] = 1


def _lines(dirs: list[Path]) -> Iterator[dict]:
    for d in dirs:
        yield from iter_results(d / RESULTS)


def _run_field(d: Path, key: str) -> float:
    import json

    path = d / SUMMARY
    if not path.exists():
        return 0.0
    try:
        value = json.loads(path.read_text()).get("run", {}).get(key)
    except ValueError:
        return 0.0
    return float(value or 0.0)
