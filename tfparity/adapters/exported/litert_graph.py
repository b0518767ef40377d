"""What a LiteRT flatbuffer holds, read from its bytes: tensors, operators in execution
order, constants; from these, whether it is quantised and which intermediate tensors
are which layer's output.

Read with the flatbuffer schema (``ai_edge_litert``'s, else TensorFlow's) rather than
the interpreter's tensor list, because that list says neither which tensors are
constants (quantised weights) nor which operator made a tensor: a tensor that is also a
signature output is renamed (``StatefulPartitionedCall:1``) and keeps its place in the
model only through the operator that produced it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...architectures.tf_scopes import component_of, is_embedding_scope, layer_of

# Kinds of reduced precision, as the report names them.
FULL_INT8, FULL_INT16X8 = "full int8", "full int16x8"
DYNAMIC_RANGE = "dynamic-range int8"
FLOAT16 = "float16"
_INTEGER_WEIGHTS = {"INT8", "UINT8", "INT4"}
_ACTIVATION_INTEGERS = {"INT8", "UINT8", "INT16"}
_RENAMED = re.compile(r"^(StatefulPartitionedCall|PartitionedCall|Identity)(_\d+)?(:\d+)?$")


@dataclass(frozen=True)
class TensorInfo:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: str  # the schema's name: FLOAT32, INT8, ...
    constant: bool  # its values live in the flatbuffer (a weight)
    quantised: bool  # it carries quantisation scales
    # One scale and zero point for the whole tensor (a quantised activation's), else None
    scale: float | None = None
    zero_point: int = 0

    def real(self, values: Any) -> Any:
        """The real values an integer activation stands for, ``(q - zero_point) * scale``
        (float32); a float tensor as it is."""
        if self.scale is None or self.dtype not in _ACTIVATION_INTEGERS:
            return values
        import numpy as np

        return ((np.asarray(values, np.float32) - self.zero_point) * self.scale).astype(np.float32)

    @property
    def activation(self) -> bool:
        """A computed value tfparity can read as real numbers: float32, or an integer
        tensor with one scale (full-integer models' activations)."""
        if self.constant:
            return False
        return self.dtype == "FLOAT32" or (
            self.dtype in _ACTIVATION_INTEGERS and self.scale is not None
        )


@dataclass(frozen=True)
class Operator:
    code: str  # FULLY_CONNECTED, QUANTIZE, ...
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass
class Graph:
    """The main subgraph of a flatbuffer: tensors by index, operators in order."""

    tensors: list[TensorInfo]
    operators: list[Operator]

    @classmethod
    def read(cls, data: bytes) -> Graph:
        schema = flatbuffer_schema()
        model = schema.Model.GetRootAsModel(data, 0)
        graph = model.Subgraphs(0)
        types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
        codes = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
        tensors = []
        for i in range(graph.TensorsLength()):
            t = graph.Tensors(i)
            buffer = model.Buffers(t.Buffer()) if t.Buffer() < model.BuffersLength() else None
            # Large models keep data outside the flatbuffer (Offset > 1), small ones inside.
            constant = buffer is not None and (buffer.DataLength() > 0 or buffer.Offset() > 1)
            q = t.Quantization()
            one_scale = q is not None and q.ScaleLength() == 1
            tensors.append(
                TensorInfo(
                    index=i,
                    name=(t.Name() or b"").decode(errors="replace"),
                    shape=tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else (),
                    dtype=types.get(t.Type(), str(t.Type())),
                    constant=constant,
                    quantised=q is not None and q.ScaleLength() > 0,
                    scale=float(q.Scale(0)) if one_scale else None,
                    zero_point=int(q.ZeroPoint(0)) if one_scale and q.ZeroPointLength() else 0,
                )
            )
        operators = []
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            oc = model.OperatorCodes(op.OpcodeIndex())
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            operators.append(
                Operator(
                    codes.get(code, str(code)),
                    tuple(int(x) for x in op.InputsAsNumpy() if x >= 0),
                    tuple(int(x) for x in op.OutputsAsNumpy()),
                )
            )
        return cls(tensors, operators)

    # ------------------------------------------------------------------ precision

    def quantisation(self) -> str | None:
        """The reduced precision the artefact holds, or None for float32 throughout:
        activations quantised (a QUANTIZE operator) is full integer; integer weights
        with scales alone is dynamic-range; float16 weights is float16."""
        for op in self.operators:
            if op.code == "QUANTIZE":
                out = self.tensors[op.outputs[0]].dtype
                return FULL_INT16X8 if out == "INT16" else FULL_INT8
        weights = [t for t in self.tensors if t.constant]
        if any(t.dtype in _INTEGER_WEIGHTS and t.quantised for t in weights):
            return DYNAMIC_RANGE
        if any(t.dtype == "FLOAT16" for t in weights):
            return FLOAT16
        return None

    # ------------------------------------------------------------------ layers

    def scopes(self) -> dict[int, str]:
        """Each computed tensor's name scope; a renamed output (a signature output) takes
        the scope of the operator that made it, read from that operator's inputs."""
        scope: dict[int, str] = {}
        for op in self.operators:
            for out in op.outputs:
                name = self.tensors[out].name.split(";")[0]
                if _RENAMED.match(name):
                    name = next((scope[i] for i in op.inputs if i in scope), name)
                scope[out] = name
        return scope

    def located(self, width: int) -> dict[str, int]:
        """Tensor indices by what they are: ``hidden_states[k]`` (the last activation,
        float or quantised, of ``width`` features in the embeddings' scope, k = 0, or
        layer k-1's) and the sub-layer taps ``layer_{i}.{component}`` where the names give
        components (the last activation in that component's scope). Unnamed layers give
        nothing."""
        found: dict[str, int] = {}
        seen_layer = False
        for index, name in self.scopes().items():
            t = self.tensors[index]
            if not t.activation or len(t.shape) != 3:
                continue
            layer = layer_of(name)
            if layer is None:
                if not seen_layer and is_embedding_scope(name) and t.shape[-1] == width:
                    found["hidden_states[0]"] = index
                continue
            seen_layer = True
            if t.shape[-1] == width:
                found[f"hidden_states[{layer + 1}]"] = index
            component = component_of(name)
            if component is not None and (component == "intermediate" or t.shape[-1] == width):
                found[f"layer_{layer}.{component}"] = index
        return found


def flatbuffer_schema() -> Any:
    """The flatbuffer schema module of whichever LiteRT runtime is installed."""
    try:
        from ai_edge_litert import schema_py_generated
    except ImportError:
        from tensorflow.lite.python import schema_py_generated
    return schema_py_generated


@dataclass(frozen=True)
class Constant:
    """A weight the flatbuffer holds: its values as stored (int8, float16, ...) and, for
    an integer weight, its scales (one per channel along its quantised dimension). Both
    are views of the bytes read: writable where those are a ``bytearray``."""

    name: str
    dtype: str
    values: Any
    scales: Any | None


def constants_of(data: bytes | bytearray) -> dict[str, Constant]:
    """Every constant tensor of the main subgraph with its stored values, by name (a
    tensor's first name where the converter joined several with ``;``)."""
    import numpy as np

    schema = flatbuffer_schema()
    model = schema.Model.GetRootAsModel(data, 0)
    graph = model.Subgraphs(0)
    types = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    found = {}
    for i in range(graph.TensorsLength()):
        t = graph.Tensors(i)
        buffer = model.Buffers(t.Buffer()) if t.Buffer() < model.BuffersLength() else None
        dtype = types.get(t.Type(), str(t.Type()))
        if buffer is None or buffer.DataLength() == 0 or dtype not in _NUMPY:
            continue  # not a constant, held outside the flatbuffer, or of no use here
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        values = buffer.DataAsNumpy().view(_NUMPY[dtype])
        if values.size == int(np.prod(shape)):
            values = values.reshape(shape)
        q = t.Quantization()
        scales = q.ScaleAsNumpy() if q is not None and q.ScaleLength() else None
        name = (t.Name() or b"").decode(errors="replace").split(";")[0]
        found[name] = Constant(name, dtype, values, scales)
    return found


_NUMPY = {"INT8": "int8", "FLOAT16": "float16", "FLOAT32": "float32", "INT32": "int32"}
