"""Write a Hugging Face TF model as a SavedModel with serving signatures, the way a
user ships one (``tf.saved_model.save`` with a ``tf.function`` over named inputs), so
tests, docs and the LiteRT converter have real exports to check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..runtime.imports import import_tf

EMBEDS_SIGNATURE = "embeds"


def export_saved_model(
    tf_model: Any,
    directory: str | Path,
    *,
    hidden_states: bool = True,
    inputs_embeds: bool = False,
    mask: bool = True,
    unmasked: str | None = None,
) -> Path:
    """Save ``tf_model`` (a :class:`~tfparity.adapters.hf_tf.tf_model.TFModel`, faults applied
    or not) to ``directory`` with a ``serving_default`` signature over ``input_ids``,
    ``attention_mask`` (without ``mask``: none, as servers that take ``input_ids`` alone
    are written) and ``token_type_ids`` where the model has a token-type table,
    returning its outputs by Hugging Face's names, and ``hidden_states_<k>`` with
    ``hidden_states``; with ``inputs_embeds``, a second signature ``embeds`` over
    ``inputs_embeds`` instead of ``input_ids``; ``unmasked``: the name of one more
    signature over ``input_ids`` without an attention mask (an export with two to choose
    from). Returns the directory."""
    tf = import_tf()
    model = tf_model.model
    with_types = bool(getattr(tf_model.config, "type_vocab_size", 0))
    width = int(tf_model.word_matrix().shape[-1])

    def outputs(out: Any) -> dict[str, Any]:
        found = {k: v for k, v in out.items() if k in ("last_hidden_state", "pooler_output")}
        found.update({k: v for k, v in out.items() if k.endswith("logits")})
        if hidden_states:
            found.update({f"hidden_states_{k}": h for k, h in enumerate(out["hidden_states"])})
        return found

    def spec(first: str, masked: bool = True) -> dict[str, Any]:
        shape, dtype = (
            ([None, None, width], tf.float32)
            if first == "inputs_embeds"
            else (
                [None, None],
                tf.int32,
            )
        )
        found = {first: tf.TensorSpec(shape, dtype, name=first)}
        names = (["attention_mask"] if masked else []) + (["token_type_ids"] if with_types else [])
        found.update({n: tf.TensorSpec([None, None], tf.int32, name=n) for n in names})
        return found

    def ids_signature(masked: bool) -> Any:
        @tf.function(input_signature=[spec("input_ids", masked)])
        def serve(inputs: dict[str, Any]) -> dict[str, Any]:
            return outputs(model(**inputs, output_hidden_states=True, training=False))

        return serve

    signatures = {"serving_default": ids_signature(mask)}
    if unmasked is not None:
        signatures[unmasked] = ids_signature(False)
    if inputs_embeds:

        @tf.function(input_signature=[spec("inputs_embeds")])
        def serve_embeds(inputs: dict[str, Any]) -> dict[str, Any]:
            rest = {k: v for k, v in inputs.items() if k != "inputs_embeds"}
            out = model(
                None,
                inputs_embeds=inputs["inputs_embeds"],
                output_hidden_states=True,
                training=False,
                **rest,
            )
            return outputs(out)

        signatures[EMBEDS_SIGNATURE] = serve_embeds
    path = Path(directory)
    tf.saved_model.save(model, str(path), signatures=signatures)
    return path
