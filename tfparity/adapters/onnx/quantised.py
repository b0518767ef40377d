"""What a quantised ONNX graph is, read from its operators, and where each of its scales
sits.

ONNX Runtime's quantiser writes two kinds of int8 graph: ``quantize_dynamic`` quantises
the weights ahead of time and the activations at run time (``DynamicQuantizeLinear``
feeding ``MatMulInteger``), ``quantize_static`` quantises activations with scales
calibrated ahead of time (``QuantizeLinear``/``DequantizeLinear`` pairs, or ``QLinear*``
operators). The kind decides the budget the cross-check holds the file to
(:mod:`tfparity.compare.budgets`).

A scale is named after its weight only where the weight had a name: a Linear's weight
that the legacy exporter folded into a transposed copy is ``onnx::MatMul_286``, so its
scale is ``onnx::MatMul_286_scale``, which says no layer. Each scale is therefore put on
its layer through the graph: the node that reads it (``DequantizeLinear``, or the
``Mul`` that joins it with the activation's scale after a ``MatMulInteger``), else the
node that reads that node's output, where the module path lies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...architectures import tf_scopes, torch_scopes
from ...compare.quantisation import ONNX_DYNAMIC_INT8 as DYNAMIC_INT8
from ...compare.quantisation import ONNX_STATIC_INT8 as STATIC_INT8

ONNX = "onnx "  # the prefix of an ONNX-quantised side's kind
_DYNAMIC_OPS = {"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger"}
_STATIC_OPS = {"QuantizeLinear", "QLinearMatMul", "QLinearConv", "QLinearAdd", "QLinearMul"}
_SCALED_BY = {"DequantizeLinear", "QuantizeLinear"}  # their input 1 is a scale
_INTEGER = {2, 3, 6}  # onnx.TensorProto.UINT8, INT8, INT32 (a bias)
_FLOAT = 1


def quantisation(op_types: list[str]) -> str | None:
    """``onnx dynamic int8`` where activations are quantised at run time, ``onnx static
    int8`` where calibrated scales quantise them (a QuantizeLinear, a QLinear operator),
    ``onnx dynamic int8`` too where only weights are dequantised (activations stay float);
    None: no quantisation operator."""
    ops = set(op_types)
    if ops & _DYNAMIC_OPS:
        return DYNAMIC_INT8
    if ops & _STATIC_OPS or any(op.startswith("QLinear") for op in ops):
        return STATIC_INT8
    return DYNAMIC_INT8 if "DequantizeLinear" in ops else None


@dataclass(frozen=True)
class ScaleMap:
    """One scale initializer and where it sits: ``scaled`` (the int8 weight, or the
    activation, it scales), whether that is a weight, the module path of the node that
    placed it (``module``) and its layer (an index, ``embeddings``, or None: outside the
    layers, a pooler or a head)."""

    scale: str
    scaled: str
    weight: bool
    module: str
    layer: int | str | None

    def named(self) -> str:
        """The scale and the module reading it, dotted: ``onnx::MatMul_286_scale
        (m.encoder.layer.1.intermediate.dense)``."""
        module = self.module.strip("/").replace("/", ".")
        return f"{self.scale} ({module.rsplit('.', 1)[0] if '/' in self.module else module})"

    def where(self) -> str:
        place = "embeddings" if self.layer == "embeddings" else f"layer {self.layer}"
        return f"{self.scale} -> {place if self.layer is not None else self.module}"


def scale_map(graph: Any, scope_of: Callable[[Any], str]) -> list[ScaleMap]:
    """Every scale initializer of ``graph`` (a ``GraphProto``) put on a layer through the
    nodes that read it (``scope_of``: a node's module path)."""
    initializers = {t.name: t for t in graph.initializer}
    readers: dict[str, list[Any]] = {}
    writers = {out: node for node in graph.node for out in node.output}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    found = []
    for node in graph.node:
        for scale, scaled in _scales_of(node, readers, writers, initializers):
            if scale not in initializers or initializers[scale].data_type != _FLOAT:
                continue
            gather = writers.get(scaled)
            if gather is not None and gather.op_type == "Gather":  # a quantised table's rows
                scaled = gather.input[0]
            weight = scaled in initializers and initializers[scaled].data_type in _INTEGER
            module, layer = _placed(node, readers, scope_of)
            found.append(ScaleMap(scale, scaled, weight, module, layer))
    unique = {m.scale: m for m in found}  # an activation's scale read twice: once
    return list(unique.values())


def _scales_of(
    node: Any, readers: dict[str, list[Any]], writers: dict[str, Any], initializers: dict
) -> list[tuple[str, str]]:
    """(scale, what it scales) that ``node`` reads: a (De)QuantizeLinear's input 1 over
    its input 0; a MatMulInteger's weight scale, the initializer in the ``Mul`` that
    multiplies its (cast) output (quantize_dynamic's ``_quant_scales_mul``)."""
    if node.op_type in _SCALED_BY and len(node.input) > 1:
        return [(node.input[1], node.input[0])]
    if node.op_type not in ("MatMulInteger", "ConvInteger") or len(node.input) < 2:
        return []
    after = [n for out in node.output for n in readers.get(out, [])]
    after += [m for n in after if n.op_type == "Cast" for m in readers.get(n.output[0], [])]
    product = {i for n in after if n.op_type == "Mul" for i in n.input}
    joined = [i for p in product if p in writers and writers[p].op_type == "Mul"
              for i in writers[p].input]  # fmt: skip
    return [(s, node.input[1]) for s in [*joined, *sorted(product)] if s in initializers]


def _placed(
    node: Any, readers: dict[str, list[Any]], scope_of: Callable[[Any], str]
) -> tuple[str, int | str | None]:
    """The module path and layer of ``node``, else of the first node after it (two steps
    at most) whose path says one: a weight's DequantizeLinear named after the weight
    (``onnx::MatMul_286_DequantizeLinear``) is placed by the MatMul reading its output."""
    frontier, first = [node], scope_of(node)
    for _ in range(3):
        for n in frontier:
            scope = scope_of(n)
            for names in (torch_scopes, tf_scopes):
                layer = names.layer_of(scope)
                if layer is not None:
                    return scope, layer
                if names.is_embedding_scope(scope):
                    return scope, "embeddings"
        frontier = [r for n in frontier for out in n.output for r in readers.get(out, [])]
    return first, None


def read_back_node(
    scale: ScaleMap, readers: dict[str, list[Any]], initializers: dict[str, Any]
) -> Any | None:
    """The node that reads ``scale``'s weight back to float, whose zero point goes with
    it: the ``DequantizeLinear`` reading the scale (quantize_static, or a table's rows
    gathered first), else the ``MatMulInteger`` reading the weight (quantize_dynamic);
    None for a scale no integer initializer goes with."""
    if scale.scaled not in initializers:
        return None
    for node in readers.get(scale.scale, []):
        if node.op_type == "DequantizeLinear":
            return node
    for node in readers.get(scale.scaled, []):
        if node.op_type in ("MatMulInteger", "ConvInteger") and node.input[1] == scale.scaled:
            return node
    return None


def scales_text(graph: Any) -> str:
    """The report note's words on a quantised graph (``graph``: a :class:`.graph.Graph`):
    its kind, and how many weight scales were put on a layer through the graph because
    their names say none (empty for a float graph)."""
    kind = graph.quantisation()
    if kind is None:
        return ""
    weights = [m for m in graph.weight_scales() if m.weight]
    unnamed = [m for m in weights if not _says_layer(m.scale)]
    placed = sum(m.layer is not None for m in unnamed)
    return (
        f"; the graph is {kind.removeprefix(ONNX)} (ONNX Runtime's quantiser), judged by "
        f"budgets; {len(weights)} weight scales, {len(unnamed)} of them named after no "
        f"layer ({placed} placed on one through the nodes reading them)"
    )


def _says_layer(name: str) -> bool:
    """Whether a tensor's own name says its layer or the embeddings."""
    return any(
        names.layer_of(name) is not None or names.is_embedding_scope(name)
        for names in (torch_scopes, tf_scopes)
    )
