#!/usr/bin/env python3
"""Throughput of tfparity's checks: sentences per second, after a warm-up run.

The embeds check (two TF runs and a Keras gather per batch, then the comparison) is
timed always; the PyTorch cross-check too when ``tfparity.checks.crosscheck.check`` exists
(it runs TF, PyTorch and PyTorch in float64, so it is slower by nature). Inputs are
seeded random ids: ``--batch`` sequences of mixed lengths up to ``--seq``.

    python scripts/throughput.py --model minilm --batch 64 --seq 128 --device gpu:0 [--graph]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable

from tfparity.adapters.runtime.execution_options import ExecutionOptions, expand_devices
from tfparity.api import load_model, make_batches
from tfparity.checks.embeds import check_embeds
from tfparity.inputs import InputOptions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--device", default=None, help="cpu, gpu:N, gpu, all (default: TF's)")
    run = parser.add_mutually_exclusive_group()
    run.add_argument("--graph", action="store_true", help="TF as a tf.function (default eager)")
    run.add_argument("--xla", action="store_true")
    parser.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs after a warm-up")
    args = parser.parse_args()

    model = load_model(args.model)
    inputs = InputOptions(random=args.batch, seq_len=args.seq, batch_size=args.batch, seed=0)
    batches = make_batches(model, inputs)
    base = ExecutionOptions(xla=args.xla, graph=args.graph, precision=args.precision)
    for options in expand_devices(base, args.device):
        runner = model.executed(options)
        where = ", ".join(f"{k} {v}" for k, v in options.describe().items())
        rate = _rate(lambda r=runner: check_embeds(r, batches), args.batch, args.repeats)
        print(f"embeds check: {rate:.1f} sentences/s (batch {args.batch}, seq {args.seq}, {where})")
        print(_crosscheck_line(runner, batches, args, where))
    return 0


def _rate(run: Callable[[], object], sentences: int, repeats: int) -> float:
    run()  # warm-up: tracing, XLA compilation, allocator growth
    start = time.perf_counter()
    for _ in range(repeats):
        run()
    return sentences * repeats / (time.perf_counter() - start)


def _crosscheck_line(runner, batches, args: argparse.Namespace, where: str) -> str:
    if importlib.util.find_spec("tfparity.checks.crosscheck.check") is None:
        return "crosscheck: not available (tfparity.checks.crosscheck.check does not exist)"
    try:
        from tfparity.api import crosscheck

        rate = _rate(
            lambda: crosscheck(runner, batches=batches, reload=False), args.batch, args.repeats
        )
    except Exception as exc:  # report, do not hide, why it could not be timed
        return f"crosscheck: could not be timed ({type(exc).__name__}: {exc})"[:400]
    return (
        f"crosscheck: {rate:.1f} sentences/s (batch {args.batch}, seq {args.seq}, {where}; "
        "TF side on that device, PyTorch fp32 and fp64 where torch puts them)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
