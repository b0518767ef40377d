"""``tfparity backends MODEL --quantize MODE``, and a ``.keras`` file already quantised.

The float model is prepared as ever (one ``.keras``); Keras quantises it once, on
TensorFlow (:func:`.prepare.quantised_copy`), and every backend loads that one quantised
file, so the question is "do the backends compute the same quantised model?". A file
saved after ``model.quantize`` is read as it is, its mode named from its config.

Keras cannot run a quantised model at float64, so there is no float64 referee of the
quantised graph: :mod:`tfparity.checks.backends_quantised` judges the backends'
quantised runs against each other layer by layer, at the float cross-backend ceiling,
and, apart, the quantisation's own error at the output against the *float* model's
float64 run on the referee's backend (a second, short launch), by the mode's budgets.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import TfparityError
from ..results import Report

ANCHOR = "tensorflow"  # the backend Keras quantised on: the others are held to its run


def run_quantised(
    request, prepared, tmp: Path, backends: tuple[tuple[str, ...], str], notes: list[str], processes
) -> Report:
    """Quantise (unless the file already is), run every backend (``backends``: the
    chosen ones and the referee's) on the quantised file, the referee's backend on the
    float file at float64, and judge; the processes come from ``processes``
    (:class:`.processes.Processes`, whose TensorFlow process quantises)."""
    from ..adapters.keras_backends import run_backends
    from ..adapters.keras_backends.inputs import quantised_mode, read_config, vocabulary
    from ..checks.backends import DEFAULT_CEILING
    from ..checks.backends_quantised import QuantisedOutputs, check_quantised_backends
    from .prepare import quantised_copy

    chosen, referee = backends
    config = read_config(prepared.path)
    stored = quantised_mode(config)
    if stored and request.quantize:
        raise TfparityError(
            f"{request.model} is already quantised ({stored}, Keras model.quantize): drop "
            "--quantize to check it as it is (docs/backends.md)."
        )
    if stored:
        notes.append(f"{request.model} is quantised ({stored}): read as it is; no float model")
        path, float_path, mode = prepared.path, None, stored
    else:
        path = quantised_copy(
            prepared.path, request.quantize, prepared.imports, tmp, step=processes.step
        )
        float_path, mode = prepared.path, request.quantize
    plans = [processes.plan(path, chosen, referee, float64=False)]
    if float_path is not None:  # the float model's float64 run, on the referee's backend
        plans.append(processes.plan(float_path, (), referee))
    # side by side, as the backends of one launch run: each is a process of its own
    with ThreadPoolExecutor(len(plans)) as pool:
        launched = list(
            pool.map(
                lambda plan: run_backends(plan, prepared.inputs, request.jobs, processes.workers),
                plans,
            )
        )
    runs = launched[0]
    truth = launched[1][referee].outputs["float64"] if float_path is not None else None
    for note in (n for run in runs.values() for n in run.notes):
        notes += [note] if note not in notes else []
    anchor = ANCHOR if ANCHOR in chosen else chosen[0]
    outputs = QuantisedOutputs(
        model=str(request.model),
        mode=mode,
        runs={b: runs[b].outputs["float32"] for b in chosen},
        anchor=anchor,
        float_truth=truth,
        referee_backend=referee,
        vocabulary=vocabulary(config),
        quantised_here=float_path is not None,
        precision={b: runs[b].precision for b in chosen},
        notes=notes,
        layer_facts={b: runs[b].layer_facts for b in chosen},
        parents={n: p for run in runs.values() for n, p in run.parents.items()},
    )
    ceiling = DEFAULT_CEILING if request.ceiling is None else request.ceiling
    return check_quantised_backends(outputs, request.kl_budget, ceiling)
