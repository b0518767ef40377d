"""Write reports as JSON (the fields docs/design.md promises)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..errors import TfparityError
from ..results import Report


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


def write_json(reports: list[Report], path: str | Path, *, top_level: Sequence[str] = ()) -> None:
    """Write ``reports``; ``top_level`` names ``details`` fields that a check's contract
    also puts at the top level of the file (they stay in ``details`` too)."""
    data = reports_to_dict(reports)
    details = data.get("details", {})
    data.update({key: details[key] for key in top_level if key in details})
    text = json.dumps(data, indent=2, allow_nan=False)
    try:
        Path(path).write_text(text + "\n")
    except OSError as exc:
        raise TfparityError(f"Cannot write the JSON report to {path}: {exc.strerror}.") from exc
