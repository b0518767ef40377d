"""(o) ONNX: `crosscheck` of an ONNX file against the bare passes it needs (issue 45's
goal: at most 1.3x).

The file: MODEL's PyTorch reference exported by torch's legacy exporter
(:func:`tfparity.adapters.onnx.torch_export.export_torch`: dynamic axes, every hidden
state an output, as a user exports for checking). The check runs it on ONNX Runtime
(the optimised session, as deployed), PyTorch fp32, and the float64 referee where it
decides. The bare passes: a user's script doing only that: a plain ``InferenceSession``
on the file fed each batch, PyTorch fp32 and float64 forward passes on every batch
(an upper bound of the referee's, which may stop early), and the same with float64 on
as many batches as the check's lazy referee ran (the passes it did need). Models are
loaded beforehand on both sides; both are timed in the same run, alternated over
rounds, the ratio taken per round, in wall and in CPU time (a shared machine moves the
wall time most).

    python scripts/bench.py --only o --model tiny:bert
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path


def onnx_overhead(spec: str, texts: list[str], n: int, rounds: int = 5) -> None:
    import numpy as np
    import onnxruntime

    from tfparity.adapters.exported import load_export
    from tfparity.adapters.onnx.torch_export import export_torch
    from tfparity.adapters.reference.pt_model import load_pt
    from tfparity.adapters.runtime.imports import import_torch
    from tfparity.adapters.sources.specs import parse_spec
    from tfparity.api import crosscheck, make_batches
    from tfparity.inputs import InputOptions

    torch = import_torch()
    pt = load_pt(spec)
    path = Path(tempfile.mkdtemp(prefix="tfparity-bench-onnx-")) / "model.onnx"
    export_torch(pt.model, path)
    side = load_export(parse_spec(str(path)), spec)
    sentences = tuple(texts[i % len(texts)] for i in range(n))
    batches = make_batches(side, InputOptions(texts=sentences, batch_size=8, truncate=True))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    feeds = [
        {
            k: np.asarray(v, np.int64)
            for k, v in zip(
                ("input_ids", "attention_mask", "token_type_ids"),
                (b.input_ids, b.attention_mask, np.zeros_like(b.input_ids)),
                strict=True,
            )
            if k in names
        }
        for b in batches
    ]

    def bare(float64_batches: int | None = None) -> None:
        for feed in feeds:  # a user's script: the file on ONNX Runtime, as deployed
            session.run(None, feed)
        with torch.no_grad():
            for m, some in ((pt.model, batches), (pt.fp64(), batches[:float64_batches])):
                for b in some:
                    m(**pt.torch_inputs(b), output_hidden_states=True)

    ran, verdicts = [], []

    def ours() -> None:
        (report,) = crosscheck(side, pt=pt, batches=batches, reload=False)
        ran.append(report.details["float64_batches"])
        verdicts.append(f"{'PASS' if report.passed else 'FAIL'}, {len(report.comparisons)} tensors")

    bare(), ours()  # warm-up: sessions, the float64 copy
    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # process CPU time: less moved by a shared machine
    runs = (("bare", bare), ("ours", ours), ("same", lambda: bare(ran[-1])))
    for i in range(rounds):  # alternated: the machine drifts (ratios taken per round)
        for label, fn in runs if i % 2 == 0 else runs[::-1]:
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times.setdefault(label, []).append(time.perf_counter() - start)
            cpu.setdefault(label, []).append(time.process_time() - start_cpu)
    ratios = [o / b for o, b in zip(times["ours"], times["bare"], strict=True)]
    own = [o / b for o, b in zip(times["ours"], times["same"], strict=True)]
    own_cpu = [o / b for o, b in zip(cpu["ours"], cpu["same"], strict=True)]
    best = min(times["ours"]) / min(times["same"])  # noise only adds time: best of each
    print(
        f"(o) ONNX crosscheck of {spec} (legacy export, every hidden state an output, {n} "
        f"sentences, {len(batches)} batches): {statistics.median(times['ours']):.2f} s vs bare "
        f"ONNX Runtime + PT fp32 + PT fp64 {statistics.median(times['bare']):.2f} s: "
        f"{statistics.median(ratios):.2f}x (goal <= 1.3x; rounds "
        f"{', '.join(f'{r:.2f}' for r in ratios)}); float64 for {ran[-1]} of {len(batches)} "
        f"batches (--referee lazy); against the bare passes with float64 on as many batches: "
        f"{statistics.median(own):.2f}x (rounds {', '.join(f'{r:.2f}' for r in own)}), "
        f"in CPU time {statistics.median(own_cpu):.2f}x (rounds "
        f"{', '.join(f'{r:.2f}' for r in own_cpu)}), best of each {best:.2f}x; verdict "
        f"{verdicts[-1]}"
    )
