"""TF sides for what ships: a SavedModel, a ``.keras`` file, a LiteRT flatbuffer (and an
ONNX file, whose side lives in :mod:`tfparity.adapters.onnx`).

An export holds the computation but not what a check needs around it: the Hugging Face
config (layer count, vocabulary, positions) and the tokenizer. Those come from the
model it was exported from, named by ``--source`` (else the reference's ``--pt``): the
*companion* spec. Each kind lives in its own module and implements
:class:`~tfparity.adapters.interfaces.sides.TFSide`; :func:`load_export` picks it by the
kind :func:`~tfparity.adapters.sources.specs.parse_spec` recognised from the path.
"""

from __future__ import annotations

from dataclasses import replace

from ...architectures.heads import Head
from ...errors import TfparityError
from ..interfaces.sides import Reference, TFSide
from ..sources.specs import EXPORT_KINDS, ModelSpec, as_spec

SIGNED_KINDS = ("saved-model", "litert")  # the kinds that run through a named signature


def load_export(
    spec: ModelSpec,
    companion: str | ModelSpec | None,
    signature: str | None = None,
    head: Head | None = None,
) -> TFSide:
    """The TF side for the export ``spec`` names, with the config and tokenizer of the
    ``companion`` spec (the model it was exported from, or its PyTorch reference).
    ``signature``: the signature that runs (a SavedModel's or a LiteRT flatbuffer's;
    default: ``serving_default``, else the only one). ``head`` (``--head``): the kind
    of a SavedModel or a LiteRT flatbuffer that returns logits (default: the
    companion's), and what of a ``.keras`` file's keras-hub task is checked."""
    if signature is not None and spec.kind not in SIGNED_KINDS:
        raise TfparityError(
            f"--signature names a signature of a SavedModel or a LiteRT flatbuffer; "
            f"{spec.text} is {EXPORT_KINDS[spec.kind]}, which has none to choose."
        )
    if companion is None:
        raise TfparityError(
            f"{spec.text} is {EXPORT_KINDS[spec.kind]}: it holds no Hugging Face config "
            "or tokenizer. Name the model it was exported from (--source MODEL; the "
            "API's source=) or its PyTorch reference (crosscheck's --pt MODEL)."
        )
    from ..sources.checkpoints import resolve

    companion = as_spec(companion)
    found = resolve(companion, spec.text)
    # The side's spec names its companion: the reference defaults to that model's twin.
    spec = replace(spec, inner=companion)
    if spec.kind == "saved-model":
        from .saved_model import load_saved_model

        return load_saved_model(spec, found, signature, head)
    if spec.kind == "keras-file":
        from .keras_file import load_keras_file

        return load_keras_file(spec, found, head)
    if spec.kind == "litert":
        from .litert import load_litert

        return load_litert(spec, found, signature, head)
    if spec.kind == "onnx":
        from ..onnx.side import load_onnx

        return load_onnx(spec, found, head)
    raise TfparityError(f"Checking {EXPORT_KINDS[spec.kind]} is not supported yet.")


def export_reference(spec: ModelSpec, tf_model: TFSide) -> Reference:
    """The export ``spec`` names as the reference of ``tf_model`` (``--pt``): a float
    LiteRT flatbuffer, the expected side of a quantised one converted from the same
    model (:mod:`.litert_reference`); any other export is exit 2 (the float64 referee
    judges against a live PyTorch model)."""
    if spec.kind != "litert":
        raise TfparityError(
            f"--pt names the reference; {spec.text} is {EXPORT_KINDS[spec.kind]}, which "
            "is not one: give a PyTorch MODEL spec (a float LiteRT flatbuffer is the one "
            "export that can be a reference, of a quantised flatbuffer)."
        )
    from .litert_reference import litert_reference

    return litert_reference(spec, tf_model)
