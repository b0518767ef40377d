"""``tfparity modes``: the same inputs under every execution mode and device, against
CPU eager fp32."""

from __future__ import annotations

import argparse
import time

from .common import (
    add_input_arguments,
    add_report_arguments,
    finish,
    frameworks_frozen,
    input_options,
    non_empty,
    tolerance,
)
from .naming import add_model_naming


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "modes",
        help="parity across devices, tf.function, XLA, fp16/bf16 and TF32",
        description="Run the model on the same inputs eagerly, as tf.function, with XLA, "
        "under mixed_float16 and mixed_bfloat16 policies and (on GPUs that have it) with "
        "TF32, on each device; compare every output and hidden state with CPU eager fp32. "
        "Each mode is judged by its compute dtype's tolerance, scaled to the tensor.",
    )
    add_model_naming(p, "modes")
    p.add_argument(
        "--devices",
        "--device",
        dest="devices",
        type=non_empty,
        default="all",
        metavar="DEVICES",
        help="cpu, gpu:N, gpu (every GPU) or all (default; CPU only when no GPU is visible)",
    )
    p.add_argument(
        "--modes",
        default=None,
        metavar="LIST",
        help="comma-separated modes: eager, graph, xla, fp16, bf16, tf32, or combinations "
        "such as xla+fp16 (default: all of the plain ones)",
    )
    add_input_arguments(p)
    add_report_arguments(p)
    p.set_defaults(func=_run_modes)


def _run_modes(args: argparse.Namespace) -> int:
    from ..api import check_modes, load_model
    from ..checks.modes import ModesOptions
    from ..report.modes import render_modes

    start = time.perf_counter()
    # checked before any framework import; check_modes checks them the same way
    ModesOptions.from_arguments(devices=args.devices, modes=args.modes)
    frameworks_frozen()
    model = load_model(args.model, allow_pickle=args.allow_pickle)
    report = check_modes(
        model,
        devices=args.devices,
        modes=args.modes,
        inputs=input_options(args),
        tolerance=tolerance(args),
    )
    report.details["seconds"] = round(time.perf_counter() - start, 2)
    print(render_modes(report, verbose=args.verbose))
    return finish(args, [report])
