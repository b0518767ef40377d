"""A head model of one's own on both sides: a Hugging Face BERT body, a mean-pool and a
dense classifier, as a tf-keras functional model and as a ``torch.nn.Module``; the
example of docs/your-own-model.md ("Head models of your own"), run by its tests
(tests/adapters/reference/test_user_reference.py).

    python -m tfparity.examples.own_head

builds both for ``tiny:bert`` (TF body and PyTorch body with the same weights; the
PyTorch classifier takes the Keras one's), cross-checks them on the outputs both name
(``last_hidden_state``, ``logits``), then scales the Keras classifier's kernel by 1.01
and cross-checks again: FAIL on ``logits``, the weight named by ``WEIGHTS``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

LABELS = 3
# The Keras head's variables -> the PyTorch module's parameters: the hints name them.
WEIGHTS = {
    "classifier/kernel": ("classifier.weight", "transpose"),
    "classifier/bias": "classifier.bias",
}


def tf_head_model(body: Any, labels: int = LABELS) -> Any:
    """A tf-keras functional model: ``body`` (a ``TFBertModel``), the mean of its last
    hidden state over the unmasked tokens, a Dense classifier; it returns both."""
    import tensorflow as tf
    import tf_keras

    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = {n: tf_keras.Input((None,), dtype="int32", name=n) for n in names}
    hidden = body(**inputs).last_hidden_state
    mask = tf.cast(inputs["attention_mask"], hidden.dtype)[:, :, None]
    pooled = tf.reduce_sum(hidden * mask, 1) / tf.reduce_sum(mask, 1)
    seeded = tf_keras.initializers.GlorotUniform(seed=0)  # the same head on every run
    logits = tf_keras.layers.Dense(labels, kernel_initializer=seeded, name="classifier")(pooled)
    return tf_keras.Model(
        inputs, {"last_hidden_state": hidden, "logits": logits}, name="my_tf_head"
    )


def pt_head_module(body: Any, labels: int = LABELS) -> Any:
    """The same head in PyTorch around ``body`` (a ``BertModel``)."""
    import torch

    class MeanPoolClassifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = body
            self.classifier = torch.nn.Linear(body.config.hidden_size, labels)

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            hidden = self.body(input_ids, attention_mask, token_type_ids).last_hidden_state
            mask = attention_mask[:, :, None].to(hidden.dtype)  # float64 in the referee's run
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            return {"last_hidden_state": hidden, "logits": self.classifier(pooled)}

    return MeanPoolClassifier()


def copy_classifier(tf_model: Any, pt_module: Any) -> None:
    """The Keras classifier's weights into the PyTorch one (a kernel is ``[in, out]``
    in Keras, ``[out, in]`` in PyTorch)."""
    import torch

    kernel, bias = tf_model.get_layer("classifier").get_weights()
    with torch.no_grad():
        pt_module.classifier.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
        pt_module.classifier.bias.copy_(torch.from_numpy(bias))


def main() -> None:
    import tfparity
    from tfparity import TFModel, load_pt, render

    # Your TFBertModel and BertModel (from_pretrained(dir, from_pt=True) and
    # from_pretrained(dir)); here tiny:bert's, the same weights in both.
    tf_body = TFModel.load("tiny:bert")
    tf_model = tf_head_model(tf_body.model)
    pt_module = pt_head_module(load_pt("tiny:bert").model)
    copy_classifier(tf_model, pt_module)
    # The TF side takes the tokenizer it is given (the module holds none).
    side = tfparity.user_model(tf_model, weights=WEIGHTS, tokenizer=tf_body.tokenizer)

    (report,) = tfparity.crosscheck(tf=side, pt=pt_module)
    print(render(report))

    kernel = tf_model.get_layer("classifier").kernel  # break the Keras head
    kernel.assign(kernel * 1.01)
    (report,) = tfparity.crosscheck(tf=side, pt=pt_module)
    print()
    print(render(report))


if __name__ == "__main__":
    main()
