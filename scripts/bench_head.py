"""(k) a head model: `tfparity check` on a fine-tuned-shaped MiniLM classifier against
the bare compiled passes it needs (scripts/bench.py --only k)."""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from pathlib import Path


def fine_tuned_minilm(directory: Path) -> str:
    """MiniLM's body with a seeded 3-label classifier (and the pooler it feeds),
    saved by save_pretrained with MiniLM's tokenizer: shaped like a user's fine-tuned
    checkpoint, which none on this machine is."""
    import shutil

    from transformers import BertForSequenceClassification

    from tfparity.adapters.runtime.imports import import_torch
    from tfparity.adapters.sources.checkpoint_files import local_dir
    from tfparity.adapters.sources.specs import parse_spec

    torch = import_torch()
    source = local_dir(parse_spec("minilm"))
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(str(source), num_labels=3)
    model.config.architectures = ["BertForSequenceClassification"]
    model.save_pretrained(str(directory), safe_serialization=True)
    for f in source.iterdir():
        if f.name.startswith(("vocab", "tokenizer", "special_tokens")):
            shutil.copy(f, directory / f.name)
    return str(directory)


def head_check_overhead(texts: list[str], n: int, rounds: int = 5) -> None:
    """(k): `tfparity check` on a head model against the bare compiled passes it
    needs, both cold (fresh tf.functions, tracing included, as a command run pays it)."""
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.adapters.runtime.execution_options import ExecutionOptions
    from tfparity.adapters.runtime.imports import import_torch
    from tfparity.api import crosscheck, load_model, make_batches
    from tfparity.checks.embeds import EmbedsOptions, check_embeds
    from tfparity.inputs import InputOptions

    torch = import_torch()
    with tempfile.TemporaryDirectory(prefix="tfparity-bench-head-") as tmp:
        spec = fine_tuned_minilm(Path(tmp))
        model, pt = load_model(spec), load_pt(spec)
    sentences = [texts[i % len(texts)] for i in range(n)]
    batches = make_batches(model, InputOptions(texts=tuple(sentences), batch_size=8))
    execution = ExecutionOptions(auto=True).settle(len(batches))

    def bare(float64_batches: int | None = None):
        graph = model.executed(execution)
        for b in batches:
            graph.run(b)
            graph.run(b, graph.gather(b.input_ids))
        with torch.no_grad():
            for m, some in ((pt.model, batches), (pt.fp64(), batches[:float64_batches])):
                for b in some:
                    m(**pt.torch_inputs(b), output_hidden_states=True)

    verdicts, ran = [], []

    def ours():  # what `tfparity check` runs (commands/check.py), models loaded
        executed = model.executed(execution)
        references = [executed.run(b) for b in batches]
        embeds = check_embeds(executed, batches, EmbedsOptions(references=references))
        (cross,) = crosscheck(tf=executed, pt=pt, batches=batches, tf_traces=references)
        n_compared = len(cross.comparisons)
        verdicts.append(f"embeds {embeds.passed}, crosscheck {cross.passed} ({n_compared} tensors)")
        ran.append(cross.details["float64_batches"])

    bare(), ours()  # warm-up: weight caches, the float64 copy
    gc.freeze()  # as the CLI does once the frameworks are imported
    times: dict[str, list[float]] = {}
    runs = (("bare", bare), ("ours", ours), ("same", lambda: bare(ran[-1])))
    for i in range(rounds):  # alternated: the machine drifts (ratios taken per round)
        for label, fn in runs if i % 2 == 0 else runs[::-1]:
            start = time.perf_counter()
            fn()
            times.setdefault(label, []).append(time.perf_counter() - start)
    ratios = [o / b for o, b in zip(times["ours"], times["bare"], strict=True)]
    own = [o / b for o, b in zip(times["ours"], times["same"], strict=True)]
    print(
        f"\n(k) head model: tfparity check on MiniLM + a seeded 3-label classifier, "
        f"{len(sentences)} sentences ({len(batches)} batches, TF "
        f"{execution.runner_kind}): {statistics.median(times['ours']):.2f} s vs bare TF "
        f"ids + TF embeds + PT fp32 + PT fp64 {statistics.median(times['bare']):.2f} s, "
        f"tracing included in both: {statistics.median(ratios):.2f}x (goal <= 1.0x; "
        f"rounds {', '.join(f'{r:.2f}' for r in ratios)}); float64 for {ran[-1]} of "
        f"{len(batches)} batches (--referee lazy); against the bare passes with float64 on "
        f"as many batches: {statistics.median(own):.2f}x; verdicts {verdicts[-1]}"
    )
