"""The kernel sets one artefact can run on, per artefact kind: the registry behind
``tfparity runtimes FILE``.

An artefact kind (a spec kind of :data:`~tfparity.adapters.sources.specs.EXPORT_KINDS`:
``litert``, ``onnx``) registers an :class:`ArtefactKernels`:
its kernel sets by name, which of them a thread count changes, and the module whose
``open_runs`` opens the file once per set and thread count. Adding a kind is one entry
here plus that module: the check (:mod:`tfparity.checks.runtimes`), the command and the
report know no kind. This module imports no framework, so ``--sets`` is checked before
TensorFlow loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch


@dataclass(frozen=True)
class KernelSet:
    """One way a runtime executes the artefact's ops: ``name`` (what ``--sets`` takes),
    ``what`` (in words, for the report), ``threaded``: whether it runs on several
    threads (then it runs at 1 and at N threads, else at 1 only), ``kernels``: the kind's
    own settings for it (a LiteRT op resolver's name, an ONNX Runtime level)."""

    name: str
    what: str
    threaded: bool = True
    kernels: Any = None


@dataclass(frozen=True)
class RunTensor:
    """One computed tensor of the artefact, as a kernel set ran it: its name in the
    graph, the op that made it and its values, cut back to the batch."""

    name: str
    op: str
    values: np.ndarray


class KernelRun(Protocol):
    """The artefact opened under one kernel set at one thread count."""

    @property
    def label(self) -> str:
        """``<set>@<threads>``, e.g. ``xnnpack@4``: the name the report gives it."""
        ...

    def tensors(self, batch: Batch) -> list[RunTensor]:
        """Every computed tensor the runtime lets one read, in execution order."""
        ...

    def outputs(self) -> dict[str, str]:
        """The graph's outputs: tensor name -> the name the report gives it
        (``last_hidden_state``)."""
        ...

    def side(self) -> Any:
        """The artefact under this set as a TF side (its config and tokenizer from the
        source), for the float64 referee to judge; None where no source was named."""
        ...


@dataclass
class KernelRunBase:
    """What every kind's :class:`KernelRun` holds: its ``label``, the ``runner`` of the
    artefact under its set, and ``base``, the artefact as a TF side with its source's
    config and tokenizer (None: no source was named)."""

    label: str
    runner: Any
    base: Any = field(default=None, kw_only=True)

    def side(self) -> Any:
        if self.base is None:
            return None
        return replace(self.base, runner=self.runner, name=f"{self.base.name} [{self.label}]")


@dataclass
class OpenedArtefact:
    """An artefact opened once per kernel set and thread count: ``runs`` in the
    registry's order; ``runtime``, what runs it (in words); ``vocabulary``, the ids
    random inputs may hold; ``max_tokens``, its static sequence length (None: dynamic);
    ``source_side``, the artefact as a TF side with its source's config and tokenizer
    (None without a source); ``quantisation``, the reduced precision it holds, in the
    words its side reports (None: float32 throughout)."""

    runs: list[KernelRun]
    runtime: str
    vocabulary: int
    max_tokens: int | None
    source_side: Any = None
    quantisation: str | None = None


@dataclass(frozen=True)
class ArtefactKernels:
    """An artefact kind's kernel sets (the first is the baseline the others are compared
    with where no source is named) and the module that opens them: its
    ``open_runs(spec, source, sets, threads, signature) -> OpenedArtefact``;
    ``tensorflow``: whether opening it needs TensorFlow (without a source: the CLI
    starts it only for a kind that does)."""

    kind: str
    sets: tuple[KernelSet, ...]
    module: str
    tensorflow: bool = True

    def named(self, names: Sequence[str] | None) -> tuple[KernelSet, ...]:
        """The sets ``names`` asks for, in the registry's order (None: all); an unknown
        name exits 2 listing the known ones."""
        if names is None:
            return self.sets
        known = {s.name: s for s in self.sets}
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            from ..sources.specs import EXPORT_KINDS

            raise TfparityError(
                f"--sets {','.join(names) or '(empty)'}: "
                f"{'unknown ' + ', '.join(repr(n) for n in unknown) if unknown else 'no set'}; "
                f"{EXPORT_KINDS.get(self.kind, self.kind)} runs on {', '.join(known)}."
            )
        return tuple(s for s in self.sets if s.name in names)

    def opener(self) -> Any:
        return importlib.import_module(self.module)


_LITERT = ArtefactKernels(
    kind="litert",
    sets=(
        KernelSet("reference", "LiteRT's reference kernels (BUILTIN_REF)", False, "BUILTIN_REF"),
        KernelSet(
            "xnnpack", "the optimised kernels with XNNPACK (AUTO, the default)", True, "AUTO"
        ),
        KernelSet(
            "optimised",
            "the optimised kernels without XNNPACK (BUILTIN_WITHOUT_DEFAULT_DELEGATES)",
            True,
            "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
        ),
    ),
    module="tfparity.adapters.exported.litert_kernels",
)

_ONNX = ArtefactKernels(
    kind="onnx",
    sets=(
        KernelSet(
            "none",
            "ONNX Runtime, graph optimisation off (ORT_DISABLE_ALL)",
            True,
            "ORT_DISABLE_ALL",
        ),
        KernelSet(
            "basic",
            "ONNX Runtime, constant folding and redundant nodes removed (ORT_ENABLE_BASIC)",
            True,
            "ORT_ENABLE_BASIC",
        ),
        KernelSet(
            "all",
            "ONNX Runtime, every optimisation: fusions (ORT_ENABLE_ALL, the default)",
            True,
            "ORT_ENABLE_ALL",
        ),
    ),
    module="tfparity.adapters.onnx.kernels",
    tensorflow=False,
)

# Artefact kind -> its kernel sets.
KERNEL_SETS: dict[str, ArtefactKernels] = {"litert": _LITERT, "onnx": _ONNX}


def kernels_for(kind: str | None, text: str) -> ArtefactKernels:
    """The kernel sets of the artefact ``text`` (a spec of kind ``kind``); exit 2 for
    anything without any."""
    if kind not in KERNEL_SETS:
        from ..sources.specs import EXPORT_KINDS

        files = " or ".join(EXPORT_KINDS.get(k, k) for k in KERNEL_SETS)
        raise TfparityError(
            f"`tfparity runtimes` takes an artefact with kernel sets, {files}, and runs it "
            f"on each kernel set of its runtime: {text} is not one."
        )
    return KERNEL_SETS[kind]


def parse_threads(threads: int | str | Sequence[int] | None, cores: int) -> tuple[int, ...]:
    """The thread counts to run the threaded sets at: ``--threads 1,4`` or a sequence;
    None: 1 and ``cores`` (at most 4; 1 alone on one core). Exit 2 for anything but
    counts >= 1."""
    if threads is None:
        return (1,) if cores < 2 else (1, min(cores, 4))
    items = threads.split(",") if isinstance(threads, str) else threads
    if isinstance(items, int):
        items = [items]
    counts = []
    for item in items:
        try:
            count = int(str(item).strip())
        except ValueError:
            count = 0
        if count < 1 or isinstance(item, bool):
            raise TfparityError(f"--threads takes thread counts >= 1 (e.g. 1,4), not {item!r}.")
        counts.append(count)
    if not counts:
        raise TfparityError("--threads names no thread count; give e.g. --threads 1,4.")
    return tuple(sorted(set(counts)))
