"""``tfparity crosscheck``: a TF model against PyTorch, layer by layer."""

from __future__ import annotations

import argparse
import time

from ..checks import DEFAULT_LOCALISE, LOCALISE_MODES
from ..compare.quantisation import MODES
from ..errors import TfparityError
from .common import (
    add_execution_arguments,
    add_input_arguments,
    add_kl_budget_argument,
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
        "crosscheck",
        help="TF vs PyTorch on the same weights, layer by layer",
        description="Load MODEL's weights into TF and PyTorch (or compare --tf against "
        "--pt) and compare every output and hidden state. By default a float64 PyTorch run "
        "referees; --atol/--rtol switch to fixed tolerances. The first divergence is "
        "localised to a layer and component, with likely causes.",
    )
    add_model_naming(p, "crosscheck")
    add_referee_argument(p)
    p.add_argument(
        "--no-reload",
        action="store_true",
        help="skip the second pass on the TF model after save_pretrained + reload",
    )
    p.add_argument(
        "--localise",
        choices=LOCALISE_MODES,
        default=DEFAULT_LOCALISE,
        help="when the sub-layer taps and isolated runs run (default: %(default)s): "
        "on_failure, only when a tensor fails (they cost about as much as the forward "
        "passes); always, on every run (the per-layer table then has their columns on a "
        "PASS too)",
    )
    p.add_argument(
        "--budget",
        metavar="KEY=VALUE,...",
        help="what a quantised model (a dynamic-range int8 or float16 LiteRT flatbuffer) "
        "may differ by: max, mean (absolute error per tensor), cosine, agreement (share of "
        "labels or top-1 tokens), e.g. max=1e-2,mean=1e-3,cosine=0.999,agreement=0.99; "
        "unset parts keep the default of the model's kind (docs/litert.md). A quantised "
        "model is always judged by a budget; given for a float32 model, it replaces the "
        "float64 referee",
    )
    add_kl_budget_argument(p, "an LM head's (or a classifier's)", "sequences")
    p.add_argument(
        "--labels",
        metavar="FILE",
        help="gold labels, one per line for each text of --text/--texts (a class id or a "
        "label name of the config): a sequence classifier's accuracy on each side and "
        "the flips between them, correct->wrong and wrong->correct (reported, not judged)",
    )
    p.add_argument(
        "--quantize",
        choices=MODES,
        help="also quantise the keras-hub model (a keras-hub spec or a .keras file) with "
        "Keras's model.quantize and judge the quantised copy against its own float model "
        "by the mode's distribution budget (--kl-budget overrides it) and against PyTorch "
        "(docs/quantised.md)",
    )
    p.add_argument(
        "--calibration",
        metavar="FILE",
        help="the calibration data a Keras GPTQ or AWQ .keras file (--tf) was quantised "
        "with: an .npz holding token_ids, an int array (num_samples, sequence_length); the "
        "file is then checked exactly against a fresh GPTQ/AWQ quantisation of its source "
        "(docs/quantised.md)",
    )
    p.add_argument(
        "--attribute",
        action="store_true",
        help="with --quantize: also quantise each layer alone (the token embedding, each "
        "transformer block: one forward pass each) and rank them by what each moves, "
        "the KL mean of the LM logits against the float model (docs/quantised.md)",
    )
    add_input_arguments(p)
    add_report_arguments(p)
    add_execution_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..api import crosscheck
    from ..checks.crosscheck.check import CrosscheckOptions
    from ..checks.crosscheck.export_source import export_verdict
    from ..checks.crosscheck.gold import read_labels
    from ..orchestration import export_spec
    from ..report.text import render

    if args.pt is not None and args.tf is None and not export_spec(args.model):
        raise TfparityError(_reference_alone_refusal(args))
    check_output_arguments(args)
    changes = pt_config(args)  # exit 2 on a malformed item, before any load
    CrosscheckOptions.from_arguments(  # exit 2 before any framework import
        localise=args.localise,
        referee=args.referee,
        budget=args.budget,
        kl_budget=args.kl_budget,
        quantize=args.quantize,
        attribute=args.attribute,
        backend=args.backend,
    )
    executions = execution_options(args)
    golden = bool(args.save_outputs or args.load_outputs)
    if golden and len(executions) > 1:
        raise TfparityError("--save-outputs/--load-outputs hold one run: name one --device.")
    labels = read_labels(args.labels) if args.labels else None  # exit 2 before any load
    if golden and labels is not None:
        raise TfparityError("--labels is not read on --save-outputs/--load-outputs runs yet.")
    for given, option in ((args.quantize, "--quantize"), (args.calibration, "--calibration")):
        if golden and given is not None:
            raise TfparityError(
                f"{option} is not checked on --save-outputs/--load-outputs runs: run it "
                "without them (docs/quantised.md)."
            )
    if args.calibration is not None:
        from ..adapters.keras_hub.calibration import read_calibration_file

        read_calibration_file(args.calibration)  # exit 2 on a bad file, before any load
    _refuse_backend_with(args, golden)
    frameworks_frozen(torch=not args.load_outputs)
    start = time.perf_counter()
    reports = []
    for execution in executions:  # one pass (or two, with the reload) per device
        if golden:
            reports += _golden_passes(args, execution)
            continue
        reports += crosscheck(
            args.model,
            tf=args.tf,
            pt=args.pt,
            inputs=input_options(args),
            tolerance=tolerance(args),
            reload=not args.no_reload,
            allow_pickle=args.allow_pickle,
            localise=args.localise,
            referee=args.referee,
            execution=execution,
            head=args.head,
            budget=args.budget,
            source=args.source,
            pt_config=changes,
            signature=args.signature,
            kl_budget=args.kl_budget,
            labels=labels,
            quantize=args.quantize,
            attribute=args.attribute,
            backend=args.backend,
            calibration=args.calibration,
        )
    for report in reports:
        print(render(report, verbose=args.verbose))
        print()
    verdict = export_verdict(reports)
    if verdict:
        print(verdict)
    print(f"crosscheck wall time: {time.perf_counter() - start:.1f} s")
    return finish(args, reports)


def _refuse_backend_with(args: argparse.Namespace, golden: bool) -> None:
    """--backend jax|torch runs the keras-hub backbone in another process: what needs
    the backbone in this one is refused (exit 2) rather than run on TensorFlow (a
    --quantize: by :meth:`CrosscheckOptions.from_arguments`)."""
    if golden and args.backend not in (None, "tensorflow"):
        raise TfparityError(
            f"--save-outputs/--load-outputs is not run with --backend {args.backend} yet: "
            "the keras-hub model on another backend runs in a process of its own (use "
            "--backend tensorflow)."
        )


def _reference_alone_refusal(args: argparse.Namespace) -> str:
    """What is missing beside --pt given without --tf (the user gave one: "give both"
    would not say which to add, or why MODEL does not count). --tf without --pt is
    refused for every command by :func:`~tfparity.commands.naming.settle_model_naming`."""
    return (
        f"--pt {args.pt} names the reference, but nothing names the TF model beside "
        f"it: MODEL ({args.model}) stands in for --tf only when it is an export (a "
        "SavedModel directory, a .keras, .tflite or .onnx file). Add --tf TF_MODEL, or drop "
        "--pt to check MODEL against its own checkpoint."
    )


def _golden_passes(args: argparse.Namespace, execution) -> list:
    """The cross-check against a stored reference (--load-outputs) or one captured and
    saved on the way (--save-outputs); the reload pass runs against it too. Both sides
    load as :func:`tfparity.api.crosscheck` loads them, so a T5's seq2seq LM is judged
    whole here too (its decoder's hidden states stored and replayed)."""
    from ..api import crosscheck, load_model, make_batches

    tf_model = load_model(
        args.tf or args.model,
        allow_pickle=args.allow_pickle,
        head=args.head,
        companion=args.source or args.pt,
        signature=args.signature,
        decoders=True,  # a T5's seq2seq LM loads, as crosscheck loads it
    )
    batches = make_batches(tf_model, input_options(args))
    separate = args.tf is not None  # a port checked as given: no reload pass
    spec = args.pt or args.source or args.model
    return crosscheck(
        args.model if separate else tf_model,
        tf=tf_model if separate else None,
        pt=golden_reference(args, batches, spec, decoders=True),
        source=args.source,
        batches=batches,
        tolerance=tolerance(args),
        reload=not args.no_reload,
        localise=args.localise,
        referee=args.referee,
        execution=execution,
        kl_budget=args.kl_budget,  # judged against the stored (or captured) logits
    )
