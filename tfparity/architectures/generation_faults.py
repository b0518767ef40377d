"""Faults that live only in cached decoding: a port whose forward pass is right and
whose generation is not (position offsets in cached steps, a corrupt KV cache).

A forward pass never runs them: the cross-check passes such a port, and only
generation's cache consistency (``tfparity generate``) catches it, naming the first
cached step that differs from a recomputation without cache. Like the weight faults of
:mod:`.faults`, they act by duck typing on the Hugging Face TF model (its
``prepare_inputs_for_generation``, which HF TF ``generate`` calls before every step), so
nothing here imports a framework. The faults that change greedy tokens through the
forward pass are the cross-check's own (:func:`tfparity.testing.ffn_fault`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class CacheFault:
    """``apply(model)`` breaks a TFModel's cached decoding in place and returns it;
    ``first_step``: the first generated step it must be seen at (step 0 runs on the
    prompt without a cache, so a cache fault shows from step 1)."""

    name: str
    apply: Callable[[Any], Any]
    first_step: int = 1


def _on_cached_steps(change: Callable[[dict], None]) -> Callable[[Any], Any]:
    """A fault that edits the inputs HF TF ``generate`` prepares for each cached step."""

    def apply(model: Any) -> Any:
        hf = model.model
        prepare = hf.prepare_inputs_for_generation

        def broken(*args: Any, **kwargs: Any) -> dict:
            inputs = prepare(*args, **kwargs)
            if inputs.get("past_key_values") is not None:
                change(inputs)
            return inputs

        hf.prepare_inputs_for_generation = broken
        return model

    return apply


def _shift_positions(inputs: dict) -> None:
    if inputs.get("position_ids") is None:  # OPT, Mistral: positions come from the mask
        raise ValueError("this model's generate passes no position_ids to shift")
    inputs["position_ids"] = inputs["position_ids"] + 1


def _scaled(past: Any, factor: float) -> Any:
    """Every tensor of a nested KV cache (tuples of tensors) times ``factor``."""
    if isinstance(past, (tuple, list)):
        return type(past)(_scaled(p, factor) for p in past)
    return past * factor


def _corrupt_cache(inputs: dict) -> None:
    inputs["past_key_values"] = _scaled(inputs["past_key_values"], 1.05)


CACHED_POSITIONS_SHIFTED = CacheFault(
    name="cached steps' position ids shifted by one",
    apply=_on_cached_steps(_shift_positions),
)
CACHE_SCALED = CacheFault(
    name="KV cache scaled by 1.05 before each cached step",
    apply=_on_cached_steps(_corrupt_cache),
)

# The position fault needs a family whose generate passes position_ids (GPT-2, GPT-SW3).
CACHE_FAULTS = (CACHED_POSITIONS_SHIFTED, CACHE_SCALED)
