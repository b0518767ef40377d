"""A quantised LiteRT flatbuffer against a fresh conversion of its float source.

TensorFlow's LiteRT converter is deterministic for the recipes that depend on the weights
alone: converting the same TF model twice with dynamic-range int8 or float16 gives the
same bytes (docs/litert.md, "Reproducing the quantisation"; tested in
tests/adapters/exported/test_litert_requantise.py). So a shipped flatbuffer whose float
source is known (``--source``) can be judged exactly: convert the source afresh with the
same recipe and static shape, and every quantised constant must agree with its twin (int8
values and their per-channel scales, float16 values). The check itself is the one every
stored quantised model gets (:mod:`tfparity.checks.crosscheck.requantised`); this module
hands it the two sets of constants, a run of each flatbuffer, and a way to put one fresh
constant back into the stored bytes.

Full-integer models take their activation ranges from calibration data the file does not
hold, so they cannot be reproduced: that is said in one line, and budgets judge them as
before. A flatbuffer converted by another route (other tensor names) is said to be so.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...architectures.tf_scopes import is_embedding_scope, layer_of
from ...compare.requantisation import QuantisedVariable
from ..interfaces.requantisation import FreshTwin
from .litert_graph import DYNAMIC_RANGE, FLOAT16, constants_of
from .litert_runner import Runner

# The recipes whose output depends on the weights alone (no calibration data).
REPRODUCIBLE = (DYNAMIC_RANGE, FLOAT16)
# Below this share of the stored quantised constants found by name in the fresh
# conversion, the file was converted by another route: pairing would compare nothing.
MIN_NAMED_SHARE = 0.5
TOOL = "the LiteRT converter"
SCALE = "/scale"  # the suffix naming an int8 constant's per-channel scales


def litert_twin(export: Any, source: Any, reference: Any = None) -> FreshTwin | None:
    """The exact check's material for ``export`` (a quantised LiteRT side) against a fresh
    conversion of ``source`` (the TF model it came from, ``--source``), else of the
    reference checkpoint ``reference`` (a spec) loaded as a TF model; None for a float32
    flatbuffer."""
    kind = export.quantisation
    if kind is None:
        return None
    if source is None:
        source, why = _reference_source(reference, export.head)
        if source is None:
            return _skipped(str(getattr(reference, "text", reference) or "-"), kind, why)
    name = source.name
    if kind not in REPRODUCIBLE:
        why = (
            f"{kind} takes its activation ranges from calibration data the file does not "
            "hold, so a fresh conversion cannot reproduce it; judged by budgets alone"
        )
        return _skipped(name, kind, why)
    batch, seq = export.runner.static
    if batch is None or seq is None:
        why = "its input shape is dynamic, and tfparity's converter writes static shapes"
        return _skipped(name, kind, why)
    folder = Path(tempfile.mkdtemp(prefix="tfparity-litert-"))
    fresh_path = _converted(export, source, kind, folder / "fresh.tflite")
    stored_bytes = Path(export.runner.path).read_bytes()
    stored, fresh = variables(stored_bytes), variables(fresh_path.read_bytes())
    common = set(stored) & set(fresh)
    if not stored or len(common) < MIN_NAMED_SHARE * len(stored):
        why = (
            f"only {len(common)} of its {len(stored)} quantised constants have a namesake in "
            "a fresh conversion of the source: it was converted by another route"
        )
        return _skipped(name, kind, why)
    twin = FreshTwin(
        source=name,
        tool=TOOL,
        mode=kind,
        stored=stored,
        fresh=fresh,
        parts=_parts(stored),
        run_stored=export.run,
        run_fresh=_side(export, fresh_path).run,
        put_back=lambda path: _put_back(export, stored_bytes, fresh[path], folder),
        layers={v.path.removesuffix(SCALE): kind for v in stored.values()},
    )
    weakref.finalize(twin, shutil.rmtree, folder, True)  # the flatbuffers live with it
    return twin


def _skipped(source: str, kind: str, why: str) -> FreshTwin:
    return FreshTwin(source, kind, skipped=why, tool=TOOL)


def _reference_source(reference: Any, head: Any) -> tuple[Any, str]:
    """The reference checkpoint as the TF model to convert afresh (with the flatbuffer's
    ``head``), or why there is none."""
    text = getattr(reference, "text", reference)
    if not isinstance(text, str):
        return None, "no float source: give --source MODEL (the model it was converted from)"
    from ..hf_tf.tf_model import TFModel

    try:
        return TFModel.load(text, head=head), ""
    except Exception as exc:  # any reason the checkpoint has no TF class: say it, go on
        why = " ".join(str(exc).split())[:160]
        return None, f"no float source: {text} does not load as a TF model ({why}); give --source"


def _converted(export: Any, source: Any, kind: str, path: Path) -> Path:
    """``source`` converted as ``export`` was: the same recipe, static shape, inputs and
    outputs (hidden states among them or not)."""
    from .litert_convert import to_litert
    from .litert_runner import INPUT_ROLES

    runner = export.runner
    batch, seq = runner.static
    names = runner.output_names()
    hidden = any(n.startswith("hidden_states[") for n in names)
    # the Hugging Face name of each input the file takes besides the ids
    inputs = [INPUT_ROLES[r][0] for r in INPUT_ROLES if r != "ids" and r in runner.inputs]
    return to_litert(
        source,
        path,
        quantisation=kind,
        batch=batch,
        seq=seq,
        hidden_states=hidden,
        inputs=inputs,
        outputs=[n for n in names if not n.startswith("hidden_states[")],
    )


def variables(data: bytes) -> dict[str, QuantisedVariable]:
    """The weights of a flatbuffer as named variables: each int8 weight's values and its
    per-channel scales (``<name>/scale``), each float16 and float32 one (the converter
    copies a float weight as it is: a fresh conversion must hold the same)."""
    found: dict[str, QuantisedVariable] = {}
    for c in constants_of(data).values():
        name = unscoped(c.name)
        if c.dtype == "INT8" and c.scales is not None:
            found[name] = QuantisedVariable(name, c.values, "int8")
            found[name + SCALE] = QuantisedVariable(name + SCALE, c.scales, "int8")
        elif c.dtype in ("FLOAT16", "FLOAT32"):
            found[name] = QuantisedVariable(name, c.values, c.dtype.lower())
    return found


def unscoped(name: str) -> str:
    """A constant's name without its model's own scope (``tf_bert_model_1/``): Keras
    numbers a model's scope by how many were built before it in the process, which
    says nothing about its weights."""
    return name.split("/", 1)[1] if "/" in name else name


def _parts(stored: dict[str, QuantisedVariable]) -> dict[str, int | str]:
    """Each constant's block, by its TF name scope: ``layer_._1`` is block 1; a weight
    in neither a block nor the embeddings is the head's (a pooler, an LM head)."""
    parts: dict[str, int | str] = {}
    for path in stored:
        layer = layer_of(path)
        if layer is not None:
            parts[path] = layer
        elif is_embedding_scope(path):
            parts[path] = "embeddings"
        elif "/" in path:  # a scalar the converter made (arith.constant) is no one's
            parts[path] = "head"
    return parts


@contextlib.contextmanager
def _put_back(export: Any, stored: bytes, fresh: QuantisedVariable, folder: Path) -> Iterator[None]:
    """``export`` running the stored flatbuffer with one constant (its values, or its
    scales) replaced by the fresh conversion's, restored after."""
    data = bytearray(stored)
    name, scales = fresh.path.removesuffix(SCALE), fresh.path.endswith(SCALE)
    held = {unscoped(k): c for k, c in constants_of(data).items()}
    target = held[name]  # views of ``data``: writing them patches it
    (target.scales if scales else target.values)[...] = fresh.values
    patched = folder / "patched.tflite"
    patched.write_bytes(bytes(data))
    runner = export.runner
    export.runner = _side(export, patched).runner
    try:
        yield
    finally:
        export.runner = runner


def _side(export: Any, path: Path) -> Any:
    """``export`` running another flatbuffer of the same signature."""
    runner = Runner.open(path, export.runner.pad_id, export.runner.signature)
    return replace(export, runner=runner, notes=[])
