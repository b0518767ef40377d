"""Write an ids/embeds .npy pair for ``tfparity diagnose``: the classic mistake.

The embeds are ``hidden_states[0]`` of the model (word + position + token type, after
the embedding LayerNorm) instead of the raw word embeddings; ``--correct`` writes the
right tensor (the word-embedding matrix gathered by the ids) instead.

    python scripts/make_diagnose_example.py minilm /tmp/diag
    tfparity diagnose minilm --ids /tmp/diag/ids.npy --embeds /tmp/diag/embeds.npy \
        --attention-mask /tmp/diag/mask.npy --token-type-ids /tmp/diag/types.npy
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="minilm")
    parser.add_argument("out", nargs="?", default="diagnose_example")
    parser.add_argument("--correct", action="store_true", help="write the correct embeddings")
    args = parser.parse_args()

    from tfparity.api import load_model, make_batches

    model = load_model(args.model)
    batch = make_batches(model)[0]
    if args.correct:
        embeds = np.asarray(model.gather(batch.input_ids))
    else:
        embeds = model.run(batch)["hidden_states[0]"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "ids.npy", batch.input_ids)
    np.save(out / "embeds.npy", embeds)
    np.save(out / "mask.npy", batch.attention_mask)
    if batch.token_type_ids is not None:
        np.save(out / "types.npy", batch.token_type_ids)
    print(f"wrote {', '.join(sorted(p.name for p in out.glob('*.npy')))} to {out}")


if __name__ == "__main__":
    main()
