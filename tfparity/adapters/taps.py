"""Sub-layer taps and isolated runs for the BERT family (BERT, RoBERTa, ELECTRA).

Tap names, in the order data flows through a layer: ``embeddings``,
``layer_{i}.attention`` (self-attention + dense + residual + LayerNorm),
``layer_{i}.intermediate`` (FFN up-projection + activation), ``layer_{i}.output``
(FFN down-projection + residual + LayerNorm), ``pooler``.

*Taps* record these outputs during a full run in both frameworks (PyTorch forward
hooks; on the TF side the sub-layers' ``call`` is wrapped for the run). *Isolation*
feeds each TF sub-layer the PyTorch sub-layer's own input, so a component's own error
is separated from error carried in from below (the nobuco approach).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..compare import to_numpy
from ..inputs import Batch
from .runtime import import_tf, import_torch

FAMILY = ("bert", "roberta", "electra", "xlm-roberta", "camembert")
COMPONENTS = ("attention", "intermediate", "output")


def supported(config: Any) -> bool:
    return config.model_type in FAMILY


def tap_names(num_layers: int, pooler: bool) -> list[str]:
    names = ["embeddings"]
    for i in range(num_layers):
        names += [f"layer_{i}.{c}" for c in COMPONENTS]
    return names + (["pooler"] if pooler else [])


# ----------------------------------------------------------------------------- TF


def _tf_main(model: Any) -> Any:
    return getattr(model, model.base_model_prefix)


def tf_modules(model: Any) -> dict[str, Any]:
    main = _tf_main(model)
    modules = {"embeddings": main.embeddings}
    for i, layer in enumerate(main.encoder.layer):
        modules[f"layer_{i}.attention"] = layer.attention
        modules[f"layer_{i}.intermediate"] = layer.intermediate
        modules[f"layer_{i}.output"] = layer.bert_output
    if getattr(main, "pooler", None) is not None:
        modules["pooler"] = main.pooler
    return modules


@contextlib.contextmanager
def tf_taps(model: Any) -> Iterator[dict[str, np.ndarray]]:
    """Record TF sub-layer outputs while the block runs; restores ``call`` afterwards."""
    recorded: dict[str, np.ndarray] = {}
    modules = tf_modules(model)
    originals = {}
    for name, layer in modules.items():
        originals[name] = layer.call
        layer.call = _recording(layer.call, name, recorded)
    try:
        yield recorded
    finally:
        for name, layer in modules.items():
            layer.call = originals[name]


def _recording(call: Any, name: str, recorded: dict[str, np.ndarray]) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        recorded[name] = to_numpy(out[0] if isinstance(out, (tuple, list)) else out)
        return out

    return wrapper


# ----------------------------------------------------------------------------- PT


def pt_modules(model: Any) -> dict[str, Any]:
    modules = {"embeddings": model.embeddings}
    for i, layer in enumerate(model.encoder.layer):
        modules[f"layer_{i}.attention"] = layer.attention
        modules[f"layer_{i}.intermediate"] = layer.intermediate
        modules[f"layer_{i}.output"] = layer.output
    if getattr(model, "pooler", None) is not None:
        modules["pooler"] = model.pooler
    return modules


@contextlib.contextmanager
def pt_taps(model: Any) -> Iterator[dict[str, np.ndarray]]:
    """Record PyTorch sub-module outputs with forward hooks while the block runs."""
    recorded: dict[str, np.ndarray] = {}
    handles = []
    for name, module in pt_modules(model).items():

        def hook(_m, _inputs, output, name=name):
            out = output[0] if isinstance(output, (tuple, list)) else output
            recorded[name] = out.detach().cpu().double().numpy()

        handles.append(module.register_forward_hook(hook))
    try:
        yield recorded
    finally:
        for handle in handles:
            handle.remove()


# ----------------------------------------------------------------------------- isolation


def isolate(
    tf_model: Any, pt_taps: dict[str, np.ndarray], pt_hidden: list[np.ndarray], batch: Batch
) -> dict[str, np.ndarray]:
    """Run each TF sub-layer on the PyTorch sub-layer's own input.

    ``pt_taps`` and ``pt_hidden`` (the PyTorch ``hidden_states``) come from one PyTorch
    run of ``batch``. Returns TF outputs under the tap names.
    """
    tf = import_tf()
    modules = tf_modules(tf_model)
    # A mixed-precision model's layers compute in float16/bfloat16 and take only inputs
    # of that dtype (Keras casts just the first argument), so everything is fed in it.
    dtype = tf.as_dtype(getattr(tf_model, "compute_dtype", None) or "float32")
    mask = tf.cast(batch.attention_mask, dtype)[:, None, None, :]
    extended = (1.0 - mask) * -10000.0  # what TF BERT's main layer builds
    out: dict[str, np.ndarray] = {}

    def f32(x: np.ndarray) -> Any:
        return tf.cast(tf.constant(np.asarray(x, np.float32)), dtype)

    n_layers = sum(1 for k in modules if k.endswith(".attention"))
    for i in range(n_layers):
        attn_in = f32(pt_hidden[i])
        attn = modules[f"layer_{i}.attention"](
            input_tensor=attn_in,
            attention_mask=extended,
            head_mask=None,
            encoder_hidden_states=None,
            encoder_attention_mask=None,
            past_key_value=None,
            output_attentions=False,
            training=False,
        )[0]
        out[f"layer_{i}.attention"] = to_numpy(attn)
        pt_attn = f32(pt_taps[f"layer_{i}.attention"])
        out[f"layer_{i}.intermediate"] = to_numpy(modules[f"layer_{i}.intermediate"](pt_attn))
        out[f"layer_{i}.output"] = to_numpy(
            modules[f"layer_{i}.output"](
                hidden_states=f32(pt_taps[f"layer_{i}.intermediate"]),
                input_tensor=pt_attn,
                training=False,
            )
        )
    if "pooler" in modules:
        out["pooler"] = to_numpy(modules["pooler"](f32(pt_hidden[-1])))
    return out


def pt_module_weights(pt_model: Any) -> dict[str, np.ndarray]:
    """PyTorch parameters as numpy, by state-dict name (for weight-level hints)."""
    import_torch()
    return {k: v.detach().cpu().numpy() for k, v in pt_model.state_dict().items()}
