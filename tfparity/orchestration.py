"""The one orchestration path that the API, the assertion helpers, the sweep and the
CLI share: which model runs, against which PyTorch reference, under which tolerance,
and whether the save/reload pass runs. Each rule lives here once.

**Reference** (:func:`reference_for`): the PyTorch reference is always loaded afresh
from a MODEL spec, never copied from the TF model under test (a broken port would
then be checked against its own broken weights and pass). The spec is the one given
for the reference (``pt=``, ``--pt``), else the spec the model under test was loaded
from (``tiny:bert`` for ``TFModel.load("tiny:bert")``, faults applied or not). A model
held in memory with no spec (``TFModel.wrap``, a Hugging Face object) has no reference
to load: that is refused, asking for ``pt=``. A reference passed as an object (a
``PTModel``, a stored golden reference, a Hugging Face PyTorch model, a ``torch.nn.Module``
of one's own: :mod:`tfparity.adapters.reference.own`) is used as given:
that is the caller's explicit choice (``pt=PTModel.from_tf(tf_model.model)`` tests the
TF computation alone, on the same weights).

**Tolerance** (:func:`tolerance_from`): neither ``atol`` nor ``rtol``: ``None`` (the
dtype defaults, or the cross-check's float64 referee). Both: exactly those. One alone:
the other keeps its default for the dtype compared (float32: atol 1e-5, rtol 1.3e-6;
fp16/bf16 with ``--precision``), as ``numpy.isclose`` keeps its other default. Zero for
the missing one would make a lone ``--rtol`` fail every element whose expected value
is near 0 on rounding alone; the default keeps the bar the user did not mention where
it was.

**Reload** (:func:`wants_reload`): like ``transformers-cli pt-to-tf``, MODEL's own TF
side is checked a second time after ``save_pretrained`` and a fresh load (catching
weights lost on save), unless ``reload`` is off. A separate TF port under test
(``tf=``, ``--tf``, the check command's single cross-check pass) is checked once, as
given. So is a model whose PyTorch reference the caller named (``pt=``, e.g.
``assert_crosscheck(port, "tiny:bert")``): that caller tests a port against a reference
of their choosing, and a second pass would double the run and the failure for nothing
they asked; ``reload=True`` still asks for it (``reload=None``, the API's and the
helpers' default, is this rule; the CLI's ``--no-reload`` is ``reload=False``).

This module imports neither TensorFlow nor torch at import time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .adapters.interfaces.sides import Reference, TFSide, TFSideBase
from .adapters.runtime.execution_options import ExecutionOptions
from .compare import Tolerance, default_tolerance
from .errors import TfparityError

_PRECISION_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


# ----------------------------------------------------------------------------- models


def load_model(
    model: Any = "minilm",
    *,
    allow_pickle: bool = False,
    tokenizer: Any = None,
    head: Any = None,
    companion: str | None = None,
    pt: Any = None,
    layers: dict[Any, int] | None = None,
    weights: dict[str, Any] | None = None,
    signature: str | None = None,
    decoders: bool = False,
    backend: str | None = None,
):
    """The TF side for ``model``: a :class:`~tfparity.adapters.hf_tf.tf_model.TFModel` for a
    spec (a ``keras-hub:<SPEC>`` gives a
    :class:`~tfparity.adapters.keras_hub.side.KerasHubModel`, or its causal-LM task where
    ``head``, the spec or the checkpoint's config names one,
    :mod:`tfparity.adapters.keras_hub.task`; an export's path, its side from
    :func:`~tfparity.adapters.exported.load_export`, with the config and tokenizer of
    ``companion``: the model it was exported from, or its PyTorch reference), or for an
    object the side :func:`~tfparity.adapters.sides.object_side` picks: a Hugging Face
    TF model, a keras-hub backbone, or a model of the user's own (a callable, a Keras 3
    or tf-keras model), which takes its config and tokenizer from the reference ``pt``
    and its maps from ``layers``/``weights`` (:mod:`tfparity.adapters.user.maps`).
    ``head`` (a kind, e.g. ``"sequence-classification"``) picks a spec's model class;
    default: the one its config names. ``signature`` (``--signature``) names the
    signature a SavedModel or LiteRT export runs (default: ``serving_default``, else
    its only one); for anything else it is refused (exit 2). A spec string is parsed
    here, once, and the parsed :class:`~tfparity.adapters.sources.specs.ModelSpec`
    (which ``model`` may be already) goes to its kind's loader
    (:data:`~tfparity.adapters.sides.SPEC_LOADERS`). ``decoders``: a seq2seq LM loads
    too (:func:`~tfparity.architectures.heads.unsupported`; generate and crosscheck).
    ``backend`` (``--backend``): the Keras backend a keras-hub spec runs on (jax, torch:
    in a process of its own); anything else is refused with it (exit 2)."""
    from . import validation
    from .adapters.sides import LoadRequest, backend_refusal, object_side, spec_side
    from .adapters.sources.specs import ModelSpec, as_spec

    if isinstance(model, os.PathLike):  # an export's path, as pathlib gives it
        model = os.fspath(model)
    validation.model_spec(model, "model")
    if isinstance(model, str):
        model = as_spec(model)  # the one parse: the spec travels from here
    _refuse_signature(model, signature)
    maps = layers is not None or weights is not None
    if isinstance(model, (TFSideBase, ModelSpec)) and maps:
        raise TfparityError(
            "layers= and weights= are for a model of your own (a callable, a Keras 3 or "
            "tf-keras model); a MODEL spec or a loaded side has its own (for a UserModel: "
            "tfparity.user_model(model, layers=..., weights=...))."
        )
    if backend not in (None, "tensorflow") and not isinstance(model, ModelSpec):
        raise backend_refusal(backend, f"a {type(model).__name__} object")
    if isinstance(model, TFSideBase):
        return model.bound(pt)  # a model of one's own takes its reference's config
    if isinstance(model, ModelSpec):
        request = LoadRequest(
            allow_pickle, head_kind(head), companion, signature, decoders, backend
        )
        return spec_side(model, request)
    return object_side(
        model, pt=pt, layers=layers, weights=weights, tokenizer=tokenizer, head=head_kind(head)
    )


def _refuse_signature(model: Any, signature: str | None) -> None:
    """A ``signature`` for anything but an export is refused (exit 2): there would be no
    signature to run it by."""
    if signature is not None and not isinstance(signature, str):
        raise TypeError(f"signature must be a name (str), not {type(signature).__name__}")
    if signature is not None and export_spec(model) is None:
        what = model.text if is_spec(model) else f"a {type(model).__name__}"
        raise TfparityError(
            "--signature (signature=) names a signature of an export (a SavedModel "
            f"directory, a .tflite file); {what} is not one."
        )


def is_spec(value: Any) -> bool:
    """Whether ``value`` names a model by spec: a string, or one parsed already."""
    from .adapters.sources.specs import ModelSpec

    return isinstance(value, (str, ModelSpec))


def export_spec(model: Any) -> Any:
    """The parsed spec when ``model`` is a spec (a string, or parsed) naming an export
    (a SavedModel, a ``.keras`` file, a LiteRT flatbuffer), else None."""
    from .adapters.sources.specs import as_spec, is_export

    if not is_spec(model):
        return None
    spec = as_spec(model)
    return spec if is_export(spec) else None


def source_side(
    source: Any, tf_model: TFSide, *, allow_pickle: bool = False, pt: Any = None
) -> Any:
    """The TF side of ``source``, the model the export ``tf_model`` came from (None
    without one; see :func:`check_source`); for a Keras-quantised model of one's own,
    the float model it was quantised from (a ``.keras`` file or the object, bound to
    ``pt``: :func:`~tfparity.adapters.user.source.keras_source`)."""
    from .adapters.user.source import keras_source

    own = keras_source(source, tf_model, pt)
    if own is not None:
        return own
    parsed = check_source(source, tf_model)
    if parsed is None:
        return None
    return load_model(parsed, allow_pickle=allow_pickle, head=tf_model.head)


def check_source(source: Any, tf_model: TFSide) -> Any:
    """``source`` names a model with a config, never an export; and only an export has a
    source (exit 2 otherwise). Its parsed spec (None without one)."""
    from .adapters.sources.specs import as_spec, is_export

    if source is None:
        return None
    if not is_spec(source):
        raise TypeError(f"source must be a MODEL spec (str), not {type(source).__name__}")
    text = source if isinstance(source, str) else source.text
    if tf_model.spec is None or not is_export(tf_model.spec):
        raise TfparityError(
            f"--source names the model an export came from, but {tf_model.name} is not an "
            "export (a SavedModel directory, a .keras, .tflite or .onnx file)."
        )
    parsed = as_spec(source)
    if is_export(parsed):
        raise TfparityError(
            f"--source {text} is an export itself; name the model {tf_model.name} was "
            "exported from (a directory, minilm, tiny:<model_type>, keras-hub:<SPEC>)."
        )
    return parsed


def executed(tf_model: TFSide, execution: ExecutionOptions | None) -> TFSide:
    """``tf_model`` running under ``execution``: itself when it already does, or when
    ``execution`` is None."""
    return tf_model if execution is None else tf_model.executed(execution)


def compiles(model: str | TFSide) -> bool:
    """Whether ``model`` (a spec or a loaded model) can run compiled: a keras-hub model
    runs eagerly only (:meth:`KerasHubModel.executed`), so a command whose default is a
    compiled run (the sweep) runs it eagerly rather than refuse it. So does a ``.keras``
    file: it loads as a keras-hub model or as a model of your own, both eager only."""
    from .adapters.keras_hub.side import is_keras_hub_spec

    if isinstance(model, str):
        return not (is_keras_hub_spec(model) or model.strip().endswith(".keras"))
    return model.compiles


def save_and_reload(tf_model: TFSide) -> TFSide | None:
    """The TF side after its own save and a fresh load (catches lost weights):
    ``save_pretrained`` for a Hugging Face model, ``save_to_preset`` for keras-hub;
    None for a side with no such pass (an export is already saved; keras-hub's preset
    saver cannot write a model Keras quantised)."""
    if tf_model.quantisation is not None:
        return None
    return tf_model.reloaded()


def wants_reload(
    reload: bool | None, *, separate_port: bool, named_reference: bool = False
) -> bool:
    """Whether the save/reload pass runs (see the module's docstring): ``reload`` True or
    False decides, except that a separate port never reloads; ``None`` (the default)
    reloads only MODEL's own TF side checked against the reference its spec gives."""
    if separate_port:
        return False
    if reload is None:
        return not named_reference
    return bool(reload)


# ----------------------------------------------------------------------------- reference


def head_kind(head: Any) -> Any:
    """``head`` as a :class:`~tfparity.architectures.heads.Head` (None stays None); an
    unknown kind is a usage error naming the kinds."""
    from .architectures.heads import Head, parse_head

    if head is None or isinstance(head, Head):
        return head
    if not isinstance(head, str):
        raise TypeError(f"head must be a kind name or None, not {type(head).__name__}")
    try:
        return parse_head(head)
    except ValueError as exc:
        raise TfparityError(str(exc)) from None


def reference_for(
    model: str | TFSide,
    pt: Any = None,
    *,
    allow_pickle: bool = False,
    head: Any = None,
    pt_config: Any = None,
    decoders: bool = False,
) -> Reference:
    """The PyTorch reference for the TF model ``model`` (a MODEL spec or a loaded model):
    ``pt`` as given when it is an object, else loaded from the spec ``pt`` (a string, or
    parsed) or, without one, from ``model``'s own spec (see the module's docstring).
    ``pt_config`` (``--pt-config``): config fields a reference loaded from a spec is
    built with instead of its checkpoint's (:mod:`tfparity.adapters.reference.config`).
    ``decoders``: a seq2seq LM loads (generate, crosscheck; see :func:`load_model`)."""
    from .adapters.reference.config import checked
    from .adapters.reference.own import reference_object
    from .adapters.reference.pt_model import load_pt
    from .adapters.runtime.imports import import_torch
    from .adapters.sources.specs import as_spec, is_export

    changes = checked(pt_config)
    named = is_spec(pt)  # the user's --pt: a refusal names what is wrong with it
    if changes and pt is not None and not named:
        raise TfparityError(
            f"pt_config (--pt-config) builds a reference from a MODEL spec; pt="
            f"{type(pt).__name__} is a reference already built: change its config yourself."
        )
    if pt is not None and not named:
        return reference_object(pt)  # as given: a PTModel, HF model or module of one's own
    spec = pt if named else spec_of(model)
    if named and is_export(as_spec(spec)):  # a float .tflite judging a quantised one
        from .adapters.exported import export_reference

        return export_reference(as_spec(spec), model)
    import_torch()  # a clear exit 2 when PyTorch is missing
    # The reference is the TF model's own kind of class (its checkpoint's, or --head's).
    kind = model_head(model) or head_kind(head)
    return load_pt(
        spec,
        allow_pickle=allow_pickle,
        head=kind,
        changes=changes,
        named=named,
        decoders=decoders,
    )


def generation_head(model: Any) -> Any:
    """The class a spec loads for generation: with its LM head (its config's class, or
    ``tiny:<type>/causal-lm``'s; a T5's seq2seq LM, ``tiny:t5/seq2seq-lm``'s); None for
    a spec naming its head, or an object (taken as it is). ``model`` is parsed by the
    caller (:func:`tfparity.generate`): the spec travels on to :func:`pair` parsed."""
    from .adapters.hf_tf.loading import generation_head as body_head
    from .adapters.sources.specs import ModelSpec

    if not isinstance(model, ModelSpec):
        return None
    if model.head is None and (model.inner is None or model.inner.head is None):
        return body_head(model)  # the body's spec, generated with its LM head
    return None  # keras-hub:tiny:<type>/<head>: the inner spec names it


def reference_tokenizer(pt: Any) -> Any | None:
    """The tokenizer of the reference ``pt`` names (a MODEL spec), to tokenize the texts
    with beside the TF side's; None for a reference given as an object (it holds none)."""
    if not is_spec(pt):
        return None
    from .adapters.sources.checkpoints import reference_tokenizer as tokenizer_of

    return tokenizer_of(pt)


def model_head(model: Any) -> Any:
    """The kind of model class a loaded TF side is (a keras-hub backbone: the base
    model; its causal-LM task: a causal LM); None for a spec, whose config decides."""
    return None if is_spec(model) else model.head


def bound_to_reference(tf_model: TFSide, pt: Any) -> TFSide:
    """``tf_model`` with what its PyTorch reference's checkpoint adds: a keras-hub preset
    (no tokenizer, no converter record) takes that checkpoint's tokenizer and weight
    mapping (:meth:`KerasHubModel.with_reference`); any other model is itself."""
    return tf_model.with_reference(pt) if is_spec(pt) else tf_model


def spec_of(model: Any) -> Any:
    """The MODEL spec that ``model`` was loaded from (an export: its companion's), as
    parsed when it loaded (a spec given stays as given); refused for a model with none."""
    from .adapters.sources.specs import is_export

    if is_spec(model):
        return model
    if model.spec is not None and model.spec.inner is not None and is_export(model.spec):
        return model.spec.inner  # an export: the model it came from (its companion)
    if model.spec is not None:
        return model.spec
    label = model.name
    raise TfparityError(
        f"The cross-check needs a PyTorch reference for '{label}', which was not loaded "
        "from a MODEL spec, and tfparity never copies the reference from the model under "
        "test. Pass pt=<MODEL spec> (or pt=PTModel.from_tf(model.model) to test the TF "
        "computation alone, on the model's own weights)."
    )


# ----------------------------------------------------------------------------- pairing


@dataclass(frozen=True)
class Pair:
    """A run's two sides, as :func:`pair` assembles them for every caller."""

    tf: TFSide  # loaded and bound to its reference's checkpoint
    reference: Reference | None  # in the TF side's precision; None: none asked for
    source: TFSide | None = None  # the model an export came from (``source=``)
    reference_spec: Any = None  # ``pt`` parsed (a ModelSpec), where it is a spec


def pair(
    model: Any,
    pt: Any = None,
    *,
    head: Any = None,
    pt_config: Any = None,
    execution: ExecutionOptions | None = None,
    generating: bool = False,
    decoders: bool = False,
    allow_pickle: bool = False,
    source: Any = None,
    layers: dict[Any, int] | None = None,
    weights: dict[str, Any] | None = None,
    signature: str | None = None,
    with_reference: bool = True,
    backend: str | None = None,
) -> Pair:
    """The TF side under test and its PyTorch reference, assembled in one order for
    crosscheck, gradients, generate and the sweep (which each did it their own way):
    parse the specs (once: the parsed specs travel), load the side (:func:`load_model`;
    an export takes its config from ``source``, else from ``pt``), refuse a side that
    cannot generate (``generating``), load ``source``'s side, load the reference
    (:func:`reference_for`; ``with_reference=False``: none) in the precision the side
    runs in (``execution``'s, else its own), bind the side to the reference's checkpoint
    (:func:`bound_to_reference`). ``decoders`` (crosscheck) and ``generating``
    (generate, ``sweep --generate``) load a seq2seq LM on both sides, an explicit
    argument where a context variable used to change what loading did. ``backend``:
    the Keras backend a keras-hub side runs on (:func:`load_model`)."""
    from .adapters.sources.specs import as_spec, is_export

    pt_spec = as_spec(pt) if is_spec(pt) else None
    source = as_spec(source) if isinstance(source, str) else source  # a bad one: exit 2 first
    decoders = decoders or generating
    # an export takes its config from its source; a float .keras (or object) that a
    # quantised model of one's own came from is no companion: its config is pt's
    companion = source if is_spec(source) and not is_export(source) else pt_spec
    side = load_model(
        model,
        allow_pickle=allow_pickle,
        head=head,
        companion=companion,
        pt=pt_spec.text if pt_spec is not None else pt,  # a side of one's own binds to it
        layers=layers,
        weights=weights,
        signature=signature,
        decoders=decoders,
        backend=backend,
    )
    if generating:
        _refuse_generation(side)
    # A flatbuffer reference takes its config from --source, which is then no third
    # side (there is no PyTorch run to compare the source with).
    flat_reference = pt_spec is not None and is_export(pt_spec)
    source_model = (
        None
        if flat_reference
        else source_side(
            source, side, allow_pickle=allow_pickle, pt=pt_spec.text if pt_spec else pt
        )
    )
    reference = None
    if with_reference:
        reference = reference_for(
            side,
            pt_spec if pt_spec is not None else pt,
            allow_pickle=allow_pickle,
            head=head,
            pt_config=pt_config,
            decoders=decoders,
        )
        reference = reference.in_precision((execution or side.execution).precision)
    return Pair(bound_to_reference(side, pt_spec), reference, source_model, pt_spec)


def _refuse_generation(side: TFSide) -> None:
    """Exit 2 for a side that cannot be judged by its generation (before its reference
    loads): no LM head, not a causal or seq2seq LM, no greedy decoding."""
    from .checks.generation.check import generation_refusal

    refusal = generation_refusal(side)
    if refusal:
        raise TfparityError(refusal + ".")


# ----------------------------------------------------------------------------- tolerance


def precision_dtype(precision: str | None) -> str:
    """The dtype a run in ``precision`` (fp32, fp16, bf16) outputs."""
    return _PRECISION_DTYPES.get(precision or "fp32", "float32")


def tolerance_from(
    atol: float | None,
    rtol: float | None,
    dtype: Any = "float32",
    *,
    equal_nan: bool = False,
) -> Tolerance | None:
    """A fixed tolerance from ``atol``/``rtol``; a missing one takes ``dtype``'s default
    (see the module's docstring). ``None`` when neither is given (nor ``equal_nan``)."""
    if atol is None and rtol is None and not equal_nan:
        return None
    base = default_tolerance(dtype)  # Tolerance itself refuses negative, NaN or inf values
    return Tolerance(
        atol=base.atol if atol is None else float(atol),
        rtol=base.rtol if rtol is None else float(rtol),
        equal_nan=equal_nan,
    )
