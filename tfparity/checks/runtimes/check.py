"""The runtimes check: one artefact on each of its kernel sets (``tfparity runtimes``).

A kernel set is one way a runtime executes the artefact's ops (LiteRT's reference
kernels, XNNPACK, the optimised kernels without XNNPACK), run at 1 thread and, where
threads change it, at N (:mod:`tfparity.adapters.runtime.kernel_sets`). Two ways to judge:

- **With a source** (the model the artefact was converted from): each run is
  cross-checked against PyTorch and judged by the float64 referee, as ``crosscheck``
  judges a float artefact (:func:`.crosscheck.check.crosscheck`). A run that fails is
  walked tensor by tensor against the first run that passed.
- **Without one**: the runs are judged against each other, every computed tensor in
  execution order, by the ``modes`` rule (fp32's rtol, atol scaled to the tensor's
  magnitude: :func:`.modes.mode_tolerance`). Runs that agree form groups; the largest
  is the consensus and every run outside it *parts*, named with the first tensor where
  it leaves the consensus, the op that made it and the evidence (the worst element).
  Two groups of one size have no consensus: each is named against the other.

Two runs are compared on the tensors both expose, by name: a set that rewrites the
graph (ONNX Runtime's fusions) hides the tensors inside what it fused, so a defect there
shows at the next tensor both have, and a run sharing no intermediate with the run it
is walked against is compared at the graph outputs alone (a note names it).

XNNPACK and the reference kernels differ by about one unit of fp32 rounding on a tiny
BERT (up to 0.97 x rtol x max|tensor| per tensor here); the rule allows 4.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ... import validation
from ...adapters.interfaces.sides import Reference
from ...adapters.runtime.kernel_sets import (
    ArtefactKernels,
    KernelRun,
    OpenedArtefact,
    RunTensor,
    parse_threads,
)
from ...compare import Comparison, Tolerance, compare_batches
from ...errors import TfparityError
from ...inputs import Batch, InputOptions, note_inputs, random_batches
from ...results import Report
from ..modes import TOLERANCE_SCALE, mode_tolerance


@dataclass(frozen=True)
class RuntimesOptions:
    """``sets``: the kernel sets to run (None: every one of the artefact's kind);
    ``threads``: the thread counts of the threaded sets; ``tolerance``: a fixed one
    instead of the scaled rule (against each other) or of the float64 referee (against
    the source)."""

    sets: tuple[str, ...] | None = None
    threads: tuple[int, ...] = (1,)
    tolerance: Tolerance | None = None
    scale: float = TOLERANCE_SCALE

    @classmethod
    def from_arguments(
        cls,
        kernels: ArtefactKernels,
        *,
        sets: str | Sequence[str] | None = None,
        threads: int | str | Sequence[int] | None = None,
        tolerance: Tolerance | None = None,
        cores: int = 1,
    ) -> RuntimesOptions:
        """The options ``tfparity runtimes`` and :func:`tfparity.check_runtimes` were
        given, checked once for both before any framework import (exit 2 for a set the
        artefact's kind lacks, a thread count below 1, a bad tolerance)."""
        validation.tolerance(tolerance)
        names = sets.split(",") if isinstance(sets, str) else sets
        chosen = None
        if names is not None:
            chosen = tuple(n.strip() for n in names if str(n).strip())
            kernels.named(chosen)
        return cls(chosen, parse_threads(threads, cores), tolerance)


@dataclass(frozen=True)
class Parting:
    """Where the run ``label`` first leaves the run ``against``: the tensor (the
    ``position``-th computed one of ``of``), the op that made it, and the comparison
    (the evidence: max abs diff, the worst element and both values there)."""

    label: str
    against: str
    tensor: str
    op: str
    position: int
    of: int
    comparison: Comparison

    def row(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "against": self.against,
            "tensor": self.tensor,
            "op": self.op,
            "position": self.position,
            "of": self.of,
            "max_abs_diff": c.max_abs_diff,
            "worst_index": list(c.worst_index) if c.worst_index is not None else None,
            "actual": c.worst_actual,
            "expected": c.worst_expected,
            "atol": c.atol,
            "rtol": c.rtol,
        }

    def sentence(self) -> str:
        c = self.comparison
        where = f" at {list(c.worst_index)}" if c.worst_index is not None else ""
        return (
            f"{self.label} parts from {self.against} at tensor {self.position}/{self.of} "
            f"'{self.tensor}' (op {self.op}): max abs diff {c.max_abs_diff:.3g}{where} "
            f"({c.worst_actual:.6g} vs {c.worst_expected:.6g}; allowed atol {c.atol:.3g}, "
            f"rtol {c.rtol:.3g})"
        )


Tensors = dict[str, list[list[RunTensor]]]  # run label -> per batch, its tensors


def check_runtimes(
    opened: OpenedArtefact,
    batches: Sequence[Batch],
    options: RuntimesOptions = RuntimesOptions(),
    reference: Reference | None = None,
    name: str = "",
) -> Report:
    """Every run of ``opened`` on ``batches``: against PyTorch (``reference``, with the
    float64 referee) where given, else against each other."""
    runs = opened.runs
    tensors: Tensors = {r.label: [r.tensors(b) for b in batches] for r in runs}
    rule = _rule(options)
    tie = False
    if reference is not None:
        verdicts, comparisons, divergence = _against_source(opened, reference, batches, options)
        passing = [label for label, ok in verdicts.items() if ok]
        parted = [label for label in verdicts if not verdicts[label]]
        partings = [
            p
            for label in parted
            if passing and (p := first_parting(tensors, label, passing[0], rule)) is not None
        ]
        baseline = passing[0] if passing else runs[0].label
        judge = "the float64 referee, each run against PyTorch (crosscheck's judge)"
        if options.tolerance is not None:
            t = options.tolerance
            judge = f"each run against PyTorch: fixed atol {t.atol:g}, rtol {t.rtol:g}"
    else:
        partings, consensus, tie = _against_each_other(tensors, rule)
        baseline = consensus
        parted = sorted({p.label for p in partings}, key=list(tensors).index)
        comparisons = _output_comparisons(runs, tensors, consensus, rule)
        comparisons += [replace(p.comparison, name=f"{p.label}:{p.tensor}") for p in partings]
        divergence = None
        judge = _rule_text(options)
    rows = [
        {
            "run": r.label,
            "set": r.label.split("@")[0],
            "threads": int(r.label.rsplit("@", 1)[1]) if "@" in r.label else None,
            "passed": r.label not in parted,
            "tensors": len(tensors[r.label][0]),
            "compared": shared_tensors(tensors, r.label, baseline),
            "parting": next((p.row() for p in partings if p.label == r.label), None),
        }
        for r in runs
    ]
    notes = [p.sentence() for p in partings]
    if tie:
        notes.append(
            "No group of runs that agree outnumbers the others, so which side is wrong "
            "cannot be told: each is named against the other; run more sets or threads."
        )
    notes += _outputs_only(runs, tensors, baseline)
    if reference is None and parted:
        notes += _integer_note(opened.quantisation)
    report = Report(
        check="runtimes",
        model=name,
        passed=not parted,
        comparisons=comparisons,
        first_divergence=divergence,
        notes=notes,
        details={
            "runtime": opened.runtime,
            "judge": judge,
            "reference": None if reference is None else reference.name,
            "runs": rows,
            "parting": parted,
            "batches": len(batches),
            "sequences": int(sum(b.input_ids.shape[0] for b in batches)),
        },
    )
    return note_inputs(report, batches)


def random_inputs(opened: OpenedArtefact, inputs: InputOptions | None) -> list[Batch]:
    """The inputs of an artefact without a source (so without a tokenizer): seeded
    random ids below its vocabulary, ``inputs.random`` sequences (default 8) of up to
    ``seq_len`` tokens, cut to its static sequence length where it has one."""
    options = inputs or InputOptions()
    if options.texts is not None:
        raise TfparityError(
            "Texts need a tokenizer, which an artefact does not hold: name the model it "
            "was converted from (--source MODEL), or give --random N."
        )
    seq = min(options.seq_len, opened.max_tokens or options.seq_len)
    return random_batches(
        options.random or 8,
        seq,
        opened.vocabulary,
        batch_size=options.batch_size,
        seed=options.seed,
        padding_side=options.padding_side or "right",
    )


def _integer_note(quantisation: str | None) -> list[str]:
    """Why runs of an integer file may part without a defect, and what judges them: the
    kernel sets quantise activations and round their own way (LiteRT's reference
    kernels against XNNPACK: a relative RMSE of 9% at a layer of a clean all-MiniLM-L6-v2
    in dynamic-range int8), far beyond the fp32 rule the runs are held to here."""
    if quantisation is None or "int" not in quantisation:  # float32, float16
        return []
    return [
        f"The file is {quantisation}: kernel sets may compute its integer ops their own way "
        "(how they quantise activations, how they round), which parts runs by more than "
        "the fp32 rule allows without a defect. Name the model it was converted from "
        "(--source MODEL) to judge each run against PyTorch by the quantised budgets."
    ]


def _rule(options: RuntimesOptions) -> Callable[[float], Tolerance]:
    """A tensor's tolerance from its expected side's magnitude."""
    if options.tolerance is not None:
        fixed = options.tolerance
        return lambda magnitude: fixed
    return lambda magnitude: mode_tolerance("float32", magnitude, options.scale)


def _rule_text(options: RuntimesOptions) -> str:
    if options.tolerance is not None:
        t = options.tolerance
        return f"runs against each other, every tensor: fixed atol {t.atol:g}, rtol {t.rtol:g}"
    rtol = mode_tolerance("float32", 0.0).rtol
    return (
        f"runs against each other, every tensor: rtol {rtol:g}, "
        f"atol {options.scale:g}*rtol*max|tensor|"
    )


def first_parting(
    tensors: Tensors, label: str, against: str, rule: Callable[[float], Tolerance]
) -> Parting | None:
    """The first tensor, in ``against``'s execution order, where run ``label`` leaves
    run ``against`` (each tensor judged by ``rule`` of ``against``'s magnitude); None
    where none does. Only the tensors both runs expose are compared (by name: a set
    that fuses ops hides the tensors inside the fusion); ``position``/``of`` count
    those."""
    mine, theirs = tensors[label], tensors[against]
    index = {t.name: k for k, t in enumerate(mine[0])}
    shared = [(k, index[t.name]) for k, t in enumerate(theirs[0]) if t.name in index]
    for position, (k, j) in enumerate(shared, 1):
        actual = [batch[j].values for batch in mine]
        expected = [batch[k].values for batch in theirs]
        tolerance = rule(max(_peak(x) for x in expected))
        if all(_within(a, e, tolerance) for a, e in zip(actual, expected, strict=True)):
            continue
        name = theirs[0][k].name
        found = compare_batches(actual, expected, name=name, tolerance=tolerance, check_dtype=False)
        return Parting(label, against, name, theirs[0][k].op, position, len(shared), found)
    return None


def shared_tensors(tensors: Tensors, label: str, against: str) -> int:
    """How many tensors runs ``label`` and ``against`` both expose (by name)."""
    return len({t.name for t in tensors[label][0]} & {t.name for t in tensors[against][0]})


def _outputs_only(runs: Sequence[KernelRun], tensors: Tensors, baseline: str) -> list[str]:
    """A note naming the runs that share no tensor but the graph's outputs with the run
    they are walked against (an optimised graph that fused every intermediate away, or
    one whose intermediates could not be read)."""
    outputs = set(runs[0].outputs())
    mine = {t.name for t in tensors[baseline][0]}
    alone = [r.label for r in runs if not ({t.name for t in tensors[r.label][0]} & mine) - outputs]
    if not alone:
        return []
    return [
        f"Compared at the graph outputs only: {', '.join(alone)} (no intermediate tensor "
        f"in common with {baseline}, the run the others are walked against)."
    ]


def _peak(x: np.ndarray) -> float:
    finite = np.abs(np.asarray(x, np.float64))
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if finite.size else 0.0


def _within(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> bool:
    """numpy's isclose rule, NaN equal to NaN: the quick screen before a comparison."""
    if actual.shape != expected.shape:
        return False
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    close = np.isclose(a, e, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)
    return bool(close.all())


def _against_each_other(
    tensors: Tensors, rule: Callable[[float], Tolerance]
) -> tuple[list[Parting], str, bool]:
    """The partings of every run outside the consensus (the largest group of runs that
    agree with each other), each against the consensus's first run; that run; and
    whether groups tie for largest (no consensus: the first group's runs are then named
    against the second's first run too)."""
    labels = list(tensors)
    agree = {a: {a} for a in labels}
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if first_parting(tensors, b, a, rule) is None:
                agree[a].add(b)
                agree[b].add(a)
    groups: list[list[str]] = []
    for a in labels:  # runs that agree with the same runs are one group
        if not any(agree[a] == agree[g[0]] for g in groups):
            groups.append([x for x in labels if agree[x] == agree[a]])
    largest = max(len(g) for g in groups)
    leaders = [g for g in groups if len(g) == largest]
    consensus, tie = leaders[0], len(leaders) > 1
    against = {x: consensus[0] for x in labels if x not in consensus}
    if tie:
        against.update({x: leaders[1][0] for x in consensus})
    partings = []
    for label in labels:
        if label in against:
            parting = first_parting(tensors, label, against[label], rule)
            if parting is not None:
                partings.append(parting)
    return partings, consensus[0], tie


def _output_comparisons(
    runs: Sequence[KernelRun],
    tensors: Tensors,
    against: str,
    rule: Callable[[float], Tolerance],
) -> list[Comparison]:
    """Each run's graph outputs against the consensus run's, named ``<run>:<output>``."""
    outputs = runs[0].outputs()
    found = []
    for run in runs:
        if run.label == against:
            continue
        index = {t.name: j for j, t in enumerate(tensors[run.label][0])}
        for k, tensor in enumerate(tensors[against][0]):
            if tensor.name not in outputs or tensor.name not in index:
                continue
            expected = [t[k].values for t in tensors[against]]
            actual = [t[index[tensor.name]].values for t in tensors[run.label]]
            c = compare_batches(
                actual,
                expected,
                name=f"{run.label}:{outputs[tensor.name]}",
                tolerance=rule(max(_peak(x) for x in expected)),
                check_dtype=False,
            )
            found.append(c)
    return found


def _against_source(
    opened: OpenedArtefact, reference: Any, batches: Sequence[Batch], options: RuntimesOptions
) -> tuple[dict[str, bool], list[Comparison], Any]:
    """Each run cross-checked against PyTorch by the float64 referee (by a fixed
    tolerance where one is given): its verdict, its comparisons named
    ``<run>:<tensor>``, and the first failing run's divergence."""
    from ..crosscheck.check import CrosscheckOptions, crosscheck

    judged = CrosscheckOptions(label="runtimes", tolerance=options.tolerance)
    verdicts, comparisons, divergence = {}, [], None
    for run in opened.runs:
        report = crosscheck(run.side(), reference, batches, judged)
        verdicts[run.label] = report.passed
        comparisons += [replace(c, name=f"{run.label}:{c.name}") for c in report.comparisons]
        if divergence is None and report.first_divergence is not None:
            divergence = report.first_divergence
    return verdicts, comparisons, divergence
