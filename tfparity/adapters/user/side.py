"""A model of the user's own as the TF side: a plain Python callable, or a Keras 3 or
tf-keras model (functional or subclassed), checked against a PyTorch reference.

Such a model carries no Hugging Face config or tokenizer: both come from the reference
it is checked against (``pt=``), which is therefore required. How it is called, and its
layers recorded, is :mod:`.calls`. The maps of :mod:`.maps` add what a
registered architecture knows: ``layers=`` gives hidden states, so a divergence is
localised to a layer; ``weights=`` gives the weight hints their names.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...architectures.heads import Head, head_of_config, parse_head
from ...errors import TfparityError
from ...inputs import Batch, Limits, available_inputs
from ...trace import Trace, hidden_state_index
from ..interfaces.sides import TFSideBase, config_limits
from ..reference.own import reference_config
from ..runtime.execution_options import ExecutionOptions, eager_only
from ..sources.checkpoints import resolve
from ..sources.specs import ModelSpec
from ..tf_common.quantize import stored_kind
from .calls import (
    CALLABLE,
    Callee,
    LayerRecording,
    keras_kind,
)
from .maps import (
    EntryMap,
    LayerEntry,
    WeightEntry,
    check_range,
    layer_entries,
    unknown,
    weight_entries,
)
from .wrapped import WrappedNames, wrapped_names

NO_LAYER_MAP = (
    "No layer map was given (layers=): only the model's outputs are compared, so a "
    "divergence is reported at the output, not localised to a layer. Map your layers to "
    "Hugging Face hidden states (layers={'embeddings_ln': 0, 'block_0': 1, ...}) to "
    "localise it."
)
NO_WEIGHT_MAP = (
    "No weights map was given (weights=): weight hints cannot name a weight. Map your "
    "variables to Hugging Face weight names (weights={'block_0/ffn_up/kernel': "
    "('encoder.layer.0.intermediate.dense.weight', 'transpose'), ...}) to have them."
)


@dataclass
class UserModel(TFSideBase):
    """A user's model, with the config and tokenizer of the reference it is bound to
    (:meth:`bound`); ``layers``/``mapped_weights``: the maps of :mod:`.maps`."""

    name: str
    model: Any
    kind: str
    layers: tuple[LayerEntry, ...] = ()
    mapped_weights: tuple[WeightEntry, ...] = ()  # weights=
    config: Any = None  # the reference's Hugging Face config, once bound
    tokenizer: Any | None = None
    reference: str | None = None  # the spec it was bound to (None: an object, or unbound)
    chosen_head: Head | None = None
    source: str = "in memory"
    notes: list[str] = field(default_factory=list)
    holdings: None = None  # what its weights hold is not known
    execution: ExecutionOptions = field(default_factory=ExecutionOptions)
    # None: held in memory, the reference is never its own; a .keras file: its export
    # spec, whose companion (``inner``) is the reference
    spec: ModelSpec | None = None
    # The output names its last run produced (the reference is compared on these).
    produced: set[str] = field(default_factory=set)
    # Without weights=: the names of the HF TF model it wraps (:mod:`.wrapped`).
    wrapped: WrappedNames | None = None

    # ------------------------------------------------------------------ binding

    def bound(self, pt: Any) -> UserModel:
        """This model with the config and tokenizer of its reference ``pt`` (a MODEL
        spec, or a reference object's config); the maps checked against both."""
        if pt is None:
            if self.config is None:
                raise TfparityError(
                    f"{self.name} is a {self.kind} of your own: it takes its Hugging Face "
                    "config and tokenizer from the PyTorch reference it is checked "
                    "against. Pass pt=<MODEL spec> (e.g. crosscheck(tf=model, "
                    "pt='tiny:bert')); check_embeds and the other checks are for Hugging "
                    "Face and keras-hub models."
                )
            return self
        if isinstance(pt, str) and pt == self.reference:
            return self
        if isinstance(pt, str):
            found = resolve(pt, self.name)
            config, tokenizer, head = found.config, found.tokenizer, found.head
        else:  # a reference object: a PTModel, an HF model, a torch module of one's own
            config, tokenizer, head = reference_config(pt), None, None
        label = pt if isinstance(pt, str) else type(pt).__name__
        check_range(self.layers, _layer_count(config), label)
        side = replace(
            self,
            config=config,
            tokenizer=tokenizer if self.tokenizer is None else self.tokenizer,
            reference=pt if isinstance(pt, str) else None,
            chosen_head=self.chosen_head if self.chosen_head is not None else head,
            source=f"a {self.kind} of your own, with the config and tokenizer of {label}",
            produced=set(),
        )
        side.wrapped = side.wrapped or wrapped_names(side.model, side.kind)
        side.notes = side.map_notes()
        return side

    def map_notes(self) -> list[str]:
        """What the maps leave out: no layer map, a partial one, no weight map."""
        notes = []
        count = _layer_count(self.config)
        if not self.layers:
            notes.append(NO_LAYER_MAP)
        elif count is not None and len(self.layers) < count + 1:
            mapped = ", ".join(str(e.hidden_state) for e in self.layers)
            notes.append(
                f"layers= maps hidden states {mapped} of 0..{count}: those are compared, and "
                "a divergence is localised to the first mapped one that parts (an earlier "
                "unmapped layer may be where it starts)."
            )
        if not self.mapped_weights:
            notes.append(NO_WEIGHT_MAP if self.wrapped is None else self.wrapped.note())
        return notes

    def _late_wrapped_names(self) -> None:
        """Names derived again once a run has built variables (a wrapper's head is built
        by its first call): the weight note says what is named then."""
        if self.mapped_weights or self.kind == CALLABLE:
            return
        counted = self.wrapped.counted if self.wrapped is not None else 0
        if len(self.model.weights) == counted:
            return
        old = NO_WEIGHT_MAP if self.wrapped is None else self.wrapped.note()
        self.wrapped = wrapped_names(self.model, self.kind)
        if self.wrapped is not None and old in self.notes:
            self.notes[self.notes.index(old)] = self.wrapped.note()

    # ------------------------------------------------------------------ facts

    @property
    def side_kind(self) -> str:
        return f"a {self.kind} of your own"

    @property
    def head(self) -> Head:
        """The model class its reference loads: the one asked for, else its config's."""
        if self.chosen_head is not None:
            return self.chosen_head
        return head_of_config(getattr(self.config, "architectures", None))

    @property
    def quantisation(self) -> str | None:
        """``keras int8`` (etc.) for a Keras 3 model Keras quantised (``model.quantize``,
        or a ``.keras`` file saved after it): judged by that mode's budgets, as a
        keras-hub model is; None for any other model."""
        return stored_kind(self.model)

    @property
    def headless_reason(self) -> str | None:
        if self.head in (Head.MASKED_LM, Head.CAUSAL_LM):
            return None
        return (
            f"{self.name} is a model of your own with no LM head, so top-1 token "
            "agreement is not measured"
        )

    @property
    def limits(self) -> Limits:
        """The reference config's limits: ids past them would be gathered silently. An
        unbound model has none and is refused by name (exit 2), before any run."""
        self.bound(None)
        return config_limits(self.config)

    def named_weights(self) -> list[tuple[str, Any]]:
        return list(self.callee.variables().items())

    def word_embeddings(self) -> Any:
        raise TfparityError(
            f"{self.name} is a model of your own: tfparity does not know its word "
            "embeddings, so only the cross-check runs on it (crosscheck(tf=..., pt=...))."
        )

    def gather(self, input_ids: np.ndarray) -> Any:
        return self.word_embeddings()

    def _run_gathered(self, batch: Batch) -> Trace:
        return self.word_embeddings()

    def executed(self, options: ExecutionOptions) -> UserModel:
        runs = eager_only(options, "models of your own")
        return self if runs == self.execution else replace(self, execution=runs)

    def eager(self) -> UserModel:
        return self

    # ------------------------------------------------------------------ runs

    @property
    def inputs_embeds_reason(self) -> str | None:
        return f"{self.name} is a model of your own: it has no inputs_embeds path."

    def _run(self, batch: Batch, inputs_embeds: Any) -> Trace:
        """One run on the batch: its outputs, and the mapped layers' outputs as
        ``hidden_states[k]``."""
        if inputs_embeds is not None:
            raise TfparityError(self.inputs_embeds_reason)
        callee = self.callee
        with LayerRecording(callee.layer_objects(self.layers)) as recording:
            out = callee.call(callee.feed(available_inputs(batch, self.config)))
        arrays = {**callee.outputs(out, self.layers), **recording.hidden_states()}
        self._variables_of_map()  # a mistyped variable path is exit 2 on the first run
        self._late_wrapped_names()
        trace = Trace.from_output(arrays)
        self.produced = set(trace)
        return trace

    @property
    def callee(self) -> Callee:
        return Callee(self.model, self.kind, self.name)

    def _variables_of_map(self) -> dict[str, Any]:
        """The model's variables, every path ``weights=`` names among them (else exit 2)."""
        if not self.mapped_weights:
            return {}
        if self.kind == CALLABLE:
            raise TfparityError(
                "weights= maps Keras variables, and a plain callable has none: pass the "
                "Keras model itself, or leave weights= out."
            )
        variables = self.callee.variables()
        for entry in self.mapped_weights:
            if entry.path not in variables:
                raise unknown("the variable", entry.path, list(variables), "weights=")
        return variables

    # ------------------------------------------------------------------ hints

    def output_names(self, reference: Any) -> set[str] | None:
        """The reference's tensors its runs produce a counterpart of (the same name):
        the mapped hidden states and the outputs both name. The outputs either side
        has alone are named in a note; none shared is exit 2, naming both sides'
        outputs (a check that compared nothing must not pass)."""
        if not self.produced:
            return None
        names = set(reference)
        shared = self.produced & names
        if not shared:
            raise TfparityError(
                f"None of {self.name}'s outputs ({_listed(self.produced)}) has a "
                f"counterpart of the same name in the PyTorch reference ({_listed(names)}): "
                "nothing would be compared. Return the outputs under the reference's names "
                "(e.g. 'last_hidden_state'), or check against a reference that returns yours."
            )
        self.notes = [n for n in self.notes if not n.startswith(UNSHARED)] + _unshared_notes(
            self.produced - names, names - self.produced
        )
        return shared

    def outputs_compared(self, trace: Trace, reference: Trace) -> Trace:
        """Its outputs the reference has too; its own others are in a note."""
        return Trace({k: v for k, v in trace.items() if k in reference})

    def weight_map(self) -> EntryMap:
        """Its weights by the entries naming them: ``weights=``, else the names of the
        HF TF model it wraps (:class:`.maps.EntryMap`)."""
        if self.mapped_weights or self.wrapped is None:
            return EntryMap(self.mapped_weights, True, self._variables_of_map)
        return EntryMap(self.wrapped.entries, False, self.callee.variables)


UNSHARED = ("Model outputs not compared", "Reference outputs not compared")


def _unshared_notes(model_only: set[str], reference_only: set[str]) -> list[str]:
    """The outputs one side has and the other lacks; the reference's hidden states are
    left out (the layer map's note says which are compared)."""
    reference_only = {n for n in reference_only if hidden_state_index(n) is None}
    notes = []
    if model_only:
        notes.append(f"{UNSHARED[0]} (no counterpart): {', '.join(sorted(model_only))}.")
    if reference_only:
        notes.append(
            f"{UNSHARED[1]} (no counterpart in your model): {', '.join(sorted(reference_only))}."
        )
    return notes


def _listed(names: set[str]) -> str:
    """Output names for a message, a run of hidden states as ``hidden_states[0..k]``."""
    hidden = sorted(i for i in map(hidden_state_index, names) if i is not None)
    rest = sorted(n for n in names if hidden_state_index(n) is None)
    if len(hidden) > 1:
        rest.append(f"hidden_states[{hidden[0]}..{hidden[-1]}]")
    elif hidden:
        rest.append(f"hidden_states[{hidden[0]}]")
    return ", ".join(rest)


def _head(head: Head | str | None) -> Head | None:
    """``head`` as a Head (a kind's name, e.g. ``"sequence-classification"``)."""
    if head is None or isinstance(head, Head):
        return head
    try:
        return parse_head(head)
    except ValueError as exc:
        raise TfparityError(str(exc)) from None


def _label(model: Any, kind: str) -> str:
    """A Keras model's own name; a function's name; else its class's."""
    if kind != CALLABLE:
        return str(model.name)
    if isinstance(model, (types.FunctionType, types.MethodType)):
        return model.__name__
    return type(model).__name__


def _layer_count(config: Any) -> int | None:
    return getattr(config, "num_hidden_layers", None)


def user_model(
    model: Any,
    *,
    layers: dict[Any, int] | None = None,
    weights: dict[str, Any] | None = None,
    name: str | None = None,
    tokenizer: Any = None,
    head: Head | str | None = None,
) -> UserModel:
    """A model of your own as a TF side (a callable, a Keras 3 or a tf-keras model),
    unbound: the cross-check binds it to its reference (``crosscheck(tf=side,
    pt=...)``). ``layers``: layer name (or the layer) -> Hugging Face hidden state
    index; ``weights``: Keras variable path -> PyTorch weight name, or ``(name,
    "transpose" | function)`` (:mod:`tfparity.adapters.user.maps`). ``head`` names the
    reference's model class (default: its config's). A layer name the model lacks is
    refused here (exit 2); hidden-state indices once the reference is known."""
    kind = keras_kind(model) or (CALLABLE if callable(model) else None)
    if kind is None:
        raise TfparityError(
            f"{type(model).__name__} is neither a MODEL spec, a Keras model nor a callable: "
            "tfparity cannot run it."
        )
    side = UserModel(
        name=name or _label(model, kind),
        model=model,
        kind=kind,
        layers=layer_entries(layers),
        mapped_weights=weight_entries(weights),
        tokenizer=tokenizer,
        chosen_head=_head(head),
    )
    side.callee.layer_objects(side.layers)  # unknown layer names: exit 2 now, not mid-check
    if side.mapped_weights and (kind == CALLABLE or side.model.weights):
        side._variables_of_map()  # built: its variable paths are known now
    return side
