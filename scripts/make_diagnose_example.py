"""Write an ids/embeds .npy pair for ``tfparity diagnose``: the classic mistake, or
another tensor a pipeline takes by mistake.

The default embeds are ``hidden_states[0]`` of the model (word + position + token
type, after the embedding LayerNorm) instead of the raw word embeddings; ``--correct``
writes the right tensor (the word-embedding matrix gathered by the ids); ``--case``
writes one of the other mistakes tfparity names:

    last-hidden-state    the model's last_hidden_state
    pair-without-types   a sentence pair's hidden_states[0]; no types.npy is written
    permuted             the word embeddings with the rows in another order
    left-padded          the word embeddings gathered from a left-padded batch
    float16              the word embeddings rounded through float16

    python scripts/make_diagnose_example.py minilm /tmp/diag
    tfparity diagnose minilm --ids /tmp/diag/ids.npy --embeds /tmp/diag/embeds.npy \
        --attention-mask /tmp/diag/mask.npy --token-type-ids /tmp/diag/types.npy
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

CASES = (
    "hidden-states-0",
    "correct",
    "last-hidden-state",
    "pair-without-types",
    "permuted",
    "left-padded",
    "float16",
)
PAIRS = (
    ("How old are you?", "I am six."),
    ("Where is the station?", "It is near the river, past the old bridge."),
)


def _pair_batch(model):
    from tfparity.inputs import Batch

    enc = model.tokenizer([p[0] for p in PAIRS], [p[1] for p in PAIRS], padding=True)
    ids, mask, types = (np.array(enc[k]) for k in ("input_ids", "attention_mask", "token_type_ids"))
    return Batch(input_ids=ids, attention_mask=mask, token_type_ids=types)


def _left_padded(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The same right-padded rows with their padding moved to the left."""
    return np.stack(
        [np.roll(row, len(row) - int(n)) for row, n in zip(ids, mask.sum(axis=1), strict=True)]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="minilm")
    parser.add_argument("out", nargs="?", default="diagnose_example")
    parser.add_argument("--correct", action="store_true", help="write the correct embeddings")
    parser.add_argument("--case", choices=CASES, default="hidden-states-0")
    args = parser.parse_args()
    case = "correct" if args.correct else args.case

    from tfparity.api import load_model, make_batches

    model = load_model(args.model)
    batch = _pair_batch(model) if case == "pair-without-types" else make_batches(model)[0]
    word = model.word_matrix()
    if case == "correct":
        embeds = np.asarray(model.gather(batch.input_ids))
    elif case in ("hidden-states-0", "pair-without-types"):
        embeds = model.run(batch)["hidden_states[0]"]
    elif case == "last-hidden-state":
        embeds = model.run(batch)["last_hidden_state"]
    elif case == "permuted":
        embeds = word[batch.input_ids][np.roll(np.arange(len(batch.input_ids)), 1)]
    elif case == "left-padded":
        embeds = word[_left_padded(batch.input_ids, batch.attention_mask)]
    else:
        embeds = word[batch.input_ids].astype(np.float16).astype(np.float32)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "ids.npy", batch.input_ids)
    np.save(out / "embeds.npy", embeds)
    np.save(out / "mask.npy", batch.attention_mask)
    if batch.token_type_ids is not None and case != "pair-without-types":
        np.save(out / "types.npy", batch.token_type_ids)
    print(f"wrote {', '.join(sorted(p.name for p in out.glob('*.npy')))} to {out}")


if __name__ == "__main__":
    main()
