"""(h) gradients: `tfparity gradients` against the bare backward passes it needs,
hand-written, in the same run (scripts/bench.py --only h)."""

from __future__ import annotations

import numpy as np
from bench_common import timed


def gradients_overhead(spec: str, texts: list[str], n_batches: int, repeats: int = 3) -> None:
    """`tfparity gradients` against the bare backward passes it needs (same run)."""
    import tensorflow as tf

    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.adapters.runtime.imports import import_torch
    from tfparity.api import load_model, make_batches
    from tfparity.checks.gradients.check import check_gradients
    from tfparity.inputs import InputOptions

    torch = import_torch()
    model, pt = load_model(spec), load_pt(spec)
    sentences = tuple(texts[i % len(texts)] for i in range(8 * n_batches))
    batches = make_batches(model, InputOptions(texts=sentences))
    variables = model.model.trainable_variables
    matrix = model.word_embeddings()

    def tf_pass(batch, embeds: bool) -> None:
        kwargs = model.call_kwargs(batch)
        with tf.GradientTape() as tape:
            fed = tf.gather(matrix, batch.input_ids) if embeds else None
            out = model.model(
                None if embeds else batch.input_ids, inputs_embeds=fed, training=False, **kwargs
            )
            loss = tf.reduce_sum(out.last_hidden_state)
        [
            np.asarray(tf.convert_to_tensor(g))
            for g in tape.gradient(loss, variables)
            if g is not None
        ]

    def pt_pass(m, batch) -> None:
        m.zero_grad(set_to_none=True)
        m(**pt.torch_inputs(batch)).last_hidden_state.sum().backward()
        [p.grad.numpy() for p in m.parameters() if p.grad is not None]

    def bare() -> None:
        for batch in batches:
            tf_pass(batch, False)
            tf_pass(batch, True)
        for m in (pt.model, pt.fp64()):
            for batch in batches:
                with torch.enable_grad():
                    pt_pass(m, batch)

    base = timed(bare, repeats)
    ours = timed(lambda: check_gradients(model, pt, batches), repeats)
    print(
        f"(h) gradients {spec}, {n_batches} batches of 8: bare backward passes {base:.2f} s, "
        f"tfparity gradients {ours:.2f} s, ratio {ours / base:.2f}x (target <= 1.5x)"
    )
