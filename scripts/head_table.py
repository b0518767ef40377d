"""Measure every (architecture, head) pair: the clean tiny port and one whose last head
weight is off by 0.01, both cross-checked against PyTorch.

    python scripts/head_table.py              # all registered architectures (~15 min)
    python scripts/head_table.py bert gpt2    # some of them

Prints a markdown table: per pair, whether transformers has both classes, the clean
verdict with the task-level agreement, and the broken port's verdict with where it was
localised. A measurement for the docs and the issue notes, not a test: CI runs the pairs
in tests/architectures/test_heads.py.
"""

from __future__ import annotations

import sys
import time

from tfparity.architectures import registry
from tfparity.architectures.heads import UNSUPPORTED, Head
from tfparity.errors import TfparityError
from tfparity.inputs import InputOptions

HEADS = [h for h in Head if h is not Head.BASE and h not in UNSUPPORTED]
INPUTS = InputOptions(random=2, seq_len=8)


def measure(model_type: str, head: Head) -> tuple[str, str, str]:
    """(clean, broken, seconds) cells for one pair; 'no class' where there is none."""
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.api import crosscheck

    spec = f"tiny:{model_type}/{head.value}"
    try:
        tf_model, pt_model = TFModel.load(spec), load_pt(spec)
    except TfparityError as exc:
        return "no class", " ".join(str(exc).split())[:60], ""

    def run() -> object:
        (r,) = crosscheck(tf_model, pt=pt_model, inputs=INPUTS, reload=False)
        return r

    try:
        clean = run()
    except TfparityError as exc:  # e.g. a head that refuses random ids
        return "exit 2", " ".join(str(exc).split())[:120], ""
    agree = "; ".join(
        f"{a['measure']} {a['agree']}/{a['total']}" for a in clean.details["agreement"]
    )
    cell = f"{'PASS' if clean.passed else 'FAIL'} ({agree or 'no agreement measure'})"
    body = f"/{tf_model.model.base_model_prefix}/"  # the base model's scope
    head_weights = [v for v in tf_model.model.trainable_weights if body not in v.name]
    if not head_weights:
        return cell, "no head weight of its own", ""
    weight = head_weights[-1]
    weight.assign(weight + 0.01)
    broken = run()
    d = broken.first_divergence
    where = (
        "-" if d is None else f"{d.layer}" + (f", {d.hint.split(';')[0][:70]}" if d.hint else "")
    )
    return cell, f"{'PASS' if broken.passed else 'FAIL'} at {where} ({weight.name})", ""


def main(types: list[str]) -> int:
    rows = ["| model type | head | clean | head weight +0.01 |", "|---|---|---|---|"]
    for arch in registry().values():
        if arch.tf_class is None or (types and arch.model_type not in types):
            continue
        for head in HEADS:
            start = time.perf_counter()
            clean, broken, _ = measure(arch.model_type, head)
            if clean == "no class":
                continue
            rows.append(f"| {arch.model_type} | {head.value} | {clean} | {broken} |")
            print(rows[-1], f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
