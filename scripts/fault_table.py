"""Print the cross-check's detection table for the fault catalogue (tfparity.testing).

    python scripts/fault_table.py [MODEL ...]

(default: tiny:bert minilm tiny:distilbert tiny:gpt2 tiny:albert)

For each fault: verdict, where the first divergence was localised, whether that is
where the catalogue expects it, and the referee figures at that hidden state (TF's RMSE
to PyTorch float64 against the allowed RMSE).
"""

from __future__ import annotations

import sys


def main(models: list[str]) -> int:
    from tfparity.adapters.hf_tf.tf_model import TFModel
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.api import make_batches
    from tfparity.checks.crosscheck.check import crosscheck
    from tfparity.testing import catalogue_for

    misses = 0
    for spec in models:
        reference = TFModel.load(spec)
        pt_model = load_pt(spec)
        batches = make_batches(reference)
        print(f"\n{spec}")
        print(f"{'fault':36} {'verdict':7} {'localised to':32} {'expected':8} {'TF rmse':>9}")
        for fault in catalogue_for(reference.model_type):
            broken = fault.apply(TFModel.load(spec))
            report = crosscheck(broken, pt_model, batches)
            d = report.first_divergence
            where = "-" if d is None else f"hs {d.hidden_state} / {d.layer} / {d.component}"
            expected = d is not None and (d.hidden_state, d.layer, d.component) == (
                fault.expect.hidden_state,
                fault.expect.layer,
                fault.expect.component,
            )
            rows = {r["hidden_state"]: r for r in report.details["layers"]}
            row = rows.get(d.hidden_state) if d is not None else None
            rmse = f"{row['rmse_vs_fp64']:.2e}" if row and row["rmse_vs_fp64"] else "-"
            verdict = "PASS" if report.passed else "FAIL"
            if report.passed and not _changes_anything(reference, broken):
                verdict, expected = "PASS", True  # a no-op here, e.g. a bias already zero
                where = "(no-op: nothing changed)"
            misses += not expected
            print(
                f"{fault.name:36} {verdict:7} {where:32} {'yes' if expected else 'NO':8} {rmse:>9}"
            )
    return 1 if misses else 0


def _changes_anything(reference, broken) -> bool:
    import numpy as np

    if reference.config.to_dict() != broken.config.to_dict():
        return True
    pairs = zip(reference.model.weights, broken.model.weights, strict=True)
    return any(not np.array_equal(a.numpy(), b.numpy()) for a, b in pairs) or any(
        getattr(a, "sqrt_att_head_size", None) != getattr(b, "sqrt_att_head_size", None)
        for a, b in zip(reference.model.submodules, broken.model.submodules, strict=False)
    )


if __name__ == "__main__":
    default = ["tiny:bert", "minilm", "tiny:distilbert", "tiny:gpt2", "tiny:albert"]
    sys.exit(main(sys.argv[1:] or default))
