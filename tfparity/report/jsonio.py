"""Write reports as JSON (the fields docs/design.md promises)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TextIO

from ..errors import TfparityError
from ..results import Report

# Where ``--json -`` writes: the real stdout, while the CLI sends the text report to
# stderr so that stdout holds nothing but the JSON (a pipe into jq must parse it).
_JSON_STDOUT: ContextVar[TextIO | None] = ContextVar("tfparity_json_stdout", default=None)


def json_stdout() -> TextIO:
    return _JSON_STDOUT.get() or sys.stdout


@contextlib.contextmanager
def json_on_stdout() -> Iterator[None]:
    """Inside the block, ``print`` goes to stderr and ``--json -`` to the real stdout."""
    token = _JSON_STDOUT.set(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _JSON_STDOUT.reset(token)


def reports_to_dict(reports: list[Report]) -> dict:
    """One report as itself; several as the first one's fields plus ``reports``.

    The top level always carries ``check``, ``model``, ``passed`` (all passed),
    ``comparisons`` (names prefixed ``check:``) and ``first_divergence`` (the first
    non-null one).
    """
    if len(reports) == 1:
        return reports[0].to_dict()
    parts = [r.to_dict() for r in reports]
    first = next((p["first_divergence"] for p in parts if p["first_divergence"]), None)
    return {
        "tfparity_version": parts[0]["tfparity_version"],
        "check": "+".join(p["check"] for p in parts),
        "model": parts[0]["model"],
        "passed": all(p["passed"] for p in parts),
        "comparisons": [
            {**c, "name": f"{p['check']}:{c['name']}"} for p in parts for c in p["comparisons"]
        ],
        "first_divergence": first,
        "reports": parts,
    }


def reports_from_dict(data: dict) -> list[Report]:
    """The reports a ``--json`` file holds (the inverse of :func:`reports_to_dict`):
    one, or each of ``reports`` where a command wrote several."""
    return [Report.from_dict(part) for part in data.get("reports", [data])]


def write_json(reports: list[Report], path: str | Path, *, top_level: Sequence[str] = ()) -> None:
    """Write ``reports``; ``top_level`` names ``details`` fields that a check's contract
    also puts at the top level of the file (they stay in ``details`` too)."""
    data = reports_to_dict(reports)
    details = data.get("details", {})
    data.update({key: details[key] for key in top_level if key in details})
    text = json.dumps(data, indent=2, allow_nan=False)
    if str(path) == "-":
        print(text, file=json_stdout(), flush=True)
        return
    try:
        Path(path).write_text(text + "\n")
    except OSError as exc:
        raise TfparityError(f"Cannot write the JSON report to {path}: {exc.strerror}.") from exc
