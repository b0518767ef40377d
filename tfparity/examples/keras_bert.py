"""A hand-written Keras 3 BERT checked against Hugging Face's PyTorch BERT: the complete
example of docs/your-own-model.md, run by its tests (tests/adapters/user/test_user.py).

    python -m tfparity.examples.keras_bert

builds the model for ``tiny:bert``'s config, ports the PyTorch weights into it by
``WEIGHTS`` (Keras variable path -> PyTorch name, transposed where PyTorch stores a
Dense kernel ``[out, in]``), cross-checks it with ``LAYERS`` (which layer gives which
Hugging Face hidden state), then scales one feed-forward kernel of layer 1 by 1.1 and
cross-checks again: FAIL, localised to layer 1, the weight named.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # before Keras is first imported

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers, ops  # noqa: E402


class Embeddings(layers.Layer):
    """Word + position + token-type embeddings (the LayerNorm after them is its own layer)."""

    def __init__(self, vocab: int, positions: int, types: int, width: int, **kwargs):
        super().__init__(**kwargs)
        self.words = layers.Embedding(vocab, width, name="word_embeddings")
        self.positions = layers.Embedding(positions, width, name="position_embeddings")
        self.types = layers.Embedding(types, width, name="token_type_embeddings")

    def call(self, input_ids, token_type_ids):
        position_ids = ops.arange(ops.shape(input_ids)[1])[None, :]
        return self.words(input_ids) + self.positions(position_ids) + self.types(token_type_ids)


class Block(layers.Layer):
    """One post-LayerNorm encoder layer: self-attention, then the feed-forward network."""

    def __init__(self, width: int, heads: int, ffn: int, eps: float, **kwargs):
        super().__init__(**kwargs)
        self.heads, self.size = heads, width // heads
        self.query = layers.Dense(width, name="query")
        self.key = layers.Dense(width, name="key")
        self.value = layers.Dense(width, name="value")
        self.attn_out = layers.Dense(width, name="attn_out")
        self.attn_ln = layers.LayerNormalization(epsilon=eps, name="attn_ln")
        self.ffn_up = layers.Dense(ffn, name="ffn_up")
        self.ffn_down = layers.Dense(width, name="ffn_down")
        self.ffn_ln = layers.LayerNormalization(epsilon=eps, name="ffn_ln")

    def split(self, x):  # [batch, seq, width] -> [batch, heads, seq, size]
        x = ops.reshape(x, (ops.shape(x)[0], -1, self.heads, self.size))
        return ops.transpose(x, (0, 2, 1, 3))

    def call(self, x, attention_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / np.sqrt(self.size)
        padding = 1.0 - ops.cast(attention_mask, scores.dtype)[:, None, None, :]
        probs = ops.softmax(scores + padding * -1e9, axis=-1)
        context = ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3))
        context = ops.reshape(context, (ops.shape(x)[0], -1, self.heads * self.size))
        x = self.attn_ln(x + self.attn_out(context))
        up = keras.activations.gelu(self.ffn_up(x), approximate=False)  # BERT's exact GELU
        return self.ffn_ln(x + self.ffn_down(up))


def build_bert(config) -> keras.Model:
    """A functional Keras 3 BERT for a transformers ``BertConfig``."""
    ids = keras.Input((None,), dtype="int32", name="input_ids")
    mask = keras.Input((None,), dtype="int32", name="attention_mask")
    types = keras.Input((None,), dtype="int32", name="token_type_ids")
    width, eps = config.hidden_size, config.layer_norm_eps
    x = Embeddings(
        config.vocab_size,
        config.max_position_embeddings,
        config.type_vocab_size,
        width,
        name="embeddings",
    )(ids, types)
    x = layers.LayerNormalization(epsilon=eps, name="embeddings_ln")(x)
    for i in range(config.num_hidden_layers):
        block = Block(
            width, config.num_attention_heads, config.intermediate_size, eps, name=f"block_{i}"
        )
        x = block(x, mask)
    pooled = layers.Dense(width, activation="tanh", name="pooler")(x[:, 0])
    outputs = {"last_hidden_state": x, "pooler_output": pooled}
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    return keras.Model(inputs, outputs, name="keras_bert")


def layer_map(config) -> dict[str, int]:
    """Which layer's output is Hugging Face's ``hidden_states[k]``."""
    return {"embeddings_ln": 0, **{f"block_{i}": i + 1 for i in range(config.num_hidden_layers)}}


def weight_map(config) -> dict[str, str | tuple[str, str]]:
    """Keras variable path -> Hugging Face PyTorch weight name (``"transpose"``: PyTorch
    keeps a Dense kernel as ``[out, in]``, Keras as ``[in, out]``)."""
    found: dict[str, str | tuple[str, str]] = {
        "embeddings/word_embeddings/embeddings": "embeddings.word_embeddings.weight",
        "embeddings/position_embeddings/embeddings": "embeddings.position_embeddings.weight",
        "embeddings/token_type_embeddings/embeddings": "embeddings.token_type_embeddings.weight",
        "embeddings_ln/gamma": "embeddings.LayerNorm.weight",
        "embeddings_ln/beta": "embeddings.LayerNorm.bias",
        "pooler/kernel": ("pooler.dense.weight", "transpose"),
        "pooler/bias": "pooler.dense.bias",
    }
    parts = {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "attn_out": "attention.output.dense",
        "ffn_up": "intermediate.dense",
        "ffn_down": "output.dense",
    }
    norms = {"attn_ln": "attention.output.LayerNorm", "ffn_ln": "output.LayerNorm"}
    for i in range(config.num_hidden_layers):
        for ours, theirs in parts.items():
            found[f"block_{i}/{ours}/kernel"] = (f"encoder.layer.{i}.{theirs}.weight", "transpose")
            found[f"block_{i}/{ours}/bias"] = f"encoder.layer.{i}.{theirs}.bias"
        for ours, theirs in norms.items():
            found[f"block_{i}/{ours}/gamma"] = f"encoder.layer.{i}.{theirs}.weight"
            found[f"block_{i}/{ours}/beta"] = f"encoder.layer.{i}.{theirs}.bias"
    return found


def port_weights(model: keras.Model, weights: dict, state: dict[str, np.ndarray]) -> None:
    """Copy PyTorch's weights (numpy, by name) into the model, by the same map."""
    variables = {v.path: v for v in model.weights}
    for path, target in weights.items():
        name, transpose = (target, False) if isinstance(target, str) else (target[0], True)
        variables[path].assign(state[name].T if transpose else state[name])


def main() -> None:
    import tfparity
    from tfparity import load_pt, render

    reference = load_pt("tiny:bert")  # any Hugging Face PyTorch BERT works the same way
    state = reference.weights()  # its state_dict as numpy arrays, by PyTorch name
    model = build_bert(reference.config)
    port_weights(model, weight_map(reference.config), state)
    maps = {"layers": layer_map(reference.config), "weights": weight_map(reference.config)}

    (report,) = tfparity.crosscheck(tf=model, pt="tiny:bert", **maps)
    print(render(report))

    kernel = model.get_layer("block_1").ffn_up.kernel  # break layer 1's FFN
    kernel.assign(kernel * 1.1)
    (report,) = tfparity.crosscheck(tf=model, pt="tiny:bert", **maps)
    print()
    print(render(report))


if __name__ == "__main__":
    main()
