"""(l) LiteRT: `crosscheck` of an fp32 LiteRT flatbuffer against the bare interpreter
and PyTorch passes it needs (scripts/bench.py --only l)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path


def litert_overhead(spec: str, texts: list[str], n: int, rounds: int = 5) -> None:
    """(l) The LiteRT cross-check against the bare interpreter and PyTorch passes."""
    from tfparity.adapters.exported import load_export
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.adapters.runtime.imports import import_torch
    from tfparity.adapters.sources.specs import parse_spec
    from tfparity.api import crosscheck, load_model, make_batches
    from tfparity.inputs import InputOptions
    from tfparity.testing import to_litert

    torch = import_torch()
    path = Path(tempfile.mkdtemp(prefix="tfparity-bench-")) / "model.tflite"
    to_litert(load_model(spec), path, batch=8, seq=64)
    side, pt = load_export(parse_spec(str(path)), spec), load_pt(spec)
    sentences = tuple(texts[i % len(texts)] for i in range(n))
    batches = make_batches(side, InputOptions(texts=sentences, batch_size=8, truncate=True))
    runner = side.runner

    def bare():
        for b in batches:  # a user's script: the plain interpreter on padded inputs
            runner.run(b)
        with torch.no_grad():
            for m in (pt.model, pt.fp64()):
                for b in batches:
                    m(**pt.torch_inputs(b), output_hidden_states=True)

    def ours():
        crosscheck(side, pt=pt, batches=batches, reload=False)

    bare(), ours()  # warm-up: interpreters, the float64 copy
    times: dict[str, list[float]] = {"bare": [], "ours": []}
    for i in range(rounds):
        for label, fn in (("bare", bare), ("ours", ours))[:: 1 if i % 2 == 0 else -1]:
            start = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - start)
    ratios = [o / b for o, b in zip(times["ours"], times["bare"], strict=True)]
    print(
        f"(l) LiteRT crosscheck of {spec} (fp32 flatbuffer, {n} sentences): "
        f"{statistics.median(times['ours']):.2f} s vs bare interpreter + PT fp32 + PT fp64 "
        f"{statistics.median(times['bare']):.2f} s: {statistics.median(ratios):.2f}x (goal "
        f"<= 1.2x; rounds {', '.join(f'{r:.2f}' for r in ratios)})"
    )
