"""One ``tfparity backends`` run, float or quantised: prepare MODEL by its kind (a
``.keras`` file as it is; a ``keras-hub:<SPEC>`` or a callable ``module:function`` first
made into one ``.keras`` file by the TensorFlow process, :mod:`.prepare`), launch one
process per backend from a set of serving workers, and judge here (framework-free).

The processes: every run's workers serve the preparing module (:data:`.prepare.ENTRY`),
so a run that prepares its model has its TensorFlow process convert, build or quantise
it and then run it; the parent imports no framework, and a set of workers lends the same
processes to a file's run and a spec's.

Quantised (``--quantize MODE``, or a ``.keras`` file saved after ``model.quantize``):
Keras quantises the float model once, on TensorFlow, and every backend loads that one
file. Keras cannot run a quantised model at float64, so :mod:`.quantised` judges the
backends' quantised runs against each other layer by layer at the float cross-backend
ceiling, and, apart, the quantisation's own error at the output against the *float*
model's float64 run on the referee's backend (a second, short launch), by the mode's
budgets."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..adapters.keras_backends import LaunchPlan
from ..adapters.keras_backends.workers import WorkerKey
from ..errors import TfparityError
from ..results import Report
from .prepare import ENTRY, PREPARE_TIMEOUT_S

if TYPE_CHECKING:
    from ..adapters.keras_backends.workers import BackendWorkers
    from .prepare import Prepared


@dataclass(frozen=True)
class BackendsRequest:
    """What the user asked for (the API's arguments, validated by the callee)."""

    model: str
    backends: Sequence[str] | None = None
    imports: Sequence[str] = ()
    random: int = 2
    seq_len: int = 8
    inputs: str | None = None
    seed: int = 0
    referee_backend: str | None = None
    ceiling: float | None = None
    pt: str | None = None
    texts: Sequence[str] | None = None
    gradients: bool = False
    # Keras quantisation mode (int8|int4|float8): quantise once on TensorFlow, every
    # backend runs that quantised file (.quantised); None: run the file as it is.
    quantize: str | None = None
    kl_budget: Sequence[Any] | None = None  # parsed limits replacing the mode's default
    jobs: int | None = None  # backend processes at once; None: as many as cores allow


@dataclass(frozen=True)
class Processes:
    """The workers a run takes its processes from and the modules they import (the same
    for every process of the run, so the TensorFlow process that prepared the model is
    the one that runs it)."""

    workers: BackendWorkers
    imports: tuple[str, ...]

    def plan(self, path: Path, backends: tuple[str, ...], referee: str, **kw: Any) -> LaunchPlan:
        """The launch of ``path`` on ``backends`` (and ``referee``'s float64) here."""
        return LaunchPlan(path, backends, referee, self.imports, entry=ENTRY, **kw)

    def step(self, arguments: list[str]) -> None:
        """The preparing step (:func:`.prepare.main`'s ``arguments``), run by the run's
        TensorFlow process; its errors are in the meta it writes."""
        key = WorkerKey.of("tensorflow", ("float32",), self.imports, ENTRY)
        worker = self.workers.take(key)
        worker.submit(arguments, kind="prepare")
        worker.wait(PREPARE_TIMEOUT_S)
        self.workers.give_back(worker)


def run_request(request: BackendsRequest, workers: BackendWorkers | None = None) -> Report:
    """Prepare MODEL by its kind, run every backend, judge (see the module). The
    backends' processes come from ``workers`` (None: started here and ended at the
    end); the first ones start before preparing, so their imports overlap with it."""
    from ..adapters.keras_backends import choose_backends, choose_referee
    from ..adapters.keras_backends.launch import warm_first
    from ..adapters.keras_backends.workers import BackendWorkers
    from ..adapters.tf_common.quantize import quantised_mode
    from .prepare import model_kind, temporary_workdir, worker_imports

    kind = model_kind(request.model)
    _refuse_for_kind(request, kind)
    _refuse_for_quantize(request)
    config = None
    if kind == "file":
        from ..adapters.keras_backends.inputs import keras_hub_model, read_config

        # a bad file: exit 2 before any process starts; a keras-hub one: keras_hub imported
        config = read_config(Path(request.model))
        kind = "keras-hub file" if keras_hub_model(config) else kind
    chosen, notes = choose_backends(request.backends)
    referee = choose_referee(request.referee_backend)
    imports = worker_imports(kind, request.model, tuple(request.imports))
    with temporary_workdir() as tmp, contextlib.ExitStack() as stack:
        pool = workers if workers is not None else stack.enter_context(BackendWorkers())
        processes = Processes(pool, imports)
        warm_first(pool, processes.plan(Path(tmp), chosen, referee), request.jobs)
        prepared = _prepared(request, kind, Path(tmp), processes, config)
        if request.quantize or quantised_mode(prepared.model_config()):
            return run_quantised(request, prepared, Path(tmp), (chosen, referee), notes, processes)
        return _run(request, prepared, (chosen, referee), notes, processes)


def _refuse_for_quantize(request: BackendsRequest) -> None:
    """What ``--quantize`` cannot be asked with (exit 2 before any process starts)."""
    if request.quantize is not None:
        from ..adapters.tf_common.quantize import check_mode

        check_mode(request.quantize)
        if request.gradients:
            raise TfparityError(
                "--gradients is not judged on a quantised model: its int8/float8 layers "
                "have no float64 twin to referee the gradients (drop one of them)."
            )
    elif request.kl_budget:
        from ..compare.quantisation import MODES

        raise TfparityError(
            "--kl-budget judges a quantised model's logits on `tfparity backends`: give "
            f"--quantize {'|'.join(MODES)} with it, or a .keras file already quantised."
        )


def _refuse_for_kind(request: BackendsRequest, kind: str) -> None:
    """Options that only a keras-hub spec takes (exit 2 naming the option)."""
    from .prepare import missing_module

    if kind == "callable" and missing_module(request.model):
        raise TfparityError(missing_module(request.model))
    for module in request.imports:  # a typo exits 2 before any process starts
        if missing_module(module):
            raise TfparityError(f"--import {missing_module(module)}")
    if kind == "keras-hub":
        if request.inputs:
            raise TfparityError(
                "--inputs is for a .keras file or a callable: a keras-hub spec runs on "
                "--random N --seq-len L or --text/--texts, as crosscheck does."
            )
        return
    for given, option in ((request.pt, "--pt"), (request.texts, "--text/--texts")):
        if given:
            raise TfparityError(
                f"`tfparity backends` does not take {option} for a .keras file or a "
                "callable: only a keras-hub spec has a Hugging Face checkpoint and a "
                "tokenizer (give --random N --seq-len L, or --inputs FILE.npz)."
            )


def _prepared(
    request: BackendsRequest,
    kind: str,
    tmp: Path,
    processes: Processes,
    config: dict[str, Any] | None,
) -> Prepared:
    """MODEL as one ``.keras`` file with its inputs: a file as it is (``config``: its
    model config, already read), a spec or a callable prepared by the TensorFlow process."""
    from ..adapters.keras_backends.inputs import file_inputs, random_inputs
    from .prepare import HubInputs, Prepared, prepare, tokenised_file_inputs

    given = file_inputs(Path(request.inputs)) if request.inputs else None
    hub = HubInputs(request.random, request.seq_len, request.seed, _texts(request.texts))
    path = Path(request.model)
    if kind == "keras-hub file":  # a keras-hub backbone or task: tokenised, as its spec's
        inputs = given or tokenised_file_inputs(
            path, tmp, processes.imports, hub, step=processes.step
        )
        return Prepared(path, inputs, processes.imports, config=config)
    if kind == "file":
        inputs = given or random_inputs(config, request.random, request.seq_len, request.seed)
        return Prepared(path, inputs, tuple(request.imports), config=config)
    prepared = prepare(
        request.model, kind, tmp, tuple(request.imports), hub, request.pt, step=processes.step
    )
    prepared.inputs = given or prepared.inputs
    return prepared


def _run(
    request: BackendsRequest,
    prepared: Prepared,
    backends: tuple[tuple[str, ...], str],
    notes: list[str],
    processes: Processes,
) -> Report:
    """The float run: every backend against the float64 referee (and HF's, for a
    keras-hub spec), and their gradients when asked."""
    from ..adapters.keras_backends import run_backends
    from ..compare.judge import Referee
    from .judge import DEFAULT_CEILING, BackendOutputs, check_backends

    chosen, referee = backends
    seed = request.seed if request.gradients else None
    plan = processes.plan(prepared.path, chosen, referee, gradients=seed)
    runs = run_backends(plan, prepared.inputs, request.jobs, processes.workers)
    for note in [*prepared.notes, *(n for run in runs.values() for n in run.notes)]:
        notes += [note] if note not in notes else []
    outputs = BackendOutputs(
        model=str(request.model),
        float32={b: runs[b].outputs["float32"] for b in chosen},
        truth=runs[referee].outputs["float64"],
        referee_backend=referee,
        precision={b: runs[b].precision for b in chosen},
        notes=notes,
        layer_facts={b: runs[b].layer_facts for b in chosen},
        parents={n: p for run in runs.values() for n, p in run.parents.items()},
    )
    ceiling = DEFAULT_CEILING if request.ceiling is None else request.ceiling
    report = check_backends(outputs, ceiling=ceiling)
    if prepared.hf:
        from .hf import HFReferee, check_against_hf, with_hf

        hf = HFReferee(prepared.reference, prepared.hf, prepared.aliases, prepared.mask)
        report = with_hf(report, check_against_hf(outputs, hf, Referee(), ceiling), hf.label)
    if request.gradients:
        from .gradients import BackendGradients, add_gradients

        held = BackendGradients.from_runs(runs, chosen, referee, request.seed)
        report = add_gradients(report, held, ceiling=ceiling)
    return report


def _texts(texts: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if texts is None else tuple(str(t) for t in texts)


ANCHOR = "tensorflow"  # the backend Keras quantised on: the others are held to its run


def run_quantised(
    request: BackendsRequest,
    prepared: Prepared,
    tmp: Path,
    backends: tuple[tuple[str, ...], str],
    notes: list[str],
    processes: Processes,
) -> Report:
    """Quantise (unless the file already is), run every backend (``backends``: the
    chosen ones and the referee's) on the quantised file, the referee's backend on the
    float file at float64, and judge; the processes come from ``processes``
    (:class:`Processes`, whose TensorFlow process quantises)."""
    from ..adapters.keras_backends import run_backends
    from ..adapters.keras_backends.inputs import vocabulary
    from ..adapters.tf_common.quantize import quantised_mode
    from .judge import DEFAULT_CEILING
    from .prepare import quantised_copy
    from .quantised import QuantisedOutputs, check_quantised_backends

    chosen, referee = backends
    config = prepared.model_config()
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


__all__ = ["BackendsRequest", "Processes", "run_request"]
