"""How PyTorch module paths name layers in an exported graph: the scopes that survive
``torch.onnx.export``.

The legacy (TorchScript) exporter names each node after the module that made it,
``/bert/encoder/layer.0/attention/self/query/MatMul``, so an ONNX file's intermediate
tensors can be put back onto layers by name, as :mod:`.tf_scopes` does for TF op names.
Hugging Face PyTorch models call block ``i`` ``layer.{i}`` (BERT family), ``h.{i}``
(GPT-2), ``layers.{i}`` or ``block.{i}``; inside a BERT-family block the sub-layers
are the modules the cross-check's taps are named after (``attention``,
``intermediate``, ``output``). GPT-2's taps are module *inputs* (its layout's
``Tap(block.ln_2, "in")``, ``Tap(block.mlp.c_proj, "in")``): the first residual sum and
the activation are the inputs of ``ln_2`` and ``mlp.c_proj``, and ``output`` is the
block's own output.
"""

from __future__ import annotations

import re

from .tf_scopes import ScopeNames

TORCH = ScopeNames(
    layer=re.compile(r"(?:^|[/.])(?:layer|layers|h|block)\.(\d+)(?:/|\.|$)"),
    component=re.compile(
        r"(?:^|[/.])(?:layer|layers)\.\d+[/.](attention|intermediate|output)(?:/|\.|$)"
    ),
    embedding=re.compile(r"(?:^|[/.])(?:embeddings|wte|wpe|embed_tokens)(?:/|\.|$)"),
)
layer_of, component_of = TORCH.layer_of, TORCH.component_of
is_embedding_scope = TORCH.is_embedding_scope

# (module path, component): the tap is the input of that module (GPT-2's layout)
_INPUT_TAPS = (
    (re.compile(r"(?:^|[/.])h\.(\d+)[/.]ln_2(?:/|\.|$)"), "attention"),
    (re.compile(r"(?:^|[/.])h\.(\d+)[/.]mlp[/.]c_proj(?:/|\.|$)"), "intermediate"),
)
# the norm after the last block (GPT-2's ln_f): Hugging Face's last hidden state is its output
_FINAL_NORM = re.compile(r"(?:^|[/.])(?:ln_f|final_layer_norm|norm)(?:/|\.|$)")


def input_tap_of(scope: str) -> tuple[int, str] | None:
    """(layer, component) of the tap that is the input of the module a node lies in
    (GPT-2: ``h.1.ln_2`` takes ``layer_1.attention``), or None."""
    for pattern, component in _INPUT_TAPS:
        m = pattern.search(scope)
        if m:
            return int(m.group(1)), component
    return None


def is_final_norm_scope(scope: str) -> bool:
    """Whether a node outside the blocks lies in the norm after the last one."""
    return _FINAL_NORM.search(scope) is not None
