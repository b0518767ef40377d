"""``tfparity check``: the main job (inputs_embeds vs input_ids parity)."""

from __future__ import annotations

import argparse
import time

from .common import (
    add_execution_arguments,
    add_input_arguments,
    add_output_arguments,
    add_referee_argument,
    add_report_arguments,
    check_output_arguments,
    execution_options,
    finish,
    frameworks_frozen,
    golden_reference,
    input_options,
    pt_config,
    tolerance,
)
from .naming import add_model_naming


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="inputs_embeds vs input_ids parity, and TF vs PyTorch (the main job)",
        description="Run the TF model with input_ids and with word embeddings gathered on "
        "the Keras side as inputs_embeds; compare every output and hidden state. When "
        "PyTorch is installed, also cross-check TF against PyTorch on the same weights "
        "(one pass of `tfparity crosscheck`; --no-pt turns it off). A keras-hub:<SPEC> "
        "model gets the embeds check alone: its comparison with PyTorch is `tfparity "
        "crosscheck keras-hub:<SPEC>`.",
    )
    add_model_naming(p, "check")
    add_referee_argument(p)
    add_input_arguments(p)
    add_report_arguments(p)
    add_execution_arguments(p)
    add_output_arguments(p)
    p.add_argument(
        "--no-pt",
        action="store_true",
        help="skip the PyTorch cross-check even if torch is installed",
    )
    p.set_defaults(func=_run_check)


def _run_check(args: argparse.Namespace) -> int:

    from ..adapters.runtime.imports import torch_available
    from ..api import load_model, make_batches
    from ..checks.embeds import EmbedsOptions, check_embeds
    from ..errors import TfparityError
    from ..orchestration import check_source
    from ..report.text import render

    start = time.perf_counter()
    inputs = input_options(args)  # bad inputs and a bad --device fail before loading
    executions = execution_options(args)
    check_output_arguments(args)
    changes = pt_config(args)  # exit 2 on a malformed item, before any load
    keras_hub = _keras_hub_only_embeds(args)
    if changes and (keras_hub or args.no_pt):
        raise TfparityError(
            "--pt-config changes the cross-check's PyTorch reference, and this `check` runs "
            + ("no cross-check: use `tfparity crosscheck`." if keras_hub else "none (--no-pt).")
        )
    _check_golden_arguments(args)
    frameworks_frozen(torch=not (args.no_pt or args.load_outputs) and torch_available())
    model = load_model(
        args.model,
        allow_pickle=args.allow_pickle,
        head=args.head,
        companion=args.source,
        signature=args.signature,
    )
    check_source(args.source, model)
    batches = make_batches(model, inputs)
    reports, shared = [], None
    for execution in (e.settle(len(batches)) for e in executions):  # a report per device
        executed = model.executed(execution)
        references = [executed.run(b) for b in batches]
        if shared is None:  # the first device's runs serve the cross-check too
            shared = (executed, references)
        options = EmbedsOptions.from_arguments(tolerance=tolerance(args), references=references)
        report = check_embeds(executed, batches, options)
        report.details.update(execution.describe())
        report.details["seconds"] = round(time.perf_counter() - start, 2)
        if keras_hub:
            report.notes.append(keras_hub)
        print(render(report, verbose=args.verbose))
        reports.append(report)
    if not keras_hub and _wants_crosscheck(args):
        reports.append(_crosscheck(args, *shared, batches))
    return finish(args, reports)


def _keras_hub_only_embeds(args: argparse.Namespace) -> str | None:
    """For a keras-hub model, the note saying that ``check`` is the embeds check on
    Keras 3 alone (else None). A keras-hub port is a separate implementation, so its
    comparison with PyTorch is a finding about the port, which ``crosscheck`` reports;
    ``check`` judges the inputs_embeds pipeline. Golden outputs belong to that
    comparison: with a keras-hub model they are refused here (exit 2)."""
    from ..adapters.keras_hub.side import is_keras_hub_spec
    from ..errors import TfparityError

    if not is_keras_hub_spec(args.model):
        return None
    spec = args.model.strip()
    given = "--save-outputs" if args.save_outputs else "--load-outputs" if args.load_outputs else ""
    if given:
        raise TfparityError(
            f"{given} stores or replaces PyTorch's outputs for the cross-check, which "
            f"`check` does not run on a keras-hub model: use `tfparity crosscheck {spec} "
            f"{given} PATH.npz`."
        )
    return (
        f"{spec} is a keras-hub port: `check` compares its inputs_embeds and input_ids "
        f"paths on Keras 3; its comparison with Hugging Face PyTorch is "
        f"`tfparity crosscheck {spec}`."
    )


def _wants_crosscheck(args: argparse.Namespace) -> bool:
    from ..adapters.runtime.imports import torch_available

    if args.load_outputs:  # the stored PyTorch outputs stand in for PyTorch
        return True
    if args.no_pt:
        return False
    if not torch_available():
        print(
            "\nnote: PyTorch is not installed, so the cross-check did not run "
            "(pip install torch==2.13.0; --no-pt silences this)."
        )
        return False
    return True


def _check_golden_arguments(args: argparse.Namespace) -> None:
    """--save-outputs stores PyTorch's run and --load-outputs replaces it: both are
    about the cross-check pass, so --no-pt contradicts them."""
    from ..adapters.runtime.imports import import_torch
    from ..errors import TfparityError

    given = "--save-outputs" if args.save_outputs else "--load-outputs" if args.load_outputs else ""
    if given and args.no_pt:
        raise TfparityError(f"{given} is about the PyTorch cross-check; drop --no-pt.")
    if args.save_outputs:
        import_torch()  # saving needs PyTorch: say so before the model loads


def _crosscheck(args: argparse.Namespace, model, tf_traces, batches):
    """One pass of the cross-check on the same batches, reusing the first device's TF
    runs (same device, execution and precision); it localises only on failure."""
    from ..api import crosscheck
    from ..report.text import render

    start = time.perf_counter()
    reference_spec = args.source or args.model  # an export's: the model it came from
    reference = golden_reference(args, batches, reference_spec)
    (report,) = crosscheck(
        tf=model,
        pt=reference or reference_spec,
        batches=batches,
        tolerance=tolerance(args),
        allow_pickle=args.allow_pickle,
        tf_traces=tf_traces,
        pt_config=pt_config(args),
        referee=args.referee,
    )
    report.details["seconds"] = round(time.perf_counter() - start, 2)
    print()
    print(render(report, verbose=args.verbose))
    return report
