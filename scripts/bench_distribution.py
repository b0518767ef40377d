"""(q) What the distribution metrics cost against the passes they judge (issue 33's goal:
at most 5%), on a causal LM shaped like GPT-2 small (12 layers, hidden 768, vocabulary
50,257; random weights, seeded, saved as safetensors in a temporary directory: what
matters is the shape, the vocabulary above all, since the metrics' cost is per logit).

The passes: the TF model's forward pass and PyTorch's float32 one on the same batches
(the two sides whose logits the metrics compare; the float64 referee's pass, which a
cross-check adds, is left out, so the ratio is an upper bound). The metrics: llama.cpp's
statistics (:func:`tfparity.checks.crosscheck.distribution.lm_distribution`: a float64
log-softmax of both sides' logits per position, KL, same top-1, Δp, NLL) and the
bootstrap verdict of a ``--kl-budget`` (1,000 resamples). Both timed in the same run,
alternated over rounds; the ratio is taken per round.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path


def gpt2_small(directory: Path) -> str:
    """A seeded GPT-2-small-shaped causal LM saved as a Hugging Face checkpoint."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config()).save_pretrained(directory, safe_serialization=True)
    return str(directory)


def distribution_overhead(sequences: int, seq_len: int, rounds: int = 3) -> None:
    from tfparity.api import load_model, make_batches
    from tfparity.checks.crosscheck.distribution import lm_distribution
    from tfparity.compare.bootstrap import bootstrap_verdict, parse_limits
    from tfparity.inputs import InputOptions
    from tfparity.orchestration import reference_for

    with tempfile.TemporaryDirectory(prefix="tfparity-bench-gpt2-") as tmp:
        spec = gpt2_small(Path(tmp))
        tf_model = load_model(spec)
        pt_model = reference_for(spec, head=tf_model.head)
        batches = make_batches(tf_model, InputOptions(random=sequences, seq_len=seq_len))
        limits = parse_limits("kl_mean=0.01,same_top1=0.99")
        outputs: dict[str, list] = {}

        def passes() -> None:
            outputs["tf"] = [tf_model.run(b) for b in batches]
            outputs["pt"] = [pt_model.run(b) for b in batches]

        def metrics() -> None:
            found = lm_distribution(outputs["tf"], outputs["pt"], batches, tf_model.head)
            bootstrap_verdict(found, limits)

        passes()  # warm-up (TF traces nothing here: eager)
        metrics()
        times: dict[str, list[float]] = {"passes": [], "metrics": []}
        for _ in range(rounds):
            for label, fn in (("passes", passes), ("metrics", metrics)):
                start = time.perf_counter()
                fn()
                times[label].append(time.perf_counter() - start)
    ratios = [m / p for m, p in zip(times["metrics"], times["passes"], strict=True)]
    med = statistics.median
    positions = sequences * seq_len
    print(f"\n(q) distribution metrics, GPT-2-small-shaped causal LM (vocabulary 50,257), "
          f"{sequences} sequences x {seq_len} tokens (up to {positions} positions)")  # fmt: skip
    print(f"  TF + PyTorch float32 forward passes {med(times['passes']):.2f} s")
    print(f"  KL statistics + bootstrap verdict {med(times['metrics']):.3f} s: "
          f"{100 * med(ratios):.1f}% of the passes (goal <= 5%; rounds "
          f"{', '.join(f'{100 * r:.1f}%' for r in ratios)})")  # fmt: skip
