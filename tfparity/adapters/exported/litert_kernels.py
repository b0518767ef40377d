"""One LiteRT flatbuffer opened on each kernel set (``tfparity runtimes``): an
interpreter per op resolver and thread count, each keeping every intermediate tensor
(``experimental_preserve_all_tensors``), read back in the graph's execution order.

The sets are :data:`~tfparity.adapters.runtime.kernel_sets.KERNEL_SETS`'s ``litert``
entry; a set's ``kernels`` is an op resolver's name or a :class:`.litert_runner.Kernels`
(which may rewrite the flatbuffer it is given: a test's kernel set that runs one op its
own way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...errors import TfparityError
from ...inputs import Batch
from ..runtime.kernel_sets import KernelRunBase, KernelSet, OpenedArtefact, RunTensor
from ..sources.specs import ModelSpec
from .litert_graph import Graph, flatbuffer_schema
from .litert_runner import Kernels, Runner, hf_name, runtime_name


@dataclass
class LiteRTKernelRun(KernelRunBase):
    """The flatbuffer under one kernel set at one thread count (``base``: the LiteRTModel
    with its source's config)."""

    graph: Graph

    def tensors(self, batch: Batch) -> list[RunTensor]:
        made = {i: op.code for op in self.graph.operators for i in op.outputs}
        order = [i for i in made if self.graph.tensors[i].activation]
        _, kept = self.runner.run(batch, keep=tuple(order))
        found, seen = [], set()
        for i in order:
            info = self.graph.tensors[i]
            name = info.name.split(";")[0] or f"tensor {i}"
            name = name if name not in seen else f"{name} (tensor {i})"
            seen.add(name)
            found.append(RunTensor(name, made[i], info.real(kept[i])))
        return found

    def outputs(self) -> dict[str, str]:
        details = self.runner.interpreter(keep=True).get_signature_runner(self.runner.signature)
        by_index = {d["index"]: hf_name(n) for n, d in details.get_output_details().items()}
        return {
            self.graph.tensors[i].name.split(";")[0]: by_index[i]
            for i in by_index
            if i < len(self.graph.tensors)
        }


def open_runs(
    spec: ModelSpec,
    source: Any,
    sets: Sequence[KernelSet],
    threads: Sequence[int],
    signature: str | None = None,
) -> OpenedArtefact:
    """The flatbuffer ``spec`` names, opened once per set in ``sets`` (a threaded set
    at each of ``threads``, the others at 1); with ``source`` (a MODEL spec) each run is
    also a TF side with its source's config and tokenizer."""
    path = Path(spec.location)
    data = path.read_bytes()
    if data[4:8] != b"TFL3":
        raise TfparityError(
            f"{spec.text} is not a LiteRT flatbuffer (its bytes 4-8 are not the TFL3 "
            "identifier): name the .tflite file tf.lite.TFLiteConverter wrote."
        )
    graph = Graph.read(data)
    base = None
    if source is not None:
        from . import load_export

        base = load_export(spec, source, signature)
    pad = getattr(base.config, "pad_token_id", None) if base is not None else None
    runs = []
    for kernel_set in sets:
        for count in threads if kernel_set.threaded else (1,):
            kernels = kernel_set.kernels
            if isinstance(kernels, Kernels):
                kernels = replace(kernels, threads=count)
            else:
                kernels = Kernels(str(kernels), count)
            runner = Runner.open(path, pad, signature, kernels)
            runs.append(LiteRTKernelRun(f"{kernel_set.name}@{count}", runner, graph, base=base))
    first = runs[0].runner
    return OpenedArtefact(
        runs=list(runs),
        runtime=f"{runtime_name()}, signature '{first.signature}'",
        vocabulary=_vocabulary(graph, first, spec.text),
        max_tokens=first.static[1],
        source_side=base,
        quantisation=graph.quantisation(),
    )


def _vocabulary(graph: Graph, runner: Runner, text: str) -> int:
    """The rows of the embedding table the token ids index: the GATHER that reads the
    signature's ids input (through a CAST, if any), else the first GATHER of a constant
    table."""
    details = runner.interpreter(keep=False).get_signature_runner(runner.signature)
    ids = {details.get_input_details()[runner.inputs["ids"]]["index"]}
    for op in graph.operators:  # the ids as cast to another integer type are ids too
        if op.code == "CAST" and set(op.inputs) & ids:
            ids |= set(op.outputs)
    gathers = [op for op in graph.operators if op.code == "GATHER" and len(op.inputs) == 2]
    tables = [graph.tensors[op.inputs[0]] for op in gathers if op.inputs[1] in ids]
    tables += [graph.tensors[op.inputs[0]] for op in gathers]
    for table in tables:
        if table.constant and len(table.shape) == 2:
            return int(table.shape[0])
    raise TfparityError(
        f"{text}: no embedding table found to draw random token ids from; name the model "
        "it was converted from (--source MODEL), which gives its vocabulary."
    )


@dataclass(frozen=True)
class RewrittenOp(Kernels):
    """Kernels that run the first ``op`` (a builtin operator's name, ``SOFTMAX``) with
    one of its options changed (``option`` set to ``value``, e.g. SOFTMAX's ``beta``):
    how a test builds a kernel path that computes one op otherwise, and so sees
    ``tfparity runtimes`` name it (``tfparity.testing.broken_kernel_set``)."""

    op: str = "SOFTMAX"
    option: str = "beta"
    value: float = 1.05

    def content(self, data: bytes) -> bytes:
        import flatbuffers

        schema = flatbuffer_schema()
        model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
        code = getattr(schema.BuiltinOperator, self.op)
        codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
        op = next((o for o in model.subgraphs[0].operators if codes[o.opcodeIndex] == code), None)
        if op is None or not hasattr(op.builtinOptions, self.option):
            raise TfparityError(f"The flatbuffer has no {self.op} op with a '{self.option}'.")
        setattr(op.builtinOptions, self.option, self.value)
        builder = flatbuffers.Builder(len(data))
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())
