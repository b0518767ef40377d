"""Where a seq2seq decoder first parts, for ``tfparity generate``'s localisation past a
clean encoder: the decoder run teacher-forced on both sides (the start token and
PyTorch's tokens), each of its hidden states judged by the float64 referee, and the
weights of the first layer that fails compared with PyTorch's."""

from __future__ import annotations

from ..adapters.interfaces import ForwardPass, Reference, TFSide
from ..compare import Referee, referee_batches
from ..results import Divergence
from . import hints


def decoder_divergence(
    one: ForwardPass, tf_model: TFSide, pt_model: Reference, where: str, referee: Referee
) -> Divergence | None:
    """The decoder's first hidden state beyond the referee, with its layer's weight
    differences; None where every hidden state passes (the LM head is what is left)."""
    if one.beyond_states is None:
        return None
    for k, (tf, pt, pt64) in enumerate(one.beyond_states()):
        judged = referee_batches(f"decoder_hidden_states[{k}]", [tf], [pt], [pt64], referee=referee)
        if judged.passed:
            continue
        part = "its embeddings" if k == 0 else f"decoder layer {k - 1}"
        found = (
            f"{where}; the cross-check of {one.covers} passes; teacher-forced, the decoder's "
            f"hidden state {k} ({part}'s output) is the first beyond the float64 referee: "
            f"RMSE {judged.actual_rmse:.3g} over {judged.allowed_rmse:.3g} allowed"
        )
        weights = _layer_weights(tf_model, pt_model, k - 1) if k > 0 else []
        text = "; ".join([found, *weights]) if weights else found
        return Divergence(None, "decoder", None, text)
    return None


def _layer_weights(tf_model: TFSide, pt_model: Reference, layer: int) -> list[str]:
    """The weights of decoder layer ``layer`` that differ from PyTorch's, described (by
    the architecture's name prefix for that layer, :attr:`Architecture.decoder_layer`)."""
    template = tf_model.architecture.decoder_layer
    if template is None:
        return []
    pt_weights = pt_model.weights()
    tf_weights = tf_model.weights_for(pt_weights)
    prefix = template.format(layer=layer)
    return [h.text for h in hints.weight_differences(tf_weights, pt_weights, prefix)]
