"""Opening an ONNX file for ONNX Runtime: the file read and checked, sessions made on
the best provider here, and what ONNX Runtime refuses said in words (exit 2).

A broken export is the common case, not an edge: tf2onnx 1.17 and Keras's
``export(format="onnx")`` write files ONNX Runtime cannot load (an ``Erfc`` node, which
they have no handler for) and exit 0. So every refusal names the op, the node and the
likely cause rather than passing ONNX Runtime's message on.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from ...errors import TfparityError

ONNX_EXTRA = "pip install 'tfparity[onnx]'"
DOCS = "docs/onnx.md"
# ONNX Runtime's own words for a node it cannot run: an op no opset defines, or one
# with no kernel for these types.
_NO_OP = re.compile(r"No Op registered for (\S+)")
_NO_KERNEL = re.compile(
    r"Could not find an implementation for (\S+?)\(\d+\) node with name '([^']*)'"
)
_IN_NODE = re.compile(r'In Node, \("([^"]*)", (\S+?),')


def import_ort() -> Any:
    """``onnxruntime``, or exit 2 naming the extra that installs it."""
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        raise TfparityError(
            f"Checking an ONNX file needs onnx and onnxruntime, which are not installed: "
            f"{ONNX_EXTRA}"
        )
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)  # errors only: its warnings are not ours
    return onnxruntime


def read_model(path: Path) -> Any:
    """The ``ModelProto`` at ``path`` with its external data loaded; exit 2 where the
    file is not ONNX or an external data file it names is missing."""
    import_ort()
    import onnx
    from google.protobuf.message import DecodeError
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise _not_onnx(path, str(exc)) from None
    if model.ir_version == 0 or not model.graph.node:
        raise _not_onnx(path, "it holds no graph")
    missing = sorted(
        {
            location
            for t in model.graph.initializer
            if uses_external_data(t)
            for location in _locations(t)
            if not (path.parent / location).is_file()
        }
    )
    if missing:
        raise TfparityError(
            f"{path} keeps its weights in external data files, and {', '.join(missing)} is "
            f"missing from {path.parent}: copy the data file(s) the exporter wrote beside "
            "the .onnx file (their names are written inside it)."
        )
    load_external_data_for_model(model, str(path.parent))
    return model


def _locations(tensor: Any) -> list[str]:
    return [e.value for e in tensor.external_data if e.key == "location"]


def _not_onnx(path: Path, why: str) -> TfparityError:
    return TfparityError(
        f"{path} is not an ONNX model ({why}): name the .onnx file an exporter wrote "
        "(torch.onnx.export, tf2onnx, Keras's export(format='onnx'))."
    )


CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


def provider() -> str:
    """The execution provider sessions run on by default: CUDA's where ONNX Runtime has
    it, else the CPU's."""
    return CUDA if CUDA in import_ort().get_available_providers() else CPU


def providers(device: str | None = None) -> list[Any]:
    """The providers a session is given, in ONNX Runtime's order of preference, for
    ``--device`` (``device``: a TF device name or ``cpu``/``gpu:N``; None: CUDA's where
    ONNX Runtime has it). CUDA's always has the CPU's after it, which takes the nodes
    CUDA has no kernel for. A GPU asked of an ONNX Runtime without CUDA is exit 2."""
    if device is None:
        return list(dict.fromkeys([provider(), CPU]))
    kind, _, index = device.lower().rsplit("device:", 1)[-1].lstrip("/").partition(":")
    if kind == "cpu":
        return [CPU]
    if kind != "gpu":
        raise TfparityError(f"--device {device}: an ONNX file runs on cpu or gpu:N.")
    if CUDA not in import_ort().get_available_providers():
        raise TfparityError(
            f"--device {device} asks for a GPU, but this ONNX Runtime has no "
            f"CUDAExecutionProvider (it has {', '.join(import_ort().get_available_providers())}): "
            "pip install onnxruntime-gpu, or use --device cpu."
        )
    return [(CUDA, {"device_id": int(index or 0)}), CPU]


def open_session(model: bytes | str, name: Path, optimised: bool, device: str | None = None) -> Any:
    """An ``InferenceSession`` of ``model`` (a path, so ONNX Runtime finds external data,
    or serialised bytes) with graph optimisation all on (``optimised``: as deployed) or
    off (the localising run, whose intermediates must exist as the file has them), on
    the providers ``device`` asks for (:func:`providers`)."""
    ort = import_ort()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    level = ort.GraphOptimizationLevel
    options.graph_optimization_level = level.ORT_ENABLE_ALL if optimised else level.ORT_DISABLE_ALL
    chosen = providers(device)
    try:
        return ort.InferenceSession(model, options, providers=chosen)
    except Exception as exc:  # ONNX Runtime raises its own classes, one per status code
        raise refusal(name, str(exc)) from None


def refusal(path: Path, message: str) -> TfparityError:
    """ONNX Runtime's refusal of ``path`` in words: the op, the node and the likely
    cause where it names a node it cannot run (above all tf2onnx's unhandled ``Erfc``)."""
    op = _NO_OP.search(message) or _NO_KERNEL.search(message)
    if op is None:
        first = message.strip().splitlines()[0] if message.strip() else "no message"
        return TfparityError(f"ONNX Runtime cannot load {path}: {first}")
    node = _IN_NODE.search(message)
    node_name = op.group(2) if op.re is _NO_KERNEL else (node.group(1) if node else "")
    where = f"node '{node_name}'" if node_name else "a node"
    name = op.group(1)
    if name == "Erfc":
        return TfparityError(
            f"{path} cannot run: {where} is an Erfc op, which ONNX has no definition of "
            "(ONNX Runtime: 'No Op registered for Erfc'). The converter has no handler for "
            "TensorFlow's exact GELU, which TF 2.21 builds from Erfc (tf2onnx 1.17 and "
            "Keras's export(format='onnx') log 'Unsupported ops: Erfc' and still save the "
            f"file). Register an Erfc handler (erfc = 1 - erf) and export again: see {DOCS}."
        )
    return TfparityError(
        f"{path} cannot run on ONNX Runtime: {where} is a {name} op, which it has no "
        "implementation of for this opset and these types (the exporter wrote an op the "
        "runtime lacks: export with another opset, or replace the op)."
    )
