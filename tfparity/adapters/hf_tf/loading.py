"""Load a Hugging Face TF model (and its tokenizer) from a MODEL spec.

PyTorch checkpoints in safetensors are read with ``safetensors.numpy`` and assigned
through transformers' own name mapping, so loading needs neither torch nor pickle.
Pickled checkpoints (``pytorch_model.bin``) are read only when the caller allows it,
and then with ``torch.load(weights_only=True)``. Remote code is never trusted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...architectures import for_config
from ...architectures.heads import (
    Head,
    head_of_class,
    head_of_config,
    pt_class_candidates,
    unsupported,
)
from ...errors import TfparityError
from ..runtime.imports import import_tf, import_torch, import_transformers
from ..sources import tiny
from ..sources.checkpoint_files import checkpoint_tokenizer, local_dir, read_config
from ..sources.holdings import Holdings, made_up_note, refuse_unused_body
from ..sources.specs import ModelSpec
from ..sources.tf_holdings import tf_checkpoint_gaps
from .renamed import renamed_gaps
from .untied_head import dropped_head

TF_WEIGHTS = ("tf_model.h5", "tf_model.h5.index.json")
PT_SAFETENSORS = ("model.safetensors", "model.safetensors.index.json")
PT_PICKLE = ("pytorch_model.bin", "pytorch_model.bin.index.json")


@dataclass
class Loaded:
    """A built TF model, its tokenizer (None when the checkpoint has none) and notes."""

    model: Any
    tokenizer: Any | None
    config: Any
    source: str
    notes: list[str] = field(default_factory=list)
    # What the checkpoint held against what the model needs; None: not known (a model
    # built from a tiny spec holds no checkpoint).
    holdings: Holdings | None = None


def tf_model_class(config: Any) -> Any:
    """The TF class for the base model of ``config``, as its architecture names it; a
    clear refusal (exit 2) where transformers has none (Llama, Qwen, Gemma)."""
    name = for_config(config).tf_class
    if name is None:
        raise TfparityError(
            f"transformers has no TensorFlow model for '{config.model_type}', so it cannot "
            "run as a Hugging Face TF model. Its TF/Keras port is keras-hub's: check it with "
            f"the spec keras-hub:<MODEL> (e.g. keras-hub:tiny:{config.model_type}; "
            "pip install 'tfparity[keras-hub]')."
        )
    return getattr(import_transformers(), name)


def head_classes(
    config: Any, head: Head | None = None, *, decoders: bool = False
) -> tuple[Any, Any]:
    """The TF and PyTorch classes of kind ``head`` for ``config`` (None: the kind that
    ``config.architectures`` names, else the base model). transformers names each TF
    class ``TF`` + its PyTorch twin, so the pair is found by name; a kind the family
    lacks in TF, or that tfparity cannot run yet, is refused naming it (``decoders``:
    see :func:`~tfparity.architectures.heads.unsupported`)."""
    tf_model_class(config)  # refuses families without TF classes first
    kind, names = _class_names(config, head, decoders)
    t = import_transformers()
    for name in names:
        if hasattr(t, "TF" + name) and hasattr(t, name):
            return getattr(t, "TF" + name), getattr(t, name)
    raise TfparityError(
        f"transformers has no TensorFlow {kind.value} model for '{config.model_type}' "
        f"(looked for {', '.join('TF' + n for n in names)})."
    )


def pt_head_class(config: Any, head: Head | None = None, *, decoders: bool = False) -> Any:
    """The PyTorch class of kind ``head`` (as :func:`head_classes`), for families whose
    TF side is keras-hub's (no TF class needed)."""
    kind, names = _class_names(config, head, decoders)
    t = import_transformers()
    for name in names:
        if hasattr(t, name):
            return getattr(t, name)
    raise TfparityError(
        f"transformers has no PyTorch {kind.value} model for '{config.model_type}' "
        f"(looked for {', '.join(names)})."
    )


def _class_names(config: Any, head: Head | None, decoders: bool) -> tuple[Head, list[str]]:
    """The kind asked for and the PyTorch class names it may have, the checkpoint's own
    name first."""
    kind = head or head_of_config(getattr(config, "architectures", None))
    refusal = unsupported(kind, decoders=decoders)
    if refusal is not None:
        raise TfparityError(
            f"tfparity cannot check {kind.value} heads yet: {refusal}. "
            "Pass --head base to check the model's body."
        )
    named = [n.removeprefix("TF") for n in getattr(config, "architectures", None) or ()]
    names = [n for n in named if head_of_class(n) is kind]
    arch = for_config(config)
    if kind is Head.SEQ2SEQ_LM and arch.pt_seq2seq_class is not None:
        names.append(arch.pt_seq2seq_class)  # not named after the base (T5EncoderModel)
    names += pt_class_candidates(arch.pt_class, kind)
    return kind, list(dict.fromkeys(names))


def generation_head(spec: ModelSpec) -> Head:
    """The class ``tfparity generate`` loads for a spec that names none: a seq2seq
    architecture's seq2seq LM (T5, mT5), else a causal LM (a family with neither is
    refused by name once loaded). An export or a keras-hub spec keeps its own rules."""
    from ...architectures import lookup

    if spec.kind == "tiny":
        seq2seq = lookup(spec.location).seq2seq
    elif spec.kind in ("dir", "hub", "minilm"):
        seq2seq = for_config(read_config(local_dir(spec))).seq2seq
    else:
        seq2seq = False
    return Head.SEQ2SEQ_LM if seq2seq else Head.CAUSAL_LM


def tf_lm_head_class(config: Any) -> Any:
    """The TF class with a language-model head for ``config`` (masked LM, else causal)."""
    name = for_config(config).tf_head_class
    if name is None:
        raise TfparityError(
            f"transformers has no TensorFlow language-model head for '{config.model_type}'."
        )
    return getattr(import_transformers(), name)


def load_tf(
    spec: ModelSpec,
    *,
    allow_pickle: bool = False,
    head: Head | None = None,
    lm_head: bool = False,
    decoders: bool = False,
) -> Loaded:
    """Load and build the TF model that ``spec`` names: the class of kind ``head``
    (None: the spec's own, else the one ``config.architectures`` names), or with
    ``lm_head`` the family's language-model head. ``decoders``: a kind only the commands
    running a decoder load (a seq2seq LM) loads too
    (:func:`~tfparity.architectures.heads.unsupported`)."""
    head = head or spec.head
    if spec.kind == "keras-hub":
        raise TfparityError(
            f"'{spec.text}' is a keras-hub (Keras 3) model, not a Hugging Face TF model; "
            "this command or API takes Hugging Face TF models only."
        )
    if spec.kind == "tiny":
        kind = head or Head.BASE
        return _load_tiny(spec.location, head=kind, lm_head=lm_head, decoders=decoders)
    directory = local_dir(spec)
    return _load_dir(
        directory,
        allow_pickle=allow_pickle,
        head=head,
        lm_head=lm_head,
        label=spec.text,
        decoders=decoders,
    )


def _load_tiny(
    arch: str, head: Head = Head.BASE, lm_head: bool = False, decoders: bool = False
) -> Loaded:
    config = tiny.tiny_config(arch)
    cls = tf_lm_head_class(config) if lm_head else head_classes(config, head, decoders=decoders)[0]
    model = cls.from_config(config)
    build(model)
    own = "" if lm_head or head is Head.BASE else f"/{head.value}"
    tiny.seed_weights(model.weights, seed=f"tiny:{arch}{own}")
    if lm_head or head is not Head.BASE:
        # the body gets exactly tiny:<model_type>'s weights; only the head its own
        copy_matching(_load_tiny(arch).model, model)
        _tie_output_embeddings(model)
        _tie_decoder_bias(model)
    return Loaded(model, tiny.tiny_tokenizer(), config, f"tiny:{arch}{own} (seeded random weights)")


def copy_matching(source: Any, target: Any) -> None:
    """Assign ``source``'s weights to ``target``'s of the same path below the model scope."""
    by_path = {v.name.split("/", 1)[-1]: v for v in source.weights}
    for var in target.weights:
        match = by_path.get(var.name.split("/", 1)[-1])
        if match is not None and match.shape == var.shape:
            var.assign(match)


def _tie_decoder_bias(model: Any) -> None:
    """A seeded MLM head's decoder bias made equal to its prediction bias: transformers'
    TF ALBERT and MobileBERT hold both (``predictions/bias`` and
    ``predictions/decoder/bias``, the latter the one their call adds), PyTorch one tied
    pair, which a converted checkpoint fills with the same values on both sides."""
    by_name = {v.name: v for v in model.trainable_weights}
    for name, var in by_name.items():
        decoder = by_name.get(name.replace("predictions/bias", "predictions/decoder/bias"))
        if name.endswith("predictions/bias:0") and decoder is not None:
            decoder.assign(var)


def _tie_output_embeddings(model: Any) -> None:
    """A seeded LM head that its config ties to the word embeddings, made equal to them:
    transformers' TF XGLM keeps ``lm_head`` as a Dense layer of its own (and its
    ``get_output_embeddings`` returns None), and TF MobileBERT its MLM decoder weight,
    which the seeds filled with other values, while PyTorch ties them (a converted
    checkpoint holds the tied matrix on both sides)."""
    from .gather import word_embedding_matrix

    if not model.config.tie_word_embeddings:
        return
    matrix = word_embedding_matrix(model)
    for var in model.trainable_weights:
        scope = var.name.split("/")
        if len(scope) > 1 and scope[1] == "lm_head" and tuple(var.shape) == matrix.shape[::-1]:
            var.assign(import_tf().transpose(matrix))
        # MobileBERT's MLM decoder: a [vocab, embedding] weight of its own in TF
        if var.name.endswith("predictions/decoder/weight:0") and var.shape == matrix.shape:
            var.assign(matrix)


def build(model: Any) -> None:
    """Create the weights (a TF model has none until built). transformers' ``build``
    methods make them by shape, without running the model: the same weights in the same
    order as a call on dummy inputs, in half the time (docs/benchmarks.md). A class that
    cannot run here is refused where it first runs (:func:`cannot_run`)."""
    model.build_in_name_scope()


def cannot_run(model: Any, exc: NameError) -> TfparityError:
    """The refusal for a class whose module lacks an optional package transformers
    skipped importing (TAPAS's heads use ``tensorflow_probability``): its call fails with
    a NameError, which is exit 2 naming the package, not the catch-all."""
    found = re.search(r"name '(\w+)' is not defined", str(exc))
    missing = found.group(1) if found else "a name"
    return TfparityError(
        f"{type(model).__name__} cannot run here: transformers' module for it uses "
        f"{missing!r}, which it did not import (an optional package it needs is not "
        "installed; TAPAS's TF heads need tensorflow_probability)."
    )


def _load_dir(
    directory: Path,
    *,
    allow_pickle: bool,
    head: Head | None = None,
    lm_head: bool = False,
    label: str | None = None,
    decoders: bool = False,
) -> Loaded:
    t = import_transformers()
    config = read_config(directory)
    cls = tf_lm_head_class(config) if lm_head else head_classes(config, head, decoders=decoders)[0]
    files = {p.name for p in directory.iterdir()}
    facts: dict = {}
    tf_safetensors = is_tf_safetensors(directory, files)
    if files & set(TF_WEIGHTS) or tf_safetensors:
        model, source = _from_tf(cls, directory), f"TF weights in {directory}"
        facts = tf_checkpoint_gaps(model, directory, files, tf_safetensors)
    elif files & set(PT_SAFETENSORS):
        model, facts, how = _from_safetensors(cls, config, directory, files)
        source = f"PyTorch safetensors in {directory} ({how})"
    elif files & set(PT_PICKLE):
        if not allow_pickle:
            raise TfparityError(
                f"{directory} holds only a pickled PyTorch checkpoint (pytorch_model.bin). "
                "Pickle files can run code when loaded; convert it to safetensors, or pass "
                "--allow-pickle to load it with torch.load(weights_only=True)."
            )
        model, facts = _from_pt_state(cls, config, _read_pickle(directory, files), directory)
        source = f"PyTorch pickle (weights_only) in {directory}"
    else:
        raise TfparityError(
            f"{directory} has config.json but no model weights "
            f"(looked for {', '.join(TF_WEIGHTS + PT_SAFETENSORS + PT_PICKLE)})."
        )
    tokenizer = checkpoint_tokenizer(t, directory, label)
    holdings = _holdings(model, facts) if "missing" in facts else None
    notes = list(facts.get("notes", []))
    if holdings is not None:
        holdings = renamed_gaps(config, cls.__name__, holdings)  # TF's own names
        dropped, kept = dropped_head(config, cls.__name__, holdings)  # named, not "unused"
        notes += refuse_unused_body(kept, f"the checkpoint in {directory}") + dropped
    return Loaded(model, tokenizer, config, source, notes, holdings)


def _holdings(model: Any, facts: dict) -> Holdings:
    """The conversion's gaps, by base-relative PyTorch names, with the body's modules
    (the top-level names of the main layer's weights, the pooler aside)."""
    from .weight_names import tf_weights_by_pt_name

    # transformers' own rule for the main layer (TFPreTrainedModel): a T5 nests none,
    # its encoder and decoder are the model's own layers, so the model is its body
    main = {id(v) for v in getattr(model, model.base_model_prefix, model).weights}
    body = {
        n.split(".", 1)[0]
        for n, w in tf_weights_by_pt_name(model).items()
        if id(w.variable) in main
    }
    return Holdings.of(facts["missing"], facts["unused"], model.base_model_prefix, body)


def is_tf_safetensors(directory: Path, files: set[str]) -> bool:
    """Whether ``directory``'s ``model.safetensors`` is TF's (``save_pretrained`` of a TF
    model with safetensors), not PyTorch's: its metadata says ``format: tf``."""
    if not files & set(PT_SAFETENSORS):
        return False
    first = _shards(directory, "model.safetensors", files)[0]  # sharded checkpoints too
    return _safetensors_metadata(directory / first).get("format") == "tf"


def _safetensors_metadata(path: Path) -> dict:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="np") as f:
            return f.metadata() or {}
    except Exception as exc:
        raise TfparityError(f"The checkpoint {path} is corrupt or not safetensors: {exc}") from exc


def _read_safetensors(directory: Path, files: set[str]) -> dict[str, Any]:
    from safetensors.numpy import load_file

    names = _shards(directory, "model.safetensors", files)
    state: dict[str, Any] = {}
    for name in names:
        try:
            state.update(load_file(str(directory / name)))
        except Exception as exc:
            raise TfparityError(
                f"The checkpoint {directory / name} could not be read "
                f"(corrupt or truncated?): {exc}"
            ) from exc
    return state


def _read_pickle(directory: Path, files: set[str]) -> dict[str, Any]:
    torch = import_torch()
    state: dict[str, Any] = {}
    for name in _shards(directory, "pytorch_model.bin", files):
        try:
            part = torch.load(str(directory / name), map_location="cpu", weights_only=True)
        except Exception as exc:
            raise TfparityError(
                f"The checkpoint {directory / name} could not be read with "
                f"torch.load(weights_only=True): {exc}"
            ) from exc
        state.update(
            {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in part.items()}
        )
    return state


def _shards(directory: Path, single: str, files: set[str]) -> list[str]:
    if single in files:
        return [single]
    index = json.loads((directory / f"{single}.index.json").read_text())
    return sorted(set(index["weight_map"].values()))


def _from_tf(cls: Any, directory: Path) -> Any:
    try:
        model = cls.from_pretrained(str(directory), trust_remote_code=False)
    except Exception as exc:
        raise TfparityError(
            f"The TF checkpoint in {directory} could not be loaded "
            f"(corrupt, or not matching config.json?): {exc}"
        ) from exc
    build(model)
    return model


def _from_safetensors(
    cls: Any, config: Any, directory: Path, files: set[str]
) -> tuple[Any, dict, str]:
    """PT -> TF conversion, through the on-disk cache keyed by the checkpoint's hash."""
    from ..sources.weight_cache import load_or_convert

    return load_or_convert(
        [directory / name for name in _shards(directory, "model.safetensors", files)],
        f"{cls.__name__}-{config.model_type}",
        lambda: _empty(cls, config, directory),
        lambda: _from_pt_state(cls, config, _read_safetensors(directory, files), directory),
    )


def _empty(cls: Any, config: Any, directory: Path) -> Any:
    """``cls`` built from ``config`` with fresh weights. A config that transformers'
    model refuses (heads that do not divide the hidden size) is the user's file to fix."""
    try:
        model = cls.from_config(config)
    except ValueError as exc:
        raise TfparityError(
            f"{directory / 'config.json'}: transformers refuses this config: {exc}"
        ) from exc
    build(model)
    return model


def _from_pt_state(
    cls: Any, config: Any, state: dict[str, Any], directory: Path
) -> tuple[Any, dict]:
    from transformers.modeling_tf_pytorch_utils import load_pytorch_state_dict_in_tf2_model

    tf = import_tf()
    model = _empty(cls, config, directory)
    try:
        _, info = load_pytorch_state_dict_in_tf2_model(
            model,
            state,
            allow_missing_keys=True,
            output_loading_info=True,
            skip_logger_warnings=True,
        )
    except (tf.errors.InvalidArgumentError, ValueError) as exc:
        raise TfparityError(
            f"The checkpoint's weights do not fit the model that config.json "
            f"describes: {str(exc).splitlines()[0]}"
        ) from exc
    notes = made_up_note(info["missing_keys"])
    # integer tensors are buffers (position_ids), not weights a model could leave unread
    unused = sorted(k for k in info["unexpected_keys"] if _is_float(state.get(k)))
    return model, {"notes": notes, "missing": sorted(info["missing_keys"]), "unused": unused}


def _is_float(tensor: Any) -> bool:
    """A numpy or torch tensor of floats (bfloat16 included)."""
    dtype = str(getattr(tensor, "dtype", "")).removeprefix("torch.")
    return dtype.startswith(("float", "bfloat", "half"))
