"""Where each model family keeps its sub-layers, in TF and in PyTorch (BERT family,
DistilBERT, GPT-2, ALBERT).

Every family maps its blocks onto the same tap names (see :mod:`.taps`):
``layer_{i}.attention`` (self-attention + residual + LayerNorm), ``layer_{i}.intermediate``
(FFN up-projection + activation), ``layer_{i}.output`` (FFN down-projection + residual +
LayerNorm). A :class:`Tap` names the layer whose output (or input) is that value: in
DistilBERT the activation is a plain function inside the FFN, so its output is read as
the input of the down-projection.

A family also knows how to run one block's sub-layers on PyTorch's own inputs
(isolation), which PyTorch parameters belong to a component (weight hints), and the
dense layers and LayerNorm around the activation (numeric hints).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

COMPONENTS = ("attention", "intermediate", "output")


@dataclass(frozen=True)
class Tap:
    """``layer``'s output (``side="out"``) or first input (``side="in"``). A ``shared``
    layer runs once per model layer (ALBERT): its tap is named by the component alone
    and each call is recorded as ``layer_{call}.{component}``."""

    layer: Any
    side: str = "out"
    shared: bool = False


@dataclass(frozen=True)
class FeedForward:
    """The TF layers around a block's activation: up-projection, down-projection and
    the LayerNorm after the residual, and the activation's config name."""

    up: Any
    down: Any
    norm: Any
    activation: str


class BertFamily:
    """BERT, RoBERTa, ELECTRA, XLM-R, CamemBERT: ``encoder.layer[i]`` holds
    ``attention``, ``intermediate`` and ``output`` in both frameworks."""

    model_types = ("bert", "roberta", "electra", "xlm-roberta", "camembert")

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main, "bert_output")  # TF names the FFN output layer so

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return self._taps(model, "output")

    @staticmethod
    def _taps(main: Any, output: str) -> dict[str, Tap]:
        taps = {"embeddings": Tap(main.embeddings)}
        for i, layer in enumerate(main.encoder.layer):
            taps[f"layer_{i}.attention"] = Tap(layer.attention)
            taps[f"layer_{i}.intermediate"] = Tap(layer.intermediate)
            taps[f"layer_{i}.output"] = Tap(getattr(layer, output))
        if getattr(main, "pooler", None) is not None:
            taps["pooler"] = Tap(main.pooler)
        return taps

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Callable) -> dict:
        """Layer ``i``'s sub-layers on PyTorch's inputs; ``mask`` is ``[batch, seq]`` in
        the compute dtype, ``pt(name)`` a PyTorch tap as a tensor of that dtype."""
        layer = main.encoder.layer[i]
        extended = (1.0 - mask[:, None, None, :]) * -10000.0  # what TF BERT builds
        attn = layer.attention(
            input_tensor=x,
            attention_mask=extended,
            head_mask=None,
            encoder_hidden_states=None,
            encoder_attention_mask=None,
            past_key_value=None,
            output_attentions=False,
            training=False,
        )[0]
        pt_attn = pt(f"layer_{i}.attention")
        inter = layer.intermediate(pt_attn)
        out = layer.bert_output(
            hidden_states=pt(f"layer_{i}.intermediate"), input_tensor=pt_attn, training=False
        )
        return {"attention": attn, "intermediate": inter, "output": out}

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return [f"{component}."] if component in ("embeddings", "pooler") else []
        return [f"encoder.layer.{layer}.{component}."]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        layer = main.encoder.layer[i]
        out = layer.bert_output
        return FeedForward(layer.intermediate.dense, out.dense, out.LayerNorm, config.hidden_act)


class DistilBertFamily:
    """DistilBERT: ``transformer.layer[i]`` holds ``attention``, ``sa_layer_norm``,
    ``ffn`` (``lin1``, activation, ``lin2``) and ``output_layer_norm``."""

    model_types = ("distilbert",)

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main.embeddings, main.transformer.layer)

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return self._taps(model.embeddings, model.transformer.layer)

    @staticmethod
    def _taps(embeddings: Any, blocks: Any) -> dict[str, Tap]:
        taps = {"embeddings": Tap(embeddings)}
        for i, block in enumerate(blocks):
            taps[f"layer_{i}.attention"] = Tap(block.sa_layer_norm)
            taps[f"layer_{i}.intermediate"] = Tap(block.ffn.lin2, "in")
            taps[f"layer_{i}.output"] = Tap(block.output_layer_norm)
        return taps

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Callable) -> dict:
        block = main.transformer.layer[i]
        sa = block.attention(x, x, x, mask, None, False, training=False)[0]
        pt_attn = pt(f"layer_{i}.attention")
        return {
            "attention": block.sa_layer_norm(sa + x),
            "intermediate": block.ffn.activation(block.ffn.lin1(pt_attn)),
            "output": block.output_layer_norm(
                block.ffn.lin2(pt(f"layer_{i}.intermediate")) + pt_attn
            ),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return ["embeddings."] if component == "embeddings" else []
        block = f"transformer.layer.{layer}."
        return [
            block + part
            for part in {
                "attention": ("attention.", "sa_layer_norm."),
                "intermediate": ("ffn.lin1.",),
                "output": ("ffn.lin2.", "output_layer_norm."),
            }[component]
        ]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        block = main.transformer.layer[i]
        return FeedForward(
            block.ffn.lin1, block.ffn.lin2, block.output_layer_norm, config.activation
        )


class Gpt2Family:
    """GPT-2 (pre-LayerNorm): ``h[i]`` computes ``x + attn(ln_1(x))``, then
    ``+ mlp(ln_2(.))``. ``attention`` is the first residual sum (``ln_2``'s input),
    ``intermediate`` the activation (``mlp.c_proj``'s input), ``output`` the block's
    output. No LayerNorm follows the FFN, so there are no numeric FFN hints."""

    model_types = ("gpt2",)

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main.h)

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return self._taps(model.h)

    @staticmethod
    def _taps(blocks: Any) -> dict[str, Tap]:
        taps = {}
        for i, block in enumerate(blocks):
            taps[f"layer_{i}.attention"] = Tap(block.ln_2, "in")
            taps[f"layer_{i}.intermediate"] = Tap(block.mlp.c_proj, "in")
            taps[f"layer_{i}.output"] = Tap(block)
        return taps

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Callable) -> dict:
        block = main.h[i]
        extended = (1.0 - mask[:, None, None, :]) * -10000.0  # what TF GPT-2 builds
        a = block.attn(block.ln_1(x), None, extended, None, None, None, False, False)[0]
        pt_attn = pt(f"layer_{i}.attention")
        return {
            "attention": x + a,
            "intermediate": block.mlp.act(block.mlp.c_fc(block.ln_2(pt_attn))),
            "output": pt_attn + block.mlp.c_proj(pt(f"layer_{i}.intermediate")),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            return ["wte.", "wpe."] if component == "embeddings" else []
        parts = {
            "attention": ("ln_1.", "attn."),
            "intermediate": ("ln_2.", "mlp.c_fc."),
            "output": ("mlp.c_proj.",),
        }[component]
        return [f"h.{layer}.{part}" for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        return None


class AlbertFamily:
    """ALBERT with one layer shared by every layer (``num_hidden_groups`` and
    ``inner_group_num`` 1, as released): the shared layer's ``attention`` (with its
    residual and LayerNorm), ``ffn`` + activation, ``ffn_output`` + residual +
    ``full_layer_layer_norm``, recorded once per call. The pooler is not tapped: TF
    applies its tanh inside the layer, PyTorch in a separate module."""

    model_types = ("albert",)

    @staticmethod
    def applies(config: Any) -> bool:
        return config.num_hidden_groups == 1 and config.inner_group_num == 1

    def tf_taps(self, main: Any) -> dict[str, Tap]:
        return self._taps(main)

    def pt_taps(self, model: Any) -> dict[str, Tap]:
        return self._taps(model)

    @staticmethod
    def _taps(main: Any) -> dict[str, Tap]:
        layer = main.encoder.albert_layer_groups[0].albert_layers[0]
        return {
            "embeddings": Tap(main.embeddings),
            "attention": Tap(layer.attention, shared=True),
            "intermediate": Tap(layer.ffn_output, "in", shared=True),
            "output": Tap(layer.full_layer_layer_norm, shared=True),
        }

    def isolate_block(self, main: Any, i: int, x: Any, mask: Any, pt: Callable) -> dict:
        layer = main.encoder.albert_layer_groups[0].albert_layers[0]
        extended = (1.0 - mask[:, None, None, :]) * -10000.0  # what TF ALBERT builds
        attn = layer.attention(
            input_tensor=x,
            attention_mask=extended,
            head_mask=None,
            output_attentions=False,
            training=False,
        )[0]
        pt_attn = pt(f"layer_{i}.attention")
        return {
            "attention": attn,
            "intermediate": layer.activation(layer.ffn(pt_attn)),
            "output": layer.full_layer_layer_norm(
                layer.ffn_output(pt(f"layer_{i}.intermediate")) + pt_attn
            ),
        }

    def pt_prefixes(self, layer: int | str, component: str) -> list[str]:
        if not isinstance(layer, int):
            if component == "embeddings":
                return ["embeddings.", "encoder.embedding_hidden_mapping_in."]
            return ["pooler."] if component == "pooler" else []
        shared = "encoder.albert_layer_groups.0.albert_layers.0."  # every layer's weights
        parts = {
            "attention": ("attention.",),
            "intermediate": ("ffn.",),
            "output": ("ffn_output.", "full_layer_layer_norm."),
        }[component]
        return [shared + part for part in parts]

    def feed_forward(self, main: Any, i: int, config: Any) -> FeedForward | None:
        layer = main.encoder.albert_layer_groups[0].albert_layers[0]
        return FeedForward(
            layer.ffn, layer.ffn_output, layer.full_layer_layer_norm, config.hidden_act
        )


Family = BertFamily | DistilBertFamily | Gpt2Family | AlbertFamily
FAMILIES: tuple[Family, ...] = (BertFamily(), DistilBertFamily(), Gpt2Family(), AlbertFamily())


def family_of(config: Any) -> Family | None:
    """The family that knows ``config.model_type``'s sub-layers (in this config's
    layout), or None."""
    model_type = getattr(config, "model_type", None)
    family = next((f for f in FAMILIES if model_type in f.model_types), None)
    applies = getattr(family, "applies", None)
    return None if family is None or (applies and not applies(config)) else family


def numpy_weights(dense: Any) -> tuple[np.ndarray, np.ndarray]:
    """A TF Dense layer's kernel (float64) and bias, for numeric hints."""
    return dense.kernel.numpy().astype(np.float64), dense.bias.numpy()
