"""What an ONNX graph holds, read from its ``ModelProto``: nodes in execution order with
their name scopes and inferred shapes, its inputs, and its weights; from these, a copy
with every intermediate tensor marked as an output, which of those tensors are which
layer's output, and the weights by PyTorch name.

Marking every intermediate (as Polygraphy's ``--onnx-outputs mark all`` does) keeps
ONNX Runtime from fusing the nodes that make them: the marked run is the unoptimised
graph's, which the report says. Nodes are named by their module path (the PyTorch
legacy exporter: ``/bert/encoder/layer.0/output/LayerNorm/...``) or their TF op name
(tf2onnx: ``tf_bert_model/bert/encoder/layer_._0/output/...``); both are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...architectures import tf_scopes, torch_scopes
from ...compare.dequantised import DequantisedWeight
from ...errors import TfparityError
from .quantised import ScaleMap, quantisation, read_back_node, scale_map

_FLOAT = 1  # onnx.TensorProto.FLOAT
_NAME_SCOPES = "pkg.torch.onnx.name_scopes"
# tf2onnx names a weight after the op reading its variable: the TF variable it stands for
_TF_WEIGHTS = (
    (re.compile(r"^(.*?)/(?:Tensordot|MatMul)/ReadVariableOp:0$"), "kernel"),
    (re.compile(r"^(.*)/BiasAdd/ReadVariableOp:0$"), "bias"),
    (re.compile(r"^(.*/LayerNorm)/batchnorm/mul/ReadVariableOp:0$"), "gamma"),
    (re.compile(r"^(.*/LayerNorm)/batchnorm/ReadVariableOp:0$"), "beta"),
)


@dataclass(frozen=True)
class Produced:
    """One tensor a node makes: its name, its node's name scope, and what shape
    inference knows of it (rank and last dimension; None where unknown)."""

    name: str
    scope: str
    rank: int | None
    width: int | None
    float32: bool
    inputs: tuple[str, ...] = ()  # its node's inputs


@dataclass(frozen=True)
class GraphInput:
    name: str
    dims: tuple[int | None, ...]  # None where dynamic
    dtype: str  # numpy's name: int64, int32


def _scope_facts(scope: str) -> tuple[int | None, str | None, bool]:
    """(layer, component, in the embeddings) of a node's scope, TF names first."""
    for names in (tf_scopes, torch_scopes):
        layer = names.layer_of(scope)
        if layer is not None:
            return layer, names.component_of(scope), False
    return None, None, tf_scopes.is_embedding_scope(scope) or torch_scopes.is_embedding_scope(scope)


@dataclass
class Graph:
    """An ONNX model's main graph, as tfparity needs it."""

    model: Any  # the ModelProto, external data loaded
    produced: list[Produced]
    inputs: list[GraphInput]
    outputs: list[str]
    # what is read from the graph once: located tensors by width, the weight scales (a
    # side asks for them on every run; the graph does not change)
    _found: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def read(cls, model: Any) -> Graph:
        import onnx
        from onnx import helper

        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
            infos = {v.name: v for v in [*inferred.value_info, *inferred.output]}
        except Exception:  # a graph shape inference cannot follow: no tensor is located
            infos = {}
        produced = []
        for node in model.graph.node:
            if node.op_type == "Constant":
                continue
            for out in node.output:
                if not out:
                    continue
                rank, width, float32 = None, None, False
                info = infos.get(out)
                if info is not None and info.type.tensor_type.HasField("shape"):
                    dims = info.type.tensor_type.shape.dim
                    rank = len(dims)
                    width = dims[-1].dim_value if rank and dims[-1].HasField("dim_value") else None
                    float32 = info.type.tensor_type.elem_type == _FLOAT
                scope = _scope(node) or out
                produced.append(Produced(out, scope, rank, width, float32, tuple(node.input)))
        inputs = []
        initialised = {t.name for t in model.graph.initializer}
        for i in model.graph.input:
            if i.name in initialised:  # old exporters list weights as inputs too
                continue
            t = i.type.tensor_type
            dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
            dtype = helper.tensor_dtype_to_np_dtype(t.elem_type).name
            inputs.append(GraphInput(i.name, dims, dtype))
        return cls(model, produced, inputs, [o.name for o in model.graph.output])

    # ------------------------------------------------------------------ marking

    def marked(self, names: list[str]) -> bytes:
        """A copy of the model, serialised, whose outputs are its own and ``names``."""
        import onnx

        copy = onnx.ModelProto()
        copy.CopyFrom(self.model)
        have = set(self.outputs)
        copy.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in have)
        try:
            return copy.SerializeToString()
        except ValueError as exc:  # protobuf's 2 GB limit on one message
            raise TfparityError(
                f"The graph is too large to copy in memory with its intermediates marked "
                f"({exc}): its hidden states and sub-layers cannot be read from inside it. "
                "Export it with every hidden state as an output (hidden_states_<k>)."
            ) from None

    # ------------------------------------------------------------------ layers

    def located(self, width: int) -> dict[str, str]:
        """:meth:`locate`'s answer, found once per graph and width (a copy)."""
        if ("located", width) not in self._found:
            self._found["located", width] = self.locate(width)
        return dict(self._found["located", width])

    def locate(self, width: int) -> dict[str, str]:
        """Tensor names by what they are: ``hidden_states[k]`` (the last float tensor of
        ``width`` features in the embeddings' scope, k = 0, or in layer k-1's) and the
        sub-layer taps ``layer_{i}.{component}`` where the names give components (the
        last such tensor in that component's scope). Unnamed nodes give nothing."""
        found: dict[str, str] = {}
        seen_layer = False
        by_name = {p.name: p for p in self.produced}
        block_out: dict[int, str] = {}
        final = entry = None  # ln_f's output; the first block's input
        for p in self.produced:
            tap = torch_scopes.input_tap_of(p.scope)
            key = tap and f"layer_{tap[0]}.{tap[1]}"
            if key and key not in found:  # the first node in that module: its input
                found.update(_input_tap(key, tap, p, by_name))
            layer, component, embedding = _scope_facts(p.scope)
            if layer == 0 and entry is None:
                entry = _block_input(p, by_name, width)
            if p.rank != 3 or not p.float32:
                continue
            if layer is None:
                if not seen_layer and embedding and p.width == width:
                    found["hidden_states[0]"] = p.name
                elif seen_layer and p.width == width and torch_scopes.is_final_norm_scope(p.scope):
                    final = p.name  # Hugging Face's last hidden state: after ln_f
                continue
            seen_layer = True
            if p.width == width:
                found[f"hidden_states[{layer + 1}]"] = block_out[layer] = p.name
            if component is not None and (component == "intermediate" or p.width == width):
                found[f"layer_{layer}.{component}"] = p.name
        if entry:  # GPT-2's embeddings sum wte and wpe outside either's scope
            found["hidden_states[0]"] = entry
        if final and block_out:
            found[f"hidden_states[{max(block_out) + 1}]"] = final
        for layer, name in block_out.items():  # input taps: output is the block's (GPT-2)
            if f"layer_{layer}.attention" in found:
                found.setdefault(f"layer_{layer}.output", name)
        return found

    # ------------------------------------------------------------------ quantisation

    def quantisation(self) -> str | None:
        """The int8 kind the graph's operators say (:func:`.quantised.quantisation`)."""
        return quantisation([n.op_type for n in self.model.graph.node])

    def weight_scales(self) -> list[ScaleMap]:
        """Each weight scale put on its layer through the node reading it (found once)."""
        if "scales" not in self._found:
            self._found["scales"] = scale_map(self.model.graph, _scope)
        return list(self._found["scales"])

    def dequantised(self, pt_weights: dict[str, np.ndarray]) -> list[DequantisedWeight]:
        """Each int8 weight read back through its scale and zero point, by the PyTorch
        name it stands for and in PyTorch's layout (a MatMul's ``[in, out]`` transposed),
        to be held within half a step of it (:mod:`tfparity.compare.dequantised`)."""
        from onnx import numpy_helper

        graph = self.model.graph
        initializers = {t.name: t for t in graph.initializer}
        readers: dict[str, list[Any]] = {}
        for node in graph.node:
            for name in node.input:
                readers.setdefault(name, []).append(node)
        suffixes = _suffix_index(pt_weights)
        found = []
        for m in self.weight_scales():
            node = read_back_node(m, readers, initializers)
            if not m.weight or node is None:
                continue
            array = numpy_helper.to_array
            step = array(initializers[m.scale]).astype(np.float64)
            zero_at = 2 if node.op_type == "DequantizeLinear" else 3  # MatMulInteger's b
            zero = node.input[zero_at] if len(node.input) > zero_at else ""
            values = array(initializers[m.scaled]).astype(np.float64)
            values -= array(initializers[zero]).astype(np.float64) if zero in initializers else 0
            if step.ndim == 1 and step.size > 1:  # per channel, along the node's axis
                axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
                step = np.expand_dims(
                    step, [d for d in range(values.ndim) if d != axis % values.ndim]
                )
            values = values * step
            user = (
                node
                if node.op_type != "DequantizeLinear"
                else next(iter(readers.get(node.output[0], [])), None)
            )
            name = m.scaled.removesuffix("_quantized")
            pt = None if name.startswith("onnx::") else _match(name, suffixes)
            if pt is None and user is not None and _scope(user):
                module = _scope(user).strip("/").replace("/", ".")
                pt = _match(
                    (module if _name_scopes(user) else module.rsplit(".", 1)[0]) + ".weight",
                    suffixes,
                )
            if pt is None:
                continue
            if user is not None and values.ndim == 2 and _transposed(user):
                values, step = values.T, np.broadcast_to(step, values.shape).T
            if values.shape == np.shape(pt_weights[pt]):
                found.append(DequantisedWeight(pt, m.named(), m.layer, values, step))
        return found

    # ------------------------------------------------------------------ weights

    def weights_for(self, pt_weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph's float weights by the PyTorch names they stand for: initializers
        named after parameters (a wrapper's prefix dropped) or after the TF op reading a
        variable (tf2onnx), and the transposed copies the legacy exporter folds a
        Linear's weight into (``onnx::MatMul_286``), named by the module path of the
        MatMul or Gemm that reads them."""
        from onnx import numpy_helper

        suffixes = _suffix_index(pt_weights)
        values = {t.name: t for t in self.model.graph.initializer if t.data_type == _FLOAT}
        found: dict[str, np.ndarray] = {}
        for name, tensor in values.items():
            tf_name, transpose = _tf_variable(name)
            pt = _match(_pt_name(tf_name) if tf_name else name, suffixes)
            if pt is not None:
                array = numpy_helper.to_array(tensor)
                found[pt] = array.T if transpose else array
        for node in self.model.graph.node:
            if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
                continue
            tensor = values.get(node.input[1])
            if tensor is None or len(tensor.dims) != 2 or not _scope(node):
                continue
            module = _scope(node).strip("/").replace("/", ".")
            if not _name_scopes(node):  # a node name: the module path and the op's name
                module = module.rsplit(".", 1)[0]
            pt = _match(module + ".weight", suffixes)
            if pt is None or pt in found:
                continue
            array = numpy_helper.to_array(tensor)
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            found[pt] = array if trans_b else array.T
        return {k: v for k, v in found.items() if v.shape == np.shape(pt_weights[k])}


def _input_tap(
    key: str, tap: tuple[int, str], node: Produced, by_name: dict[str, Produced]
) -> dict[str, str]:
    """``{key: tensor}``: the first float ``[batch, seq, features]`` input of ``node`` made
    outside its module (the value entering ``ln_2``), or nothing."""
    for name in node.inputs:
        p = by_name.get(name)
        if p and p.rank == 3 and p.float32 and torch_scopes.input_tap_of(p.scope) != tap:
            return {key: name}
    return {}


def _block_input(node: Produced, by_name: dict[str, Produced], width: int) -> str | None:
    """The ``[batch, seq, width]`` float input of a node in the first block made outside
    the blocks: the embeddings' output, hidden state 0."""
    for name in node.inputs:
        p = by_name.get(name)
        if (
            p
            and p.rank == 3
            and p.float32
            and p.width == width
            and _scope_facts(p.scope)[0] is None
        ):
            return name
    return None


def _transposed(node: Any) -> bool:
    """Whether the weight ``node`` reads as its input 1 is PyTorch's transposed: a
    MatMul's is ``[in, out]``, a Gemm's too unless ``transB``."""
    if node.op_type in ("MatMul", "MatMulInteger"):
        return True
    return node.op_type == "Gemm" and not any(a.name == "transB" and a.i for a in node.attribute)


def _name_scopes(node: Any) -> list[str]:
    """The module path the dynamo exporter records on a node (``pkg.torch.onnx.name_scopes``:
    ``['', 'm', 'm.encoder', ..., 'linear_7']``, the op's own name last), else none."""
    import ast

    for prop in node.metadata_props:
        if prop.key == _NAME_SCOPES:
            try:
                scopes = ast.literal_eval(prop.value)
            except (ValueError, SyntaxError):
                return []
            return [str(s) for s in scopes] if isinstance(scopes, list) else []
    return []


def _scope(node: Any) -> str:
    """Where a node lies: the deepest module the dynamo exporter recorded, else the node's
    name (a module path from the legacy exporter, a TF op name from tf2onnx)."""
    scopes = _name_scopes(node)
    return scopes[-2] if len(scopes) >= 2 else node.name


def _tf_variable(name: str) -> tuple[str | None, bool]:
    """The TF variable a tf2onnx initializer holds (``.../query/kernel:0``), and whether
    it is a kernel (``[in, out]``: PyTorch's is its transpose); None for other names."""
    for pattern, variable in _TF_WEIGHTS:
        m = pattern.match(name)
        if m:
            return f"{m.group(1)}/{variable}:0", variable == "kernel"
    return None, False


def _pt_name(tf_name: str) -> str:
    from transformers.modeling_tf_pytorch_utils import convert_tf_weight_name_to_pt_weight_name

    return convert_tf_weight_name_to_pt_weight_name(tf_name, tf_weight_shape=())[0]


def _suffix_index(pt_weights: dict[str, Any]) -> dict[str, list[str]]:
    """Each PyTorch name under each of its dotted suffixes (``bert.pooler.dense.weight``
    under itself, ``pooler.dense.weight``, ``dense.weight``, ``weight``)."""
    index: dict[str, list[str]] = {}
    for name in pt_weights:
        parts = name.split(".")
        for i in range(len(parts)):
            index.setdefault(".".join(parts[i:]), []).append(name)
    return index


def _match(name: str, suffixes: dict[str, list[str]]) -> str | None:
    """The one PyTorch name that ``name``, or its longest dotted suffix that names any,
    stands for (a wrapper's ``m.`` dropped, a missing ``bert.`` found); None where it
    names none or several."""
    parts = name.split(".")
    for i in range(len(parts) - 1):  # at least module.param
        hits = suffixes.get(".".join(parts[i:]))
        if hits:
            return hits[0] if len(hits) == 1 else None
    return None
