"""A float LiteRT flatbuffer as the reference: the quantised flatbuffer converted from
the same model is judged against it, ai-edge-quantizer's comparison (``validate()``:
float .tflite against quantised .tflite, per tensor) with a verdict added.

The reference runs under the same interpreter and takes its config and tokenizer from
the side under test's companion (``--source``, the model both came from). Both
flatbuffers must take the same inputs and return the same outputs, else there is no
comparison to make (exit 2). Hidden states are matched as the side's are: from the
signature or from the intermediate tensors located by their TF names
(:meth:`.litert_graph.Graph.located`), so every hidden state both graphs expose is
compared. A flatbuffer has no float64 form: the quantised side is judged by its mode's
budget (:mod:`tfparity.compare.budgets`), and a float32 side needs ``--budget``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import TfparityError
from ...inputs import Batch
from ...trace import Trace
from ..interfaces.sides import ReferenceBase, TFSide
from ..sources.holdings import Holdings
from ..sources.specs import ModelSpec
from .litert import LiteRTModel, load_litert


@dataclass
class LiteRTReference(ReferenceBase):
    """The float flatbuffer ``side`` as the expected side of a cross-check."""

    name: str
    side: LiteRTModel
    notes: list[str] = field(default_factory=list)
    holdings: Holdings | None = None  # a flatbuffer holds every weight it computes with
    config_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def reference_kind(self) -> str:
        return "a LiteRT flatbuffer (the float model a quantised one is judged against)"

    @property
    def framework(self) -> str:
        return f"LiteRT {self.side.quantisation or 'float32'}"

    @property
    def config(self) -> Any:
        return self.side.config

    def run(self, batch: Batch, *, float64: bool = False) -> Trace:
        if float64:
            raise TfparityError(
                f"{self.name} is a LiteRT flatbuffer, with no float64 form for the referee "
                "to judge by: a float32 flatbuffer checked against it needs --budget "
                "(a quantised one is judged by its mode's budget)."
            )
        return self.side.run(batch)


def litert_reference(spec: ModelSpec, tf_model: TFSide) -> LiteRTReference:
    """The flatbuffer ``spec`` names as the reference of the LiteRT side ``tf_model``,
    with its companion's config and tokenizer; exit 2 for a side that is not a LiteRT
    flatbuffer or for two flatbuffers without the same inputs and outputs."""
    from ..sources.checkpoints import resolve

    if not isinstance(tf_model, LiteRTModel):
        raise TfparityError(
            f"A LiteRT flatbuffer ({spec.text}) is the reference only of another LiteRT "
            f"flatbuffer (a quantised one converted from the same model); {tf_model.name} "
            "is not one: give --pt a MODEL spec of the PyTorch checkpoint."
        )
    companion = tf_model.spec.inner if tf_model.spec is not None else None
    if companion is None:
        raise TfparityError(
            f"{spec.text} holds no config or tokenizer: name the model both flatbuffers "
            "came from (--source MODEL)."
        )
    side = load_litert(spec, resolve(companion, spec.text), None, tf_model.named_head)
    _refuse_unshared(side, tf_model)
    return LiteRTReference(name=f"LiteRT {spec.text}", side=side, notes=list(side.notes))


def _refuse_unshared(expected: LiteRTModel, actual: LiteRTModel) -> None:
    """Exit 2 unless both signatures take the same inputs and return the same outputs."""
    inputs = (sorted(expected.runner.inputs), sorted(actual.runner.inputs))
    outputs = (sorted(expected.runner.output_names()), sorted(actual.runner.output_names()))
    if inputs[0] == inputs[1] and outputs[0] == outputs[1]:
        return
    raise TfparityError(
        f"{expected.name} and {actual.name} do not share their inputs and outputs "
        f"(inputs {inputs[0]} vs {inputs[1]}; outputs {outputs[0]} vs {outputs[1]}): a "
        "quantised flatbuffer is compared with the float one converted from the same "
        "model with the same signature."
    )
