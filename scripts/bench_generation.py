"""(g) generate: `tfparity.generate` against the bare HF TF and PyTorch `generate`
calls that produce the same tokens (scripts/bench.py --only g)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import numpy as np
from bench_common import timed_once


def generation(spec: str, new_tokens: int, rounds: int = 5) -> None:
    """(g) `tfparity.generate` against the bare generate calls giving the same tokens."""
    import torch

    from tfparity.adapters.interfaces.greedy import greedy_config
    from tfparity.api import generate, load_model, make_batches
    from tfparity.checks.generation.check import DEFAULT_PROMPTS, prompts_of
    from tfparity.inputs import InputOptions
    from tfparity.orchestration import reference_for

    tf_model = load_model(spec)
    pt_model = reference_for(spec, head=tf_model.head)
    batches = make_batches(tf_model, InputOptions(texts=DEFAULT_PROMPTS))
    prompts = prompts_of(batches, new_tokens, tf_model.limits)
    config = greedy_config(new_tokens, tf_model.pad_token_id)
    tf_model.model.generation_config.eos_token_id = None  # as tfparity decodes: no early stop

    def bare_tf() -> None:
        for p in prompts:
            ids = p[None].astype(np.int32)
            tf_model.model.generate(ids, attention_mask=np.ones_like(ids), generation_config=config)

    def bare_pt() -> None:
        with torch.no_grad():
            for p in prompts:
                ids = torch.from_numpy(p[None].astype(np.int64))
                pt_model.model.generate(
                    ids, attention_mask=torch.ones_like(ids), generation_config=config,
                    eos_token_id=None,
                )  # fmt: skip

    def ours(embeds: bool) -> Callable[[], object]:
        return lambda: generate(tf_model, pt=pt_model, new_tokens=new_tokens, embeds=embeds)

    runs = (("bare", lambda: (bare_tf(), bare_pt())), ("ids", ours(False)), ("all", ours(True)))
    for _, fn in runs:
        fn()  # warm-up
    times: dict[str, list[float]] = {}
    for i in range(rounds):  # alternated: the machine drifts (ratios taken per round)
        for label, fn in runs if i % 2 == 0 else runs[::-1]:
            times.setdefault(label, []).append(timed_once(fn))
    ids = [o / b for o, b in zip(times["ids"], times["bare"], strict=True)]
    both = [o / b for o, b in zip(times["all"], times["bare"], strict=True)]
    med = statistics.median
    print(f"\n(g) generate, {spec}, {len(prompts)} prompts x {new_tokens} new tokens")
    print(f"  bare TF + PyTorch generate {med(times['bare']):.2f} s")
    print(f"  tfparity generate --no-embeds {med(times['ids']):.2f} s: {med(ids):.2f}x "
          f"(rounds {', '.join(f'{r:.2f}' for r in ids)})")  # fmt: skip
    print(f"  tfparity generate {med(times['all']):.2f} s (with the start from inputs_embeds): "
          f"{med(both):.2f}x the bare calls (goal <= 1.3x; rounds "
          f"{', '.join(f'{r:.2f}' for r in both)})")  # fmt: skip
