"""``tfparity runtimes FILE``: one artefact on each of its runtime's kernel sets."""

from __future__ import annotations

import argparse
import time

from .common import (
    add_input_arguments,
    add_report_arguments,
    finish,
    frameworks_frozen,
    input_options,
    tolerance,
)
from .naming import add_model_naming


def register(sub: argparse._SubParsersAction) -> None:
    from ..adapters.runtime.kernel_sets import KERNEL_SETS

    sets = "; ".join(
        f"{kind}: {', '.join(s.name for s in k.sets)}" for kind, k in KERNEL_SETS.items()
    )
    p = sub.add_parser(
        "runtimes",
        help="one artefact (.tflite, .onnx) on each kernel set of its runtime, threads 1 vs N",
        description="Run one artefact (MODEL: a .tflite or .onnx file) on each kernel set "
        "of its runtime (LiteRT: the reference kernels, XNNPACK, the optimised kernels "
        "without XNNPACK; ONNX Runtime: graph optimisation none, basic, all), at 1 and N "
        "threads where threads apply, reading every computed tensor (ONNX: the tensors "
        "two runs share, since fusions hide the ones they replace). "
        "With --source (the model it was converted from) each run is judged against "
        "PyTorch by the float64 referee; without, the runs are judged against each other "
        "and the run that parts from the rest is named with the first tensor where it "
        "parts, the op there and the evidence. Without --source the inputs are seeded "
        "random ids below the artefact's vocabulary.",
    )
    add_model_naming(p, "runtimes")
    p.add_argument(
        "--sets",
        metavar="LIST",
        help=f"comma-separated kernel sets to run (default: all; {sets})",
    )
    p.add_argument(
        "--threads",
        metavar="LIST",
        help="comma-separated thread counts for the threaded sets (default: 1 and the "
        "cores, at most 4)",
    )
    add_input_arguments(p)
    add_report_arguments(p)
    p.set_defaults(func=_run_runtimes)


def _run_runtimes(args: argparse.Namespace) -> int:
    from ..adapters.runtime.kernel_sets import kernels_for
    from ..adapters.sources.specs import as_spec
    from ..checks.runtimes import RuntimesOptions
    from ..report.runtimes import render_runtimes

    start = time.perf_counter()
    spec = as_spec(args.model)
    kernels = kernels_for(spec.kind, spec.text)  # exit 2 before any framework import
    RuntimesOptions.from_arguments(
        kernels, sets=args.sets, threads=args.threads, tolerance=tolerance(args)
    )
    if kernels.tensorflow or args.source is not None:
        frameworks_frozen(torch=args.source is not None)
    from ..api import check_runtimes

    report = check_runtimes(
        args.model,
        source=args.source,
        sets=args.sets,
        threads=args.threads,
        signature=args.signature,
        inputs=input_options(args),
        tolerance=tolerance(args),
    )
    report.details["seconds"] = round(time.perf_counter() - start, 2)
    print(render_runtimes(report, verbose=args.verbose))
    return finish(args, [report])
