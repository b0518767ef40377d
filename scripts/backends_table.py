"""Write docs/backends.md's keras-hub families table from real ``tfparity backends`` runs.

    python scripts/backends_table.py                    # every family, writes the page
    python scripts/backends_table.py --families llama   # some families (their rows only)
    python scripts/backends_table.py --json runs.json   # also keep the runs' facts
    python scripts/backends_table.py --from-json runs.json   # rewrite from kept facts

Every family of docs/keras-hub.md's table (scripts/keras_hub_table.py's ``TINY``): its
tiny checkpoint, converted by keras-hub, on every installed backend, float
(``backends keras-hub:tiny:<family> --random 2 --seq-len 8``) and ``--quantize int8``.
The runs share one set of warm backend processes. The figures come from the machine
that ran it (float32 rounding depends on its kernels); the verdicts should not.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "backends.md"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TABLE_START = "<!-- table: written by scripts/backends_table.py -->"
TABLE_END = "<!-- end of table -->"
HEADER = (
    "| family | backends, float | largest vs Keras float64 | HF | largest vs HF float64 "
    "| `--quantize int8` | float64 run |\n"
    "|---|---|---|---|---|---|---|\n"
)


def families() -> tuple[str, ...]:
    from keras_hub_table import TINY  # the families docs/keras-hub.md checks

    return TINY


def _largest(rows: list[dict[str, Any]]) -> float | None:
    values = [
        c["relative_rmse"]
        for r in rows
        for c in r["backends"].values()
        if c.get("relative_rmse") is not None
    ]
    return max(values, default=None)


def _failed(error: Exception) -> dict[str, Any]:
    return {"error": " ".join(str(error).split())}


def float_facts(family: str, workers: Any) -> dict[str, Any]:
    """One float run's facts: verdicts, first divergences, the largest errors, notes."""
    import tfparity
    from tfparity.errors import TfparityError

    try:
        report = tfparity.backends(f"keras-hub:tiny:{family}", workers=workers)
    except TfparityError as e:
        return _failed(e)
    d = report.details
    rows = d["layers"]
    hf = d.get("hf_referee") or {}
    return {
        "backends": d["backends"],
        "keras_passed": all(c["passed"] for r in rows for c in r["backends"].values()),
        "keras_first": d["first_divergence"],
        "keras_largest": _largest(rows),
        "hf_passed": hf.get("first_divergence") is None if hf else None,
        "hf_first": hf.get("first_divergence"),
        "hf_largest": _largest(hf.get("layers", [])),
        "notes": report.notes,
        "passed": report.passed,
    }


def int8_facts(family: str, workers: Any) -> dict[str, Any]:
    """One ``--quantize int8`` run's verdict and first divergence (or its exit-2 reason)."""
    import tfparity
    from tfparity.errors import TfparityError

    try:
        report = tfparity.backends(f"keras-hub:tiny:{family}", quantize="int8", workers=workers)
    except TfparityError as e:
        return _failed(e)
    first = report.first_divergence
    return {"passed": report.passed, "first": first.hint if first is not None else None}


def _where(first: dict[str, Any] | None) -> str:
    if not first:
        return ""
    who = first.get("backend") or "all backends alike"
    return f" at {first['layer']} ({who})"


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def _float64_cell(notes: list[str]) -> str:
    widened = [n for n in notes if n.startswith("the float64 referee computed at float64")]
    unjudged = [n for n in notes if n.startswith("not judged")]
    cell = "fixed float32 casts widened" if widened else "as saved"
    return cell + (f"; {len(unjudged)} not judged" if unjudged else "")


def render_row(family: str, facts: dict[str, Any]) -> str:
    run, int8 = facts["float"], facts["int8"]
    if "error" in int8:
        quantised = f"exit 2: {int8['error'][:160]}"
    else:
        quantised = "agree" if int8["passed"] else f"**FAIL**: {(int8['first'] or '')[:160]}"
    if "error" in run:
        cells = [family, f"exit 2: {run['error'][:200]}", "-", "-", "-", quantised, "-"]
    else:
        keras = "agree" if run["keras_passed"] else f"**parts**{_where(run['keras_first'])}"
        if run["hf_passed"] is None:
            hf = "-"
        else:
            hf = "agree" if run["hf_passed"] else f"**parts**{_where(run['hf_first'])}"
        cells = [
            family,
            keras,
            _figure(run["keras_largest"]),
            hf,
            _figure(run["hf_largest"]),
            quantised,
            _float64_cell(run["notes"]),
        ]
    return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"


def render(runs: dict[str, dict[str, Any]]) -> str:
    return HEADER + "\n".join(render_row(f, runs[f]) for f in runs) + "\n"


def write(runs: dict[str, dict[str, Any]]) -> None:
    """Put the rows of ``runs`` on the page; a family not run keeps its row."""
    page = PAGE.read_text()
    head, rest = page.split(TABLE_START, 1)
    old, tail = rest.split(TABLE_END, 1)
    kept = {
        line.split("|")[1].strip(): line
        for line in old.strip().splitlines()[2:]
        if line.startswith("|")
    }
    rows = {f: render_row(f, runs[f]) if f in runs else kept.get(f) for f in families()}
    body = HEADER + "\n".join(r for r in rows.values() if r) + "\n"
    PAGE.write_text(f"{head}{TABLE_START}\n{body}{TABLE_END}{tail}")


def run_all(names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    from tfparity import BackendWorkers

    runs = {}
    with BackendWorkers() as workers:
        for family in names:
            runs[family] = {
                "float": float_facts(family, workers),
                "int8": int8_facts(family, workers),
            }
            print(render_row(family, runs[family]), flush=True)
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", help="comma-separated (default: every one)")
    parser.add_argument("--json", help="also write the runs' facts here")
    parser.add_argument("--from-json", help="write the page from facts kept by --json")
    args = parser.parse_args()
    if args.from_json:
        runs = json.loads(Path(args.from_json).read_text())
    else:
        names = tuple(args.families.split(",")) if args.families else families()
        runs = run_all(names)
        if args.json:
            Path(args.json).write_text(json.dumps(runs, indent=1, default=str))
    write(runs)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
