"""Measure the per-layer error growth of Keras quantisation, clean and damaged: the
evidence for the growth budget of ``crosscheck --quantize`` (docs/quantised.md,
"Budgets that see one damaged layer").

    python scripts/quantised_growth.py [MODEL ...] [--modes int8,int4,float8]
        [--factors 1.05,1.5,50]

(default: keras-hub:tiny:bert keras-hub:tiny:gpt2 keras-hub:tiny:llama
keras-hub:tiny:qwen2 keras-hub:minilm)

For each model and mode: a clean quantised copy's largest growth (how many times its
input's relative error a block's output has) over the blocks, and the embeddings'
relative error; then, for each factor, a copy with one block's feed-forward output
``kernel_scale`` multiplied by it, and that block's growth. One row per case.
"""

from __future__ import annotations

import argparse

DEFAULT_MODELS = [
    "keras-hub:tiny:bert",
    "keras-hub:tiny:gpt2",
    "keras-hub:tiny:llama",
    "keras-hub:tiny:qwen2",
    "keras-hub:minilm",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    parser.add_argument("--modes", default="int8,int4,float8")
    parser.add_argument("--factors", default="1.05,1.5,50")
    args = parser.parse_args()
    from tfparity.adapters.keras_hub.quantised_side import quantised_side
    from tfparity.api import load_model, make_batches
    from tfparity.checks.crosscheck.budgeted import growth
    from tfparity.testing import quantised_ffn_scale, scale_variable

    factors = [float(f) for f in args.factors.split(",")]
    print(
        f"{'model':24} {'mode':6} {'damage':8} {'block':>5} {'its growth':>10} "
        f"{'max clean growth':>16} {'embeddings error':>16}"
    )
    for spec in args.models:
        side = load_model(spec)
        batches = make_batches(side)
        masks = [b.attention_mask for b in batches]
        floats = [side.run(b) for b in batches]
        for mode in args.modes.split(","):
            copy = quantised_side(side, mode)
            rows = growth([copy.run(b) for b in batches], floats, masks)
            blocks = [r for r in rows if r.growth is not None]
            worst = max(blocks, key=lambda r: r.growth)
            print(
                f"{spec:24} {mode:6} {'clean':8} {worst.layer:>5} {worst.growth:>10.3g} "
                f"{worst.growth:>16.3g} {rows[0].relative_error:>16.3g}  {_rows(rows)}",
                flush=True,
            )
            # the middle block of those fed some error (float8 leaves the embeddings
            # float, so block 0 grows from nothing there)
            target = blocks[len(blocks) // 2].layer
            for factor in factors:
                copy = quantised_side(side, mode)
                path = quantised_ffn_scale(copy.model, target)
                scale_variable(copy.model, path, factor)
                rows = growth([copy.run(b) for b in batches], floats, masks)
                hit = rows[target + 1]
                others = max((r.growth for r in rows if r.growth and r is not hit), default=0)
                grew = "-" if hit.growth is None else f"{hit.growth:.3g}"
                print(
                    f"{spec:24} {mode:6} x{factor:<7g} {target:>5} {grew:>10} "
                    f"{others:>16.3g} {'':>16}  {_rows(rows)}",
                    flush=True,
                )
    return 0


def _rows(rows) -> str:
    """Every hidden state's relative error, what its layer added and its growth."""
    return " ".join(
        f"{r.layer}:{r.relative_error:.3g}/{r.added:+.3g}/x{r.growth or 0:.3g}" for r in rows
    )


if __name__ == "__main__":
    raise SystemExit(main())
