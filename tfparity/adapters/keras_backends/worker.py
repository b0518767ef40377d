"""What runs inside one Keras backend's process: load a ``.keras`` file, run it on the
inputs the parent wrote, record every layer's output by name, write them to an npz.

The parent starts ``python -m tfparity.adapters.keras_backends.worker --serve [--import
M]...`` with ``KERAS_BACKEND`` set: it imports Keras first (most of its cost), then
answers run requests on stdin (:func:`serve`), so it can be started before the model
file exists and reused; every kind of request it answers is a handler of
:data:`REQUESTS` (``run``, ``facts``, the keras-hub side's ``load``, ``forward``,
``generate``, ``gradients``). ``worker MODEL --inputs IN.npz --out OUT.npz [--import M]...
[--precision float32] [--precision float64] [--gradients SEED]`` runs once. The backend
is fixed at Keras's import, so this module imports nothing of Keras at module level and
nothing of the rest of tfparity (the parent judges; a worker only computes). A bad file
or input is one paragraph for the parent to report: answered ``error`` by a serving
worker, written as ``{"error": ...}`` to ``OUT.npz.json`` by a one-shot run (exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .hub_worker import HUB_REQUESTS
from .protocol import Handler, Session, answer, paragraph

EXIT_BAD_INPUT = 2


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="tfparity-backend-worker")
    p.add_argument("model")
    p.add_argument("--inputs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--import", dest="imports", action="append", default=[])
    p.add_argument("--precision", action="append", choices=("float32", "float64"))
    p.add_argument("--gradients", type=int, metavar="SEED", help="also record gradients")
    return p.parse_args(argv)


def _float64_twin(keras: Any, model: Any, inputs: list[np.ndarray] | None = None) -> Any:
    """The same model built at float64 with the same weights, cast: every layer's dtype
    policy in the saved config becomes float64 (and the global policy too, for sublayers
    a custom layer builds without a dtype), then the weights are assigned in order. A
    subclassed model's config holds no graph: ``from_config`` leaves it unbuilt, with no
    weights to assign, so it is built by one call on the run's inputs first."""
    config = model.get_config()
    _policies_to_float64(config)
    keras.config.set_dtype_policy("float64")
    twin = model.__class__.from_config(config)
    weights = [
        np.asarray(w, np.float64) if np.issubdtype(np.asarray(w).dtype, np.floating) else w
        for w in model.get_weights()
    ]
    if inputs is not None and len(twin.weights) != len(weights):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            twin(inputs[0] if len(inputs) == 1 else inputs, training=False)
    twin.set_weights(weights)
    return twin


def float64_shortfalls(keras: Any) -> list[str]:
    """The ops this backend computes at float32 when given float64 values. Keras 3's
    ``result_type`` maps float64 to float32 on every backend but TensorFlow (to match
    JAX's default), so some ops on JAX and torch round to float32 although their
    inputs, weights and outputs say float64 (measured with Keras 3.15: torch's matmul
    and mean; JAX's mean and tanh, even with x64 on). A referee must have none: each
    probe's float32 error (1e-10 is below float32's resolution at 1) is 10^6 times its
    float64 rounding."""
    ops = keras.ops
    x = np.array([[1.0, 1e-10]])
    probes = {
        "add": (lambda a: ops.add(a, 1e-10), x + 1e-10),
        "matmul": (lambda a: ops.matmul(a, ops.ones((2, 1), dtype="float64")), x.sum(1)),
        "mean": (lambda a: ops.mean(a + 1.0), np.mean(x + 1.0)),
        "tanh": (lambda a: ops.tanh(a + 0.5), np.tanh(x + 0.5)),
        "exp": (lambda a: ops.exp(a), np.exp(x)),
        "sqrt": (lambda a: ops.sqrt(a + 2.0), np.sqrt(x + 2.0)),
        "erf": (lambda a: ops.erf(a + 0.5), np.vectorize(math.erf)(x + 0.5)),
    }
    short = []
    for name, (op, exact) in probes.items():
        got = np.asarray(ops.convert_to_numpy(op(ops.convert_to_tensor(x, "float64"))))
        if got.dtype != np.float64 or np.max(np.abs(got - np.reshape(exact, got.shape))) > 1e-13:
            short.append(name)
    return short


def _policies_to_float64(config: Any) -> None:
    """Every DTypePolicy in a saved config (nested dicts and lists) set to float64."""
    if isinstance(config, dict):
        dtype = config.get("dtype")
        if isinstance(dtype, dict) and "Policy" in str(dtype.get("class_name", "")):
            dtype["class_name"] = "DTypePolicy"
            dtype["config"] = {"name": "float64"}
        elif isinstance(dtype, str) and dtype in ("float32", "float16", "bfloat16"):
            config["dtype"] = "float64"
        for value in config.values():
            _policies_to_float64(value)
    elif isinstance(config, list):
        for value in config:
            _policies_to_float64(value)


SUBCLASSED_NOTE = (
    "the model has no layer graph (subclassed): its outputs and each sublayer's output "
    "(by its attribute path) are recorded; what its own call computes between them (an "
    "add, an activation written as an op) cannot be tapped"
)


def _recorder(keras: Any, model: Any) -> tuple[Any, list[str], list[str], list[Any]]:
    """A model whose outputs are every layer's (topological order, as ``model.layers``),
    their names (``layer`` or ``layer/k`` for a layer with several outputs; a layer
    called at several places in the graph, as ALBERT's shared blocks, per call:
    ``layer``, ``layer#1``, ... as :func:`.hidden_states.call_name` names them), notes on
    layers that could not be recorded and the layers recorded. A model without a graph
    (subclassed) records its outputs, and the model itself is the one layer whose
    sublayers are tapped."""
    from .sublayers import has_graph

    if not has_graph(model):
        return model, ["output"], [SUBCLASSED_NOTE], [model]
    outputs, names, notes, layers = [], [], [], []
    in_graph = {id(n) for nodes in getattr(model, "_nodes_by_depth", {}).values() for n in nodes}
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        try:
            calls = _calls(keras, layer, in_graph)
        except (AttributeError, ValueError, RuntimeError) as e:
            notes.append(f"layer {layer.name} not recorded: {str(e).splitlines()[0]}")
            continue
        layers.append(layer)
        for name, flat in calls:
            outputs.extend(flat)
            names.extend([name] if len(flat) == 1 else [f"{name}/{k}" for k in range(len(flat))])
    if not outputs:
        notes.append("the model has no layer graph (subclassed): only its outputs are recorded")
        return model, ["output"], notes, []
    return keras.Model(model.inputs, outputs), names, notes, layers


def _calls(keras: Any, layer: Any, in_graph: set[int]) -> list[tuple[str, list[Any]]]:
    """Each call of ``layer`` in the model's graph (``in_graph``: its nodes' ids): its
    name (:func:`.hidden_states.call_name`'s) and output tensors, read from the call's node, so
    a nested model's are its call's (its ``output`` is its inner graph's, which a
    recorder would run a second time)."""
    nodes = getattr(layer, "_inbound_nodes", [])
    if not in_graph:
        return [(layer.name, keras.tree.flatten(layer.output))]
    return [
        (layer.name if k == 0 else f"{layer.name}#{k}", list(node.output_tensors))
        for k, node in enumerate(nodes)
        if id(node) in in_graph
    ]


@dataclass
class Recorded:
    """One forward pass: every output by name in the order they ran (each graph layer's
    sublayer taps just before it), and each tap's graph layer."""

    outputs: dict[str, np.ndarray]
    names: list[str]
    notes: list[str]
    parents: dict[str, str] = field(default_factory=dict)


def _run(keras: Any, model: Any, inputs: list[np.ndarray]) -> Recorded:
    """Run ``model`` once on ``inputs``, recording every graph layer's output and,
    inside each, its sublayers' (:mod:`.sublayers`)."""
    from .sublayers import SublayerTaps, merged, to_numpy

    recorder, names, notes, layers = _recorder(keras, model)
    fed = inputs[0] if len(inputs) == 1 else inputs
    with warnings.catch_warnings(), SublayerTaps(keras, layers) as tapped:
        warnings.simplefilter("ignore")  # Keras warns of input structure it accepts anyway
        produced = keras.tree.flatten(recorder(fed, training=False))
    arrays = [to_numpy(keras, t) for t in produced]
    taps = tapped.taps
    if recorder is model and layers:  # subclassed: its sublayers named from the model
        if len(arrays) > 1:
            names = [f"output/{k}" for k in range(len(arrays))]
        owners = {n: model.name for n in names}
        taps = [replace(t, name=t.name.removeprefix(f"{model.name}/")) for t in taps]
    else:
        owners = _owners(names, layers)
    outputs, parents = merged(dict(zip(names, arrays, strict=True)), owners, taps)
    return Recorded(outputs, list(outputs), notes, parents)


def _owners(names: list[str], layers: list[Any]) -> dict[str, str]:
    """Each recorded name's graph layer (``dense/1`` -> ``dense``, ``block#1`` ->
    ``block``)."""
    known = {layer.name for layer in layers}
    return {n: n if n in known else n.rsplit("/", 1)[0].split("#", 1)[0] for n in names}


def precision_facts(keras: Any, backend: str) -> dict[str, Any]:
    """What decides this backend's float32 arithmetic: the global dtype policy, whether
    ``dot_product_attention`` may take a flash path, and per backend the matmul
    precision or TF32 switches and the devices it runs on."""
    facts: dict[str, Any] = {"dtype_policy": keras.config.dtype_policy().name}
    flash = getattr(keras.config, "is_flash_attention_enabled", lambda: None)()
    if flash is not None:  # set by keras.config.enable/disable_flash_attention; None:
        facts["flash_attention"] = flash  # Keras decides per call, as the device allows
    if backend == "jax":
        import jax

        facts["jax_default_matmul_precision"] = jax.config.jax_default_matmul_precision
        facts["devices"] = [str(d) for d in jax.devices()]
    elif backend == "torch":
        import torch

        facts["allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
        facts["devices"] = ["cuda"] if torch.cuda.is_available() else ["cpu"]
        if torch.cuda.is_available():  # convolutions have a TF32 switch of their own
            facts["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    elif backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        facts["devices"] = [d.name for d in gpus] or ["cpu"]
        if gpus:
            facts["tensor_float_32"] = bool(
                tf.config.experimental.tensor_float_32_execution_enabled()
            )
    return facts


def layer_facts(model: Any) -> dict[str, dict[str, Any]]:
    """Per layer (and per sublayer, by its tap's path: :mod:`.sublayers`): its class and
    the classes it derives from (a keras-hub attention is a MultiHeadAttention), its
    dtype policy, and its config's keys, from which the parent tells which layers may
    compute a backend-specific way (top_k ties, a flash attention path, a float16
    policy)."""
    from .sublayers import has_graph, nested_layers

    if not has_graph(model):  # named as its taps are: by path from the model
        prefix = f"{model.name}/"
        return {p.removeprefix(prefix): _facts_of(inner) for p, inner in nested_layers(model)}
    facts = {}
    for layer in model.layers:
        if type(layer).__name__ == "InputLayer":
            continue
        facts[layer.name] = _facts_of(layer)
        facts.update({path: _facts_of(inner) for path, inner in nested_layers(layer)})
    return facts


def _facts_of(layer: Any) -> dict[str, Any]:
    try:
        keys = sorted(layer.get_config())
    except (NotImplementedError, TypeError, AttributeError):
        keys = []
    policy = getattr(layer, "dtype_policy", None)
    return {
        "class": type(layer).__name__,
        "bases": _bases(type(layer)),
        "dtype_policy": getattr(policy, "name", str(policy)),
        "config_keys": keys,
    }


def _bases(cls: type) -> list[str]:
    """The classes ``cls`` derives from, up to Keras's Layer (the rest is each backend's
    plumbing, ``TFLayer``, ``TorchLayer``, which says nothing of the layer)."""
    names = []
    for base in cls.__mro__[1:]:
        if base.__name__ in ("Layer", "object"):
            break
        names.append(base.__name__)
    return names


def import_modules(modules: list[str]) -> None:
    """Import the ``--import`` modules (custom layers register themselves on import); one
    that fails is an ImportError naming it, so the parent says which ``--import`` and
    why, not only what went wrong inside it."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as e:
            raise ImportError(
                f"--import {module} failed: {type(e).__name__}: {' '.join(str(e).split())}"
            ) from e


def _record(args: argparse.Namespace) -> dict[str, Any]:
    import_modules(args.imports)
    import keras

    backend = keras.backend.backend()
    with np.load(args.inputs) as held:
        inputs = [held[k] for k in held.files]
    model = keras.saving.load_model(args.model, compile=False)
    meta: dict[str, Any] = {"backend": backend, "keras": keras.__version__, "runs": {}}
    meta["precision"] = precision_facts(keras, backend)
    short = float64_shortfalls(keras)  # a few tiny ops: recorded on every backend
    meta["precision"]["float64_shortfalls"] = short
    meta["layer_facts"] = layer_facts(model)
    arrays: dict[str, np.ndarray] = {}
    if "float64" in (args.precision or []):
        if short:
            raise ValueError(
                f"Keras {keras.__version__} on {backend} computes {', '.join(short)} at "
                "float32 when asked for float64 (its result_type maps float64 to float32 "
                "on every backend but TensorFlow), so it cannot referee: use "
                "--referee-backend tensorflow"
            )
    for precision in args.precision or ["float32"]:
        with contextlib.ExitStack() as scope:
            run_model, run = _run_at(keras, model, inputs, precision, scope)
            dtypes = sorted({str(a.dtype) for a in run.outputs.values() if a.dtype.kind == "f"})
            meta["runs"][precision] = {
                "layers": run.names,
                "notes": run.notes,
                "dtypes": dtypes,
                "parents": run.parents,
            }
            arrays.update({f"{precision}:{name}": a for name, a in run.outputs.items()})
            if args.gradients is not None:  # kept apart: .gradients says how
                from .gradients import record_gradients

                grads, facts = record_gradients(keras, run_model, inputs, args.gradients)
                meta["runs"][precision]["gradients"] = facts
                arrays.update({f"grad:{precision}:{name}": a for name, a in grads.items()})
    np.savez(args.out, **arrays)
    return meta


def _run_at(
    keras: Any, model: Any, inputs: list[np.ndarray], precision: str, scope: Any
) -> tuple[Any, Recorded]:
    """The model run at ``precision`` and its record. At float64 the twin is built and
    run inside a :class:`.float64.Float64Scope` entered on ``scope`` (an ExitStack
    that the caller's gradients share), so the casts a layer fixes to float32 compute
    at float64; a layer whose output is still narrower is left out of the record,
    named in a note, and the rest is judged."""
    if precision == "float32":
        return model, _run(keras, model, inputs)
    from .float64 import Float64Scope, narrow_outputs, widen_sublayers

    widening = scope.enter_context(Float64Scope(keras))
    twin = _float64_twin(keras, model, inputs)
    built = widen_sublayers(keras, twin)
    run = _run(keras, twin, inputs)
    narrow = narrow_outputs(run.outputs)
    for name in narrow:
        del run.outputs[name]
    run.names = [n for n in run.names if n not in narrow]
    note = widening.note(built)
    run.notes += [note] if note else []
    if narrow:
        backend = keras.backend.backend()
        run.notes.append(
            f"not judged: {', '.join(narrow)} computed at float32 in the float64 run on "
            f"{backend} (outside keras.ops, so tfparity cannot widen it): the float64 "
            "referee has no output for it; the layers after it are judged"
        )
    return twin, run


def _recorded(args: argparse.Namespace) -> int:
    """A one-shot run: :func:`_record` with its meta, or its one-paragraph error, written
    beside ``args.out``; the exit code the process ends with."""
    try:
        meta = _record(args)
        code = 0
    except Exception as e:  # the parent reports it as bad input, one paragraph
        meta = {"error": paragraph(e)}
        code = EXIT_BAD_INPUT
    _write_meta(args.out, meta)
    return code


def _write_meta(out: str, meta: dict[str, Any]) -> None:
    """A run's meta beside its arrays (``OUT.npz.json``), as :func:`.launch.read_run`
    reads it."""
    with open(f"{out}.json", "w") as f:
        json.dump(meta, f)


def _run_request(session: Session, text: str) -> str:
    """``run {JSON}``: the one-shot arguments (model, inputs, out, precision,
    gradients); the record and its meta written to ``out``, an error raised."""
    args = argparse.Namespace(imports=session.imports, **json.loads(text))
    _write_meta(args.out, _record(args))
    return ""


def _facts_request(session: Session, text: str) -> str:
    """``facts``: this process's backend, Keras version and precision facts (JSON)."""
    import keras

    backend = keras.backend.backend()
    facts = {"backend": backend, "keras": keras.__version__}
    return json.dumps({**facts, "precision": precision_facts(keras, backend)})


# The kinds of request every serving worker answers: a backend's run for `tfparity
# backends`, its facts, and the keras-hub side's requests for `--backend jax|torch`
# (:mod:`.hub_worker`). A caller's module may add kinds (the preparing step's).
REQUESTS: dict[str, Handler] = {
    "run": Handler(_run_request),
    "facts": Handler(_facts_request, fresh=False),  # it changes no Keras state
    **HUB_REQUESTS,
}


def _plain(answer: Callable[[str], Any]) -> Handler:
    """A caller's handler given as a function of the request's text (it writes its own
    files): answered ``done`` with no text."""

    def handled(session: Session, text: str) -> str:
        answer(text)
        return ""

    return Handler(handled)


def serve(
    imports: list[str],
    requests: Any,
    reply: Any,
    handlers: Mapping[str, Handler | Callable[[str], Any]] | None = None,
) -> None:
    """Import ``imports`` and Keras (the start-up that costs seconds), then answer each
    request line ``KIND TEXT`` until stdin closes: a kind of :data:`REQUESTS` or of
    ``handlers`` (the caller's, e.g. the preparing step's), answered ``done`` with its
    text or ``error`` with one paragraph (an import that failed at start-up: every
    request's error); a line of no known kind is skipped. A ``fresh`` kind leaves the
    next request Keras's defaults (float32 policy, a cleared session): a float64 twin
    sets the global policy. The modules stay imported, so a worker is only reused for
    runs with the same ``imports`` (:mod:`.workers`)."""
    failed = None
    try:
        import_modules(imports)
        import keras
    except Exception as e:  # reported with every request, as a one-shot run would
        failed = paragraph(e)
    given = {k: h if isinstance(h, Handler) else _plain(h) for k, h in (handlers or {}).items()}
    table = {**REQUESTS, **given}
    session = Session(list(imports))
    for line in requests:
        kind, _, text = line.strip().partition(" ")
        handler = table.get(kind)
        if handler is None:
            continue
        if failed:
            answer(reply, "error", failed)
            continue
        try:
            said = handler.answer(session, text)
        except Exception as e:  # the parent reports it, naming the backend
            answer(reply, "error", paragraph(e))
        else:
            answer(reply, "done", said)
        if handler.fresh:  # the next request starts from Keras's defaults
            keras.config.set_dtype_policy("float32")
            keras.utils.clear_session()


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["--serve"]:
        imports = argparse.ArgumentParser(prog="tfparity-backend-worker --serve")
        imports.add_argument("--import", dest="imports", action="append", default=[])
        reply, sys.stdout = sys.stdout, sys.stderr  # what a framework prints: off the protocol
        serve(imports.parse_args(given[1:]).imports, sys.stdin, reply)
        return 0
    return _recorded(_arguments(given))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
