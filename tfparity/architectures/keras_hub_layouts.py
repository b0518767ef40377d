"""keras-hub (Keras 3) as a second TF-side framework in the registry: how a family's
keras-hub backbone lines up with its Hugging Face PyTorch model.

A family module sets ``Architecture.keras_hub`` to a :class:`KerasHubLayout`. The
keras-hub adapter (:mod:`tfparity.adapters.keras_hub.side`) does the rest generically:

- ``hidden_states[0]`` is the first transformer block's input, ``hidden_states[k]`` the
  output of block call ``k-1``, and the last hidden state is the backbone's
  ``sequence_output``: after the final norm where the family has one (GPT-2's
  ``layer_norm``, Llama's ``sequence_output_layernorm``), as Hugging Face's last
  ``hidden_states`` entry is. Shared blocks (ALBERT) are counted per call.
- Sub-layer taps use the same names as the HF layouts (``layer_{i}.attention``,
  ``.intermediate``, ``.output``, ``embeddings``, ``pooler``); ``block_taps`` gives them
  for one keras-hub block. Nothing here imports Keras: the functions navigate the
  objects handed to them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .faults import Expect, Fault, Part, Parts, encoder_faults, on_backbone, set_epsilon
from .sublayers import FeedForward, Tap

if TYPE_CHECKING:
    from .findings import KnownDifference


# keras-hub backbone config names -> transformers config names, as keras-hub's
# converters (convert_<arch>.py) map them the other way; families rename some.
PRESET_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        "vocabulary_size": "vocab_size",
        "num_layers": "num_hidden_layers",
        "num_heads": "num_attention_heads",
        "num_query_heads": "num_attention_heads",
        "num_key_value_heads": "num_key_value_heads",
        "hidden_dim": "hidden_size",
        "intermediate_dim": "intermediate_size",
        "max_sequence_length": "max_position_embeddings",
        "num_segments": "type_vocab_size",
        "head_dim": "head_dim",
        "tie_word_embeddings": "tie_word_embeddings",
    }
)


def preset_fields(
    renames: Mapping[str, str] | None = None, **adjust: Callable[[Any], Any]
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Read a saved keras-hub backbone config as Hugging Face config fields:
    :data:`PRESET_FIELDS` with the family's ``renames`` (DistilBERT's ``dim``, GPT-2's
    ``n_embd``), then ``adjust`` (HF field -> function) undoes a converter's arithmetic
    (RoBERTa's position table is ``max_sequence_length + 2``; Gemma's
    ``intermediate_dim`` is twice HF's ``intermediate_size``)."""
    names = {**PRESET_FIELDS, **(renames or {})}

    def read(saved: Mapping[str, Any]) -> dict[str, Any]:
        found = {names[k]: v for k, v in saved.items() if k in names and v is not None}
        for hf_field, change in adjust.items():
            if hf_field in found:
                found[hf_field] = change(found[hf_field])
        return found

    return read


@dataclass(frozen=True)
class HeadWeight:
    """One weight of a keras-hub task's own head and the Hugging Face weight it holds:
    the variable's path in the task (``mlm_head/intermediate_dense/kernel``), the HF key
    as converters name it (no model prefix), and whether Keras holds it transposed (a
    Dense kernel is ``[in, out]``, PyTorch's Linear weight ``[out, in]``)."""

    path: str
    hf_key: str
    transposed: bool = False


@dataclass(frozen=True)
class KerasHubHead:
    """A keras-hub task's head as the Hugging Face head it stands for: keras-hub's
    converters port no text head, so this map is tfparity's (HF head modules <-> the
    task's head layers). ``task``: the keras-hub task class; ``kind``: the HF head kind
    (a :class:`~.heads.Head` value); ``weights``: every variable of the head that is not
    the backbone's (a tied decoder is the backbone's token embedding, reversed).
    ``differs``: where keras-hub's head computes otherwise than transformers' (None:
    it does not), said in the report's notes."""

    task: str
    kind: str
    weights: tuple[HeadWeight, ...]
    differs: str | None = None


@dataclass(frozen=True)
class KerasHubLayout:
    """How keras-hub's backbone for a model type maps onto the Hugging Face model.

    ``backbone``: the keras-hub class its transformers converter builds (documentation
    and a sanity check). ``block_taps(block)``: component -> :class:`Tap` inside one
    transformer block (None: localised to the layer). ``embeddings``/``pooler``: layers
    whose outputs are HF's embedding output and pooler output. ``final_norm``: the layer
    after the last block (the last hidden state is after it). ``feed_forward(block)``:
    the dense layers and norm around the activation, for numeric hints.
    ``effective_config(backbone)``: Hugging Face config fields as the backbone really
    uses them (epsilon, activation, RoPE theta, sliding window), so hints compare what
    runs, not what config.json says. ``faults``: breakages injected into the backbone,
    with where the cross-check must localise them. ``known_difference``: where the
    converter really differs from transformers on ``tiny:<model_type>``.
    ``preset_config(saved)``: the Hugging Face config fields of the structure a keras-hub
    preset's saved backbone config describes (:func:`preset_fields`); the fields
    ``effective_config`` reads from the loaded backbone are not repeated there.
    ``heads``: the family's task heads tfparity maps onto Hugging Face's
    (:class:`KerasHubHead`); a task not here keeps its head unchecked.
    """

    backbone: str
    block_taps: Callable[[Any], dict[str, Tap]] | None = None
    embeddings: str | None = None
    pooler: str | None = None
    final_norm: str | None = None
    feed_forward: Callable[[Any], FeedForward | None] | None = None
    effective_config: Callable[[Any], dict[str, Any]] = lambda backbone: {}
    faults: tuple[Fault, ...] = ()
    known_difference: KnownDifference | None = None
    preset_config: Callable[[Mapping[str, Any]], dict[str, Any]] = preset_fields()
    heads: tuple[KerasHubHead, ...] = ()


# ----------------------------------------------------------------------------- taps


def post_norm_encoder_taps(block: Any) -> dict[str, Tap]:
    """keras-hub's ``TransformerEncoder`` (post-LayerNorm: BERT, RoBERTa, DistilBERT,
    ALBERT): attention + residual + LayerNorm, the activated up-projection, and the
    down-projection + residual + LayerNorm (the block's output)."""
    return {
        "attention": Tap(block._self_attention_layer_norm),
        "intermediate": Tap(block._feedforward_intermediate_dense),
        "output": Tap(block._feedforward_layer_norm),
    }


def encoder_feed_forward(block: Any) -> FeedForward:
    act = getattr(block._feedforward_intermediate_dense.activation, "__name__", "?")
    return FeedForward(
        block._feedforward_intermediate_dense,
        block._feedforward_output_dense,
        block._feedforward_layer_norm,
        act,
    )


def pre_norm_decoder_taps(block: Any) -> dict[str, Tap]:
    """keras-hub's ``TransformerDecoder`` with ``normalize_first`` (GPT-2): the first
    residual sum (the FFN norm's input), the activated up-projection, the block output."""
    return {
        "attention": Tap(block._feedforward_layer_norm, "in"),
        "intermediate": Tap(block._feedforward_intermediate_dense),
        "output": Tap(block),
    }


def gated_decoder_taps(block: Any) -> dict[str, Tap]:
    """Llama-style decoders (Llama, Mistral, Qwen, Qwen3): the residual sum after
    attention (the FFN RMSNorm's input), the gated product (the down-projection's input),
    the block output."""
    return {
        "attention": Tap(block._feedforward_layernorm, "in"),
        "intermediate": Tap(block._feedforward_output_dense, "in"),
        "output": Tap(block),
    }


def gemma_taps(block: Any) -> dict[str, Tap]:
    """Gemma's ``GemmaDecoderBlock``: as :func:`gated_decoder_taps` under its names."""
    return {
        "attention": Tap(block.pre_ffw_norm, "in"),
        "intermediate": Tap(block.ffw_linear, "in"),
        "output": Tap(block),
    }


# ----------------------------------------------------------------------------- config


def block_config(
    act_field: str = "hidden_act", eps_field: str | None = "layer_norm_eps"
) -> Callable[[Any], dict[str, Any]]:
    """The activation and LayerNorm epsilon keras-hub's blocks really use, under the HF
    config fields of the family (``hidden_act``/``layer_norm_eps`` for BERT)."""

    def read(backbone: Any) -> dict[str, Any]:
        block = _first_block(backbone)
        act = getattr(block._feedforward_intermediate_dense.activation, "__name__", None)
        found: dict[str, Any] = {act_field: act}
        if eps_field is not None:
            found[eps_field] = float(block._feedforward_layer_norm.epsilon)
        return found

    return read


encoder_config = block_config()


def decoder_config(backbone: Any) -> dict[str, Any]:
    """RMSNorm epsilon, RoPE theta and sliding window of a Llama-style backbone."""
    found: dict[str, Any] = {}
    for field, attrs in (
        ("rms_norm_eps", ("layer_norm_epsilon",)),
        ("rope_theta", ("rope_max_wavelength",)),
        ("sliding_window", ("sliding_window", "sliding_window_size")),
    ):
        for attr in attrs:
            if hasattr(backbone, attr):
                found[field] = getattr(backbone, attr)
                break
    if getattr(backbone, "use_sliding_window_attention", True) is False:
        found["sliding_window"] = None
    return found


def _first_block(backbone: Any) -> Any:
    blocks = backbone.transformer_layers
    first = blocks[0]
    return first[0] if isinstance(first, (list, tuple)) else first


def block(backbone: Any, i: int) -> Any:
    """Transformer block ``i`` of a backbone (ALBERT's groups flattened)."""
    flat = []
    for b in backbone.transformer_layers:
        flat.extend(b if isinstance(b, (list, tuple)) else [b])
    return flat[i % len(flat)]


# ----------------------------------------------------------------------------- faults


def swap_gelu(dense: Any) -> None:
    """Swap a dense layer's GELU for the other one (tanh <-> exact erf)."""
    import keras

    tanh = getattr(dense.activation, "__name__", "") == "gelu_approximate"

    def gelu_exact(x: Any) -> Any:
        return keras.activations.gelu(x, approximate=False)

    def gelu_approximate(x: Any) -> Any:
        return keras.activations.gelu(x, approximate=True)

    dense.activation = gelu_exact if tanh else gelu_approximate


BLOCK = "transformer_layers.{i}."  # a Part's path to block i of a backbone


def backbone_parts(**parts: Any) -> Parts:
    """:class:`Parts` of a keras-hub backbone: paths from the backbone (:data:`BLOCK`)."""
    return Parts(root=on_backbone, **parts)


# keras-hub's TransformerEncoder (BERT): the shared encoder catalogue on the backbone.
ENCODER_PARTS = backbone_parts(
    query_bias=Part(BLOCK + "_self_attention_layer.query_dense.bias"),
    attention_output_kernel=Part(BLOCK + "_self_attention_layer.output_dense.kernel"),
    query_kernel=Part(BLOCK + "_self_attention_layer.query_dense.kernel"),
    intermediate_bias=Part(
        BLOCK + "_feedforward_intermediate_dense.bias", name="dropped intermediate bias"
    ),
    position_table=Part("position_embedding.position_embeddings", name="shifted position table"),
)
ENCODER_FAULTS: tuple[Fault, ...] = encoder_faults(
    ENCODER_PARTS,
    extra=(
        Fault(
            name="GELU variant (tanh <-> exact)",
            apply=on_backbone(lambda b: swap_gelu(block(b, 0)._feedforward_intermediate_dense)),
            expect=Expect.at(
                layer=0,
                component="intermediate",
                hint="activation: PyTorch's intermediate output matches",
            ),
        ),
        Fault(
            name="LayerNorm epsilon 1e-3",
            apply=on_backbone(lambda b: set_epsilon(block(b, 0)._feedforward_layer_norm, 1e-3)),
            expect=Expect.at(
                layer=0,
                component="output",
                hint="PyTorch's output matches eps=1e-12, TF uses 0.001",
            ),
        ),
    ),
)
