"""(x) `tfparity crosscheck --no-reload` against the bare forward passes it needs, part
of (e) (scripts/bench.py --only x)."""

from __future__ import annotations

import gc
import resource
import statistics
import time


def crosscheck_overhead(spec: str, texts: list[str], n_cross: int, rounds: int = 5) -> None:
    """`tfparity crosscheck --no-reload` (auto execution, taps on failure only) against
    the bare forward passes it needs: TF ids (traced: graph from 8 batches, as auto
    chooses), PyTorch fp32 and fp64, one framework at a time. Both sides start cold,
    tracing included, as a command run does; the warm ratio (bare's trace reused) too."""
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.adapters.runtime.execution_options import ExecutionOptions
    from tfparity.adapters.runtime.imports import import_torch
    from tfparity.api import crosscheck, load_model, make_batches
    from tfparity.inputs import InputOptions

    torch = import_torch()
    model, pt = load_model(spec), load_pt(spec)
    sentences = [texts[i % len(texts)] for i in range(n_cross)]
    batches = make_batches(model, InputOptions(texts=tuple(sentences), batch_size=8))
    execution = ExecutionOptions(auto=True).settle(len(batches))
    warm = model.executed(execution)

    def bare(graph=None):
        graph = graph or model.executed(execution)
        for b in batches:
            graph.run(b)
        with torch.no_grad():
            for m in (pt.model, pt.fp64()):
                for b in batches:
                    m(**pt.torch_inputs(b), output_hidden_states=True)

    def ours():
        crosscheck(
            model,
            pt=pt,
            batches=batches,
            reload=False,
            localise="on_failure",
            execution=ExecutionOptions(auto=True),
        )

    bare(warm), ours()  # warm-up: weight caches, the float64 copy, the warm trace
    gc.freeze()  # as the CLI does once the frameworks are imported (frameworks_frozen)
    times: dict[str, list[float]] = {}
    faults: dict[str, list[int]] = {}
    runs = (("bare", bare), ("ours", ours), ("warm", lambda: bare(warm)))
    for i in range(rounds):  # alternated: the machine drifts (ratios taken per round)
        for label, fn in runs if i % 2 == 0 else runs[::-1]:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            fn()
            times.setdefault(label, []).append(time.perf_counter() - start)
            faults.setdefault(label, []).append(
                resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
            )
    cold = [o / b for o, b in zip(times["ours"], times["bare"], strict=True)]
    warm_ratios = [o / w for o, w in zip(times["ours"], times["warm"], strict=True)]
    t_bare, t_ours = statistics.median(times["bare"]), statistics.median(times["ours"])
    best = min(times["ours"]) / min(times["bare"])  # noise only adds time: best of each
    print(
        f"    crosscheck --no-reload, {n_cross} sentences: {t_ours:.2f} s vs bare TF ids + "
        f"PT fp32 + PT fp64 {t_bare:.2f} s, tracing included in both: "
        f"{statistics.median(cold):.2f}x (goal <= 1.10x; median of {rounds} rounds: "
        f"{', '.join(f'{r:.2f}' for r in cold)}; best of each: {best:.2f}x); against the "
        f"bare passes already traced: {statistics.median(warm_ratios):.2f}x"
    )
    print(  # what keeping every output for the comparisons costs the passes
        f"    page faults per run (medians): crosscheck {statistics.median(faults['ours']):.0f}, "
        f"bare passes {statistics.median(faults['bare']):.0f} (the cross-check keeps its TF "
        "and PyTorch fp32 outputs to compare them: fresh memory, touched once)"
    )
