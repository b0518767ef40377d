"""The generation check's options (``tfparity generate``, :func:`tfparity.generate`),
checked once for both by :meth:`GenerationOptions.from_arguments` (numpy only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ... import validation
from ...compare import Referee
from ...compare.bootstrap import Limit, parse_limits
from ...errors import TfparityError
from .quantised import QuantisedGeneration

DEFAULT_NEW_TOKENS = 32


@dataclass(frozen=True)
class GenerationOptions:
    """``new_tokens`` greedy steps per prompt; ``embeds``: also generate from gathered
    ``inputs_embeds`` on the TF side; ``localise``: cross-check the teacher-forced
    sequence where tokens part by a defect, to name the layer."""

    new_tokens: int = DEFAULT_NEW_TOKENS
    referee: Referee = Referee()
    embeds: bool = True
    localise: bool = True
    # Limits on the teacher-forced steps' distribution metrics (``--kl-budget``), judged
    # by a bootstrap interval over prompts; None: reported only.
    kl_budget: Sequence[Limit] | None = None
    # ``generate --quantize``: the TF side is a quantised copy, judged by its mode's
    # budget on the steps' distribution instead of the referee per step (.quantised)
    quantised: QuantisedGeneration | None = None

    @classmethod
    def from_arguments(
        cls,
        *,
        new_tokens: int | None = None,
        embeds: bool = True,
        kl_budget: str | None = None,
        quantize: str | None = None,
        backend: str | None = None,
    ) -> GenerationOptions:
        """The options :func:`tfparity.generate` and ``tfparity generate`` were given,
        checked once for both before any framework import (exit 2 for a bad one):
        ``new_tokens`` (None: :data:`DEFAULT_NEW_TOKENS`), ``kl_budget`` parsed, a
        ``quantize`` mode known here and not sent to another ``backend``'s process."""
        new_tokens = DEFAULT_NEW_TOKENS if new_tokens is None else new_tokens
        check_new_tokens(new_tokens)
        validation.instance(embeds, bool, "embeds", "a bool")
        limits = parse_limits(kl_budget) if kl_budget is not None else None
        quantised = None
        if quantize is not None:
            from ...adapters.tf_common.quantize import check_request

            check_request(quantize)
            if backend not in (None, "tensorflow"):
                raise TfparityError(
                    f"quantize={quantize} (--quantize) quantises the keras-hub causal LM in "
                    f"this process, on TensorFlow; with backend={backend} (--backend) it runs "
                    "in a process of its own, where it is not quantised: drop one of the two."
                )
            quantised = QuantisedGeneration.of(quantize, limits)
        return cls(new_tokens=new_tokens, embeds=embeds, kl_budget=limits, quantised=quantised)


def check_new_tokens(new_tokens: int, name: str = "new_tokens") -> None:
    """A usage error (exit 2) for a step count that is not a positive int; ``name``: how
    the caller's user gave it (``--generate`` in the sweep)."""
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1:
        raise TfparityError(f"{name} must be an int >= 1 (got {new_tokens!r}).")
