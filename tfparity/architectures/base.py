"""What tfparity knows of one architecture, as a typed record.

Every architecture fact (classes, tiny config, positions, embedding tables, LM head,
sub-layers, hint fields, faults) lives in the one module of its family under
:mod:`tfparity.architectures`; the rest of tfparity asks the registry for an
:class:`Architecture` by ``config.model_type`` and never branches on model types.

Nothing here imports TensorFlow, torch or transformers: the records are data and small
functions that navigate model objects handed to them, so ``tfparity --help`` and spec
parsing stay fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .faults import Fault
from .findings import KnownDifference
from .keras_hub_layouts import KerasHubLayout
from .sublayers import SubLayers


class Positions(str, Enum):
    """How a model tells positions apart, as the positions and embeds checks need it."""

    ABSOLUTE = "absolute"  # a table (learned or sinusoidal) added to the embeddings
    PADDING_AWARE = "padding-aware absolute"  # a table, rows counted from padding_idx + 1
    RELATIVE = "relative"  # biases or scores inside attention, no table
    ROTARY = "rotary"  # queries and keys rotated inside attention
    NONE = "none"
    UNKNOWN = "read off the model"  # the generic family: a position table, or relative


@dataclass(frozen=True)
class IdsOnlyTransform:
    """A change the ``input_ids`` path makes to the gathered word embeddings that the
    ``inputs_embeds`` path does not (the model takes given embeddings as they are).

    ``apply(tf, embeds, ids, config)`` makes gathered embeddings what the ids path
    feeds on; ``code`` is the line a user would add after the gather; ``reason`` says
    why the two paths legitimately differ without it.
    """

    reason: str
    code: str
    apply: Callable[[Any, Any, Any, Any], Any]
    applies: Callable[[Any], bool] = lambda config: True


@dataclass(frozen=True)
class EmbeddingTables:
    """Where the embedding layer keeps its tables, as attribute names.

    ``position`` and ``token_type`` are looked up on the embedding layer
    (``get_input_embeddings()``) first and then on the main layer; None: no such table.
    ``layer_norm`` is the embedding LayerNorm's attribute on the embedding layer.
    ``word``: the word-embedding layer's attribute on the main layer, for models whose
    ``get_input_embeddings()`` does not work in TF (Mistral); None: use that method.
    ``pt_time_major``: PyTorch's word-embedding module outputs ``[seq, batch, width]``
    (XLNet transposes the ids first), where TF's ``inputs_embeds`` are batch-major.
    """

    word: str | None = None
    position: str | None = "position_embeddings"
    token_type: str | None = "token_type_embeddings"
    layer_norm: str | None = "LayerNorm"
    pt_time_major: bool = False


@dataclass(frozen=True)
class LocalWindow:
    """Token mixing that follows sequence order whatever the position_ids say
    (Longformer's sliding-window attention, ConvBERT's span-based convolution,
    MobileBERT's trigram input, MPNet's relative attention bias): ``what`` it is, in
    words; its size in tokens, read from the config ``attribute`` or fixed (``tokens``;
    neither: no window); ``when``, the config flag that turns it on (None: always)."""

    what: str
    attribute: str | None = None
    tokens: int | None = None
    when: str | None = None


@dataclass(frozen=True)
class LMHead:
    """The LM head: what sits between the last hidden state and the vocabulary product
    (``{act}`` stands for the config's activation), and ``apply(head_model, tf)``, which
    gives ``fn(hidden) -> logits`` for the HF TF model with its head (``tf``: the
    TensorFlow module, for heads that are a bare product). ``tied_only``: the PyTorch
    name of an untied head's own weight (``lm_head.weight``) that the TF head class
    cannot hold, because it can only tie its output matrix to the word embeddings: a
    checkpoint with ``tie_word_embeddings=false`` loses that weight in TF (None: the TF
    class holds an untied head, or the family has no such weight)."""

    description: str
    apply: Callable[[Any, Any], Callable[[Any], Any]]
    tied_only: str | None = None


@dataclass(frozen=True)
class Renamed:
    """A module transformers' TF class names differently from its PyTorch model, so that
    loading a PyTorch checkpoint into it leaves the checkpoint's weights unread and TF's
    random: ``pt`` and ``tf``, the two names of the module (one path segment), ``what``
    it is and when the model has it (a phrase for messages)."""

    pt: str
    tf: str
    what: str


def hf_classes(stem: str, head: str = "ForMaskedLM") -> dict[str, str]:
    """The class names of a family named as transformers names most: ``{stem}Model`` and
    the head ``{stem}{head}`` in PyTorch, each with ``TF`` before it in TensorFlow; spread
    into an :class:`Architecture` (``**hf_classes("Bert")``)."""
    pt_class, pt_head_class = f"{stem}Model", f"{stem}{head}"
    return {
        "tf_class": f"TF{pt_class}",
        "pt_class": pt_class,
        "tf_head_class": f"TF{pt_head_class}",
        "pt_head_class": pt_head_class,
    }


@dataclass(frozen=True)
class Architecture:
    """Everything tfparity knows of one HF ``model_type``.

    Classes are transformers class names (resolved by the adapters, so this stays free
    of framework imports). ``tiny`` holds the keyword arguments of a 2-layer, 32-wide
    config (the adapters add the shared vocabulary); None: no ``tiny:`` spec.
    ``ffn_weight`` is the PyTorch name of one FFN weight of layer ``{layer}``, which the
    perturbed-port check scales. ``hint_fields`` are the config fields hints compare
    beside the common ones. ``shared_layers``: one layer's weights serve every layer
    (ALBERT), so a weight fault shows from layer 0 on. ``head_in_checkpoint``: a
    ``tiny:`` model of this type has a seeded LM head (T5: tfparity runs the encoder
    only). ``tf_class`` None: transformers has no TF class (Llama, Qwen, Gemma); such a
    model runs on the TF side only through keras-hub. ``keras_hub``: how keras-hub's
    backbone for this type maps onto the Hugging Face model (None: not covered).
    ``pt_seq2seq_class``: the PyTorch class of an encoder-decoder whose decoder
    generates (``T5ForConditionalGeneration``; TF: ``TF`` + it): the checks run its
    encoder (``tf_class``), ``tfparity generate`` this class; None: not a seq2seq LM.
    ``decoder_layer``: the PyTorch name prefix of that decoder's layer ``{layer}``, whose
    weights a generation defect's hint compares. ``tf_renamed``: modules the TF class
    names otherwise than PyTorch (:class:`Renamed`), which do not load from a PyTorch
    checkpoint.
    """

    model_type: str
    family: str
    tf_class: str | None
    pt_class: str
    tf_head_class: str | None = None
    pt_head_class: str | None = None
    tiny: Mapping[str, Any] | None = None
    positions: Positions = Positions.ABSOLUTE
    causal: bool = False
    local_window: LocalWindow | None = None
    # the TF call takes ``lengths`` and, given inputs_embeds in a trace of unknown batch
    # size, builds one of the wrong shape and fails its own assertion (XLM, Flaubert)
    takes_lengths: bool = False
    pt_seq2seq_class: str | None = None
    decoder_layer: str | None = None
    embeddings: EmbeddingTables = EmbeddingTables()
    ids_only: IdsOnlyTransform | None = None
    lm_head: LMHead | None = None
    head_in_checkpoint: bool = True
    sublayers: SubLayers | None = None
    hint_fields: tuple[str, ...] = ()
    faults: tuple[Fault, ...] = ()
    ffn_weight: str | None = None
    shared_layers: bool = False
    known_difference: KnownDifference | None = None
    generic: bool = False
    keras_hub: KerasHubLayout | None = None
    tf_renamed: tuple[Renamed, ...] = ()

    def sublayers_for(self, config: Any) -> SubLayers | None:
        """The sub-layer layout, where this config's layout is the one described."""
        sub = self.sublayers
        return sub if sub is not None and sub.applies(config) else None

    @property
    def seq2seq(self) -> bool:
        """An encoder-decoder whose decoder generates (T5, mT5)."""
        return self.pt_seq2seq_class is not None

    @property
    def localisation(self) -> str:
        return "sub-layer" if self.sublayers is not None else "layer"
