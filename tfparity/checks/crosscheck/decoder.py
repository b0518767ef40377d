"""Where a seq2seq decoder first parts, teacher-forced, with the weights of its first
layer that fails compared with PyTorch's: for ``tfparity generate``'s localisation past a
clean encoder (the decoder run on the start token and PyTorch's tokens, each hidden state
judged by the float64 referee here), and for ``tfparity crosscheck`` on a seq2seq LM (its
``decoder_hidden_states[k]`` already judged among the cross-check's tensors). It sits
with the cross-check, which generation builds on: ``checks/generation`` imports
``checks/crosscheck``, never the reverse."""

from __future__ import annotations

from ...adapters.interfaces.sides import ForwardPass, Reference, TFSide
from ...compare import Comparison, Referee
from ...results import Divergence
from ...trace import EMBEDDINGS, decoder_state_index, layer_of, layer_text
from . import hints


def decoder_divergence(
    one: ForwardPass, tf_model: TFSide, pt_model: Reference, where: str, referee: Referee
) -> Divergence | None:
    """The decoder's first hidden state beyond the referee, with its layer's weight
    differences; None where every hidden state passes (the LM head is what is left)."""
    if one.beyond_states is None:
        return None
    for k, (tf, pt, pt64) in enumerate(one.beyond_states()):
        judged = referee.batches(f"decoder_hidden_states[{k}]", [tf], [pt], [pt64])
        if judged.passed:
            continue
        lead = f"{where}; the cross-check of {one.covers} passes; teacher-forced, "
        evidence = f"RMSE {judged.actual_rmse:.3g} over {judged.allowed_rmse:.3g} allowed"
        return decoder_layer_divergence(k, evidence, tf_model, pt_model, lead)
    return None


def failing_decoder_state(
    comparisons: list[Comparison], tf_model: TFSide, pt_model: Reference
) -> Divergence | None:
    """The cross-check's first failing ``decoder_hidden_states[k]`` (a seq2seq LM's
    decoder, teacher-forced), localised to its decoder layer; None where none fails."""
    failing = [c for c in comparisons if not c.passed and decoder_state_index(c.name) is not None]
    if not failing:
        return None
    first = min(failing, key=lambda c: decoder_state_index(c.name))
    return decoder_layer_divergence(
        decoder_state_index(first.name),
        _evidence(first),
        tf_model,
        pt_model,
        "every hidden state of the encoder passes; teacher-forced, ",
    )


def decoder_layer_divergence(
    k: int, evidence: str, tf_model: TFSide, pt_model: Reference, lead: str
) -> Divergence:
    """The decoder's hidden state ``k`` as the first divergence (``lead``: what came
    before it, ``evidence``: by how much it fails), with its layer's weight hints."""
    part = layer_text(k, "its embeddings", "decoder layer")
    found = (
        f"{lead}the decoder's hidden state {k} ({part}'s output) is the first beyond "
        f"the float64 referee: {evidence}"
    )
    layer = layer_of(k)
    weights = [] if layer == EMBEDDINGS else _layer_weights(tf_model, pt_model, layer)
    text = "; ".join([found, *weights]) if weights else found
    return Divergence(None, "decoder", None, text, decoder_hidden_state=k)


def _evidence(c: Comparison) -> str:
    """By how much a failing comparison fails: the referee's RMSEs, else its largest
    difference (judged by a tolerance)."""
    if c.referee:
        return f"RMSE {c.referee['actual_rmse']:.3g} over {c.referee['allowed_rmse']:.3g} allowed"
    return f"max abs diff {c.max_abs_diff:.3g} (atol {c.atol:g}, rtol {c.rtol:g})"


def _layer_weights(tf_model: TFSide, pt_model: Reference, layer: int) -> list[str]:
    """The weights of decoder layer ``layer`` that differ from PyTorch's, described (by
    the architecture's name prefix for that layer, :attr:`Architecture.decoder_layer`)."""
    template = tf_model.architecture.decoder_layer
    if template is None:
        return []
    pt_weights = pt_model.weights()
    tf_weights = tf_model.weight_map().weights_for(pt_weights)
    prefix = template.format(layer=layer)
    return [h.text for h in hints.weight_differences(tf_weights, pt_weights, prefix)]
