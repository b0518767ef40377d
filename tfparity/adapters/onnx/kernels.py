"""One ONNX file opened on each of ONNX Runtime's graph optimisation levels (``tfparity
runtimes``): a session per level and thread count, and the tensors each one computes.

The sets are :data:`~tfparity.adapters.runtime.kernel_sets.KERNEL_SETS`'s ``onnx``
entry; a set's ``kernels`` is a ``GraphOptimizationLevel`` name or a :class:`Kernels`
(which may rewrite the graph it is given: a test's set that runs one op its own way).

Optimisation rewrites the graph before it runs: at ``basic`` it folds constants and
drops redundant nodes, at ``all`` it fuses (``FusedMatMul``, ``BiasGelu``,
``FusedGemm``, ``LayerNormalization``), and the tensors inside a fusion no longer exist.
So each run's tensors are read from the graph ONNX Runtime made of the file under that
level (``optimized_model_filepath``), with every tensor of *that* graph marked as an
output and no further optimisation: the same kernels on the same nodes, as the outputs
show (they equal the deployed session's bit for bit on tiny BERT). A fused node's output
keeps the name of the last tensor it replaces, so the runs share most tensor names; the
check compares the tensors two runs have in common. Where the optimised graph cannot be
written or marked (over protobuf's 2 GB, a node ONNX Runtime cannot load back), a run
exposes its graph outputs alone, and the check says it was compared at the outputs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import TfparityError
from ...inputs import Batch
from ..exported.litert_runner import hf_name
from ..runtime.kernel_sets import KernelRunBase, KernelSet, OpenedArtefact, RunTensor
from ..sources.specs import ModelSpec
from .graph import Graph
from .runner import Runner
from .session import import_ort, provider, providers, read_model, refusal

_FLOATS = ("tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)")


@dataclass(frozen=True)
class Kernels:
    """How a set runs the file: ONNX Runtime's graph optimisation ``level`` (a
    ``GraphOptimizationLevel`` name, ``ORT_ENABLE_ALL``)."""

    level: str = "ORT_ENABLE_ALL"

    def model(self, model: Any) -> Any:
        """The ``ModelProto`` this set runs: None, the file as it is."""
        return None


@dataclass(frozen=True)
class ScaledInput(Kernels):
    """Kernels that run the first ``op`` node (``Softmax``) on its first input times
    ``factor`` (a ``Mul`` inserted before it): how a test builds a kernel path that
    computes one op otherwise, and so sees ``tfparity runtimes`` name it
    (``tfparity.testing.broken_onnx_kernel_set``)."""

    op: str = "Softmax"
    factor: float = 1.05

    def model(self, model: Any) -> Any:
        import onnx
        from onnx import helper, numpy_helper

        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        nodes = list(copy.graph.node)
        at = next((i for i, n in enumerate(nodes) if n.op_type == self.op), None)
        if at is None:
            raise TfparityError(f"The ONNX graph has no {self.op} node to rewrite.")
        node = nodes[at]
        scaled, factor = f"{node.input[0]}__scaled", f"{node.name or self.op}__factor"
        copy.graph.initializer.append(numpy_helper.from_array(_float32(self.factor), factor))
        mul = helper.make_node("Mul", [node.input[0], factor], [scaled], name=f"{factor}__mul")
        node.input[0] = scaled
        copy.graph.node.insert(at, mul)
        return copy


def _float32(value: float) -> Any:
    import numpy as np

    return np.array(value, np.float32)


@dataclass
class ONNXKernelRun(KernelRunBase):
    """The file under one kernel set at one thread count: ``runner`` runs the session as
    deployed (its outputs), ``reader`` the optimised graph with its tensors marked
    (None: the outputs alone), ``exposed`` those tensors (name, op) in execution order;
    ``base``: the ONNXModel with its source's config."""

    reader: Runner | None
    exposed: list[tuple[str, str]]

    def tensors(self, batch: Batch) -> list[RunTensor]:
        outputs = set(self.runner.graph.outputs)
        inside = tuple(n for n, _ in self.exposed if n not in outputs)
        out, kept = (self.reader or self.runner).run(batch, read=inside)
        found = []
        for name, op in self.exposed:
            values = kept[name] if name in kept else out[hf_name(name)]
            found.append(RunTensor(name, op, values))
        return found

    def outputs(self) -> dict[str, str]:
        return {name: hf_name(name) for name in self.runner.graph.outputs}


def open_runs(
    spec: ModelSpec,
    source: Any,
    sets: Sequence[KernelSet],
    threads: Sequence[int],
    signature: str | None = None,
) -> OpenedArtefact:
    """The ONNX file ``spec`` names, opened once per set in ``sets`` at each of
    ``threads``; with ``source`` (a MODEL spec) each run is also a TF side with its
    source's config and tokenizer."""
    if signature is not None:
        raise TfparityError(
            f"--signature names a signature of a SavedModel or a LiteRT flatbuffer; "
            f"{spec.text} is an ONNX file, which has none to choose."
        )
    path = Path(spec.location)
    base = None
    if source is not None:
        from ..exported import load_export

        base = load_export(spec, source)
        first = base.runner
    else:
        first = Runner.open(path, Graph.read(read_model(path)), None)
    runs, unread = [], {}
    with tempfile.TemporaryDirectory(prefix="tfparity-onnx-") as scratch:
        for kernel_set in sets:
            kernels = kernel_set.kernels
            if not isinstance(kernels, Kernels):
                kernels = Kernels(str(kernels))
            rewritten = kernels.model(first.graph.model)
            graph = first.graph if rewritten is None else Graph.read(rewritten)
            model = str(path) if rewritten is None else rewritten.SerializeToString()
            for count in threads if kernel_set.threaded else (1,):
                label = f"{kernel_set.name}@{count}"
                saved = Path(scratch) / f"{label}.onnx"
                session = _session(model, path, kernels.level, count, saved)
                runner = first.reopened(graph, session)
                reader, exposed, why = _exposed(runner, saved, count)
                runs.append(ONNXKernelRun(label, runner, reader, exposed, base=base))
                unread.update({label: why} if why else {})
    ort = import_ort()
    kind = "dynamic" if first.dynamic else "static"
    shape = "x".join("?" if d is None else str(d) for d in first.static)
    runtime = f"ONNX Runtime {ort.__version__} ({provider()}), {kind} input shape [{shape}]"
    if unread:  # said where the check notes a run compared at its outputs only
        runtime += f"; graph outputs only for {', '.join(unread)} ({next(iter(unread.values()))})"
    return OpenedArtefact(
        runs=list(runs),
        runtime=runtime,
        vocabulary=_vocabulary(first.graph, first.inputs["ids"], spec.text),
        max_tokens=first.static[1],
        source_side=base,
        quantisation=first.graph.quantisation(),
    )


def _session(model: str | bytes, path: Path, level: str, threads: int, saved: Path) -> Any:
    """A session of ``model`` at optimisation ``level`` on ``threads`` threads, writing
    the graph it optimised to ``saved`` (where it cannot, a 2 GB graph, none is
    written: the run then exposes its outputs alone)."""
    ort = import_ort()
    options = _options(level, threads)
    try:
        options.optimized_model_filepath = str(saved)
        return ort.InferenceSession(model, options, providers=_providers())
    except Exception:  # ONNX Runtime raises its own classes, one per status code
        options.optimized_model_filepath = ""
        saved.unlink(missing_ok=True)
    try:
        return ort.InferenceSession(model, options, providers=_providers())
    except Exception as exc:
        raise refusal(path, str(exc)) from None


def _options(level: str, threads: int) -> Any:
    ort = import_ort()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.intra_op_num_threads = threads
    return options


def _providers() -> list[Any]:
    """CUDA's first where present; the CPU's takes the nodes CUDA has no kernel for."""
    return providers()


def _exposed(runner: Runner, saved: Path, threads: int) -> tuple[Runner | None, list, str]:
    """The runner reading every float tensor of the optimised graph at ``saved`` (its
    nodes marked as outputs, run without optimising again), those tensors (name, op) in
    execution order, and ""; (None, the graph outputs, why) where that graph cannot be
    read back, marked or loaded."""
    outputs = runner.graph.outputs
    try:
        import onnx
        from onnx.external_data_helper import load_external_data_for_model

        # its weights stay where the file keeps them: in its own data file, if any
        optimised = onnx.load(str(saved), load_external_data=False)
        load_external_data_for_model(optimised, str(runner.path.parent))
        made = [(o, n.op_type) for n in optimised.graph.node for o in n.output if o]
        # marking needs the model and its outputs alone (no shape inference here: it
        # knows no com.microsoft op)
        marked = Graph(optimised, [], [], [o.name for o in optimised.graph.output])
        data = marked.marked([o for o, _ in made])
        options = _options("ORT_DISABLE_ALL", threads)
        session = import_ort().InferenceSession(data, options, providers=_providers())
    except Exception as exc:  # not written, too large, a node ORT cannot load back
        ops = {o: n.op_type for n in runner.graph.model.graph.node for o in n.output}
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        return None, [(o, ops.get(o, "output")) for o in outputs], why
    floats = {o.name for o in session.get_outputs() if o.type in _FLOATS and o.shape}
    exposed = [(o, op) for o, op in made if o in floats]
    exposed += [(o, "output") for o in outputs if o not in {n for n, _ in made}]
    return runner.reopened(runner.graph, runner.session, session), exposed, ""


def _vocabulary(graph: Graph, ids: str, text: str) -> int:
    """The rows of the embedding table the token ids index: the Gather that reads the
    ids input (through a Cast, if any), else the first Gather of a 2-D weight."""
    tables = {t.name: list(t.dims) for t in graph.model.graph.initializer}
    names = {ids}
    for node in graph.model.graph.node:  # the ids as cast to another type are ids too
        if node.op_type == "Cast" and set(node.input) & names:
            names |= set(node.output)
    gathers = [n for n in graph.model.graph.node if n.op_type == "Gather" and len(n.input) == 2]
    ordered = [n for n in gathers if n.input[1] in names] + gathers
    for node in ordered:
        dims = tables.get(node.input[0])
        if dims is not None and len(dims) == 2:
            return int(dims[0])
    raise TfparityError(
        f"{text}: no embedding table found to draw random token ids from; name the model "
        "it was exported from (--source MODEL), which gives its vocabulary."
    )
