"""Write docs/keras-hub.md: keras-hub's Hugging Face converters cross-checked against
transformers (PyTorch) by tfparity, from real runs on the tiny models and MiniLM.

    python scripts/keras_hub_table.py            # tiny models + minilm, writes the page
    python scripts/keras_hub_table.py --check    # exit 1 when the page is stale (tiny rows)

The figures come from the machine that ran it; ``--check`` holds a re-run to the
stable columns exactly and the max abs diff to within DIFF_FACTOR (kernels differ).

``rows(specs)`` runs the cross-checks; tests call it on the tiny models.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "keras-hub.md"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

TINY = (
    "bert",
    "roberta",
    "xlm-roberta",
    "distilbert",
    "albert",
    "gpt2",
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
)
REAL = ("minilm",)
TABLE_START = "<!-- table: written by scripts/keras_hub_table.py -->"
TABLE_END = "<!-- end of table -->"
HEADER = (
    "| spec | keras-hub backbone | verdict | first divergence | max abs diff "
    "(last hidden state) | cause (tfparity's hint) |\n"
    "|---|---|---|---|---|---|\n"
)


def row(inner: str) -> dict:
    """One converter's verdict from a real cross-check of ``keras-hub:<inner>``."""
    from tfparity import InputOptions
    from tfparity.adapters.keras_hub.side import load_keras_hub
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.api import make_batches
    from tfparity.checks.crosscheck.check import crosscheck

    spec = f"keras-hub:{inner}"
    model = load_keras_hub(spec)
    batches = make_batches(model, InputOptions(random=6, seq_len=16, batch_size=3, seed=1))
    report = crosscheck(model, load_pt(inner), batches)
    d = report.first_divergence
    last = next(c for c in report.comparisons if c.name == "last_hidden_state")
    where = "-"
    if d is not None:
        comp = f", {d.component}" if d.component and d.component != d.layer else ""
        where = f"hidden_states[{d.hidden_state}], layer {d.layer}{comp}"
    return {
        "spec": spec,
        "backbone": type(model.backbone).__name__,
        "passed": report.passed,
        "where": where,
        "max_abs_diff": f"{last.max_abs_diff:.2g}",
        "hint": _short(d.hint) if d is not None else "",
        "localisation": "sub-layer" if model.localisable() else "layer",
    }


def _short(hint: str) -> str:
    # the rerun a known difference suggests (--pt-config) has its own section on the page
    first = hint.split("; to check the rest")[0].split("; tried")[0].split(" (tried")[0]
    return first.replace("|", "/")[:300]


def render_rows(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        verdict = "pass" if r["passed"] else "**FAIL**"
        cells = (
            f"`{r['spec']}`",
            r["backbone"],
            verdict,
            r["where"],
            r["max_abs_diff"],
            r["hint"] or "-",
        )
        lines.append("| " + " | ".join(cells) + " |")
    return HEADER + "\n".join(lines) + "\n"


# The columns a re-run must reproduce exactly on any machine; the max abs diff's last
# digits depend on the CPU's kernels, so it is held to within DIFF_FACTOR instead.
STABLE = ("spec", "backbone", "verdict", "where", "hint")
DIFF_FACTOR = 10.0


def parse_rows(table_text: str) -> dict[str, dict[str, str]]:
    """The table's rows by spec, as rendered cells (the inverse of render_rows)."""
    rows = {}
    for line in table_text.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        spec, backbone, verdict, where, diff, hint = cells
        rows[spec.strip("`")] = dict(
            spec=spec, backbone=backbone, verdict=verdict, where=where, diff=diff, hint=hint
        )
    return rows


def stale(fresh: dict[str, str], page: dict[str, str] | None) -> list[str]:
    """What in a freshly rendered row disagrees with the page's row (empty: up to date)."""
    if page is None:
        return [f"{fresh['spec']}: no row on the page"]
    out = [f"{c}: page {page[c]!r}, now {fresh[c]!r}" for c in STABLE if fresh[c] != page[c]]
    now, then = float(fresh["diff"]), float(page["diff"])
    if not (then / DIFF_FACTOR <= now <= then * DIFF_FACTOR or now == then):
        out.append(f"max abs diff: page {then:g}, now {now:g} (over {DIFF_FACTOR:g}x apart)")
    return [f"{fresh['spec']}: {line}" for line in out]


def table(specs: tuple[str, ...]) -> str:
    return render_rows([row(s) for s in specs])


def page_table() -> str:
    text = PAGE.read_text()
    return text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip("\n") + "\n"


def tiny_specs() -> tuple[str, ...]:
    return tuple(f"tiny:{t}" for t in TINY)


def write(text: str) -> None:
    page = PAGE.read_text()
    head, rest = page.split(TABLE_START, 1)
    tail = rest.split(TABLE_END, 1)[1]
    PAGE.write_text(f"{head}{TABLE_START}\n{text}{TABLE_END}{tail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the tiny rows are stale")
    args = parser.parse_args()
    if args.check:
        page = parse_rows(page_table())
        fresh = parse_rows(table(tiny_specs()))
        problems = [p for spec, row in fresh.items() for p in stale(row, page.get(spec))]
        for line in problems:
            print(f"stale or changed: {line}")
        return int(bool(problems))
    write(table(tiny_specs() + REAL))
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
