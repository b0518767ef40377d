"""A PyTorch reference given as an object (``pt=``): a :class:`~.pt_model.PTModel` or a
stored reference (as it is), a Hugging Face PyTorch model, or a ``torch.nn.Module`` of
the user's own, e.g. a Hugging Face body with a mean-pool and a ``Linear`` head.

A module of one's own is called as a model of one's own is on the TF side
(:mod:`..user.calls`): with the batch's tensors (``input_ids``, ``attention_mask``,
``token_type_ids`` where the config has token types, ``position_ids`` where the batch
has them), as int64 torch tensors, by keyword where its ``forward`` names them (or takes
``**kwargs``), else as one dict. It returns a tensor (the last hidden state) or a dict of
output names, its own or Hugging Face's; the outputs both sides name alike are compared.

Its config (vocabulary, positions, token types; the TF side of one's own takes it too)
is its ``config`` attribute, else the config of the first Hugging Face model inside it;
a module with neither is refused (exit 2): nothing would say what ids it takes. The
float64 referee runs a copy made with ``.double()``, under a float64 default dtype, as
for a Hugging Face reference.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import TfparityError
from ...inputs import Batch, available_inputs
from ...trace import Trace
from ..interfaces.sides import ReferenceBase
from ..runtime.imports import import_torch, import_transformers
from .pt_model import PTModel, default_dtype, evaluated

FLOAT32_IN_FLOAT64 = (
    "{name}'s float64 run (the referee: a copy made with .double()) returned {names} in "
    "a lower precision: its forward casts them (e.g. .float()), so the referee is only "
    "as exact as that cast. Cast to the input's dtype (.to(hidden.dtype)) instead."
)


def reference_object(pt: Any) -> ReferenceBase:
    """The reference ``pt`` names when it is an object (see the module's docstring);
    anything else is refused (exit 2), naming what it may be."""
    if isinstance(pt, ReferenceBase):  # a live model, stored outputs, a module of one's own
        return pt
    if isinstance(pt, import_transformers().PreTrainedModel):
        return PTModel(type(pt).__name__, evaluated(pt), pt.config)
    if isinstance(pt, import_torch().nn.Module):
        config, body = _config_of(pt)
        return OwnReference(
            f"{type(pt).__name__} (your own module)", evaluated(pt), config, body_path=body
        )
    raise TfparityError(
        f"pt={type(pt).__name__} is not a PyTorch reference: give a MODEL spec, a "
        "PTModel, a Hugging Face PyTorch model or a torch.nn.Module of your own."
    )


def reference_config(pt: Any) -> Any:
    """The Hugging Face config of the reference object ``pt`` (exit 2 without one)."""
    if isinstance(pt, ReferenceBase):
        return pt.config
    return reference_object(pt).config


def _config_of(module: Any) -> tuple[Any, str | None]:
    """``module``'s config and the path of the Hugging Face model it came from (None:
    its own ``config`` attribute); refused when it holds neither."""
    t = import_transformers()
    own = getattr(module, "config", None)
    if isinstance(own, t.PretrainedConfig):
        return own, None
    for path, inner in module.named_modules():
        if isinstance(inner, t.PreTrainedModel):
            return inner.config, path
    raise TfparityError(
        f"pt={type(module).__name__} is a torch module of your own with no Hugging Face "
        "model inside it and no `config` attribute: tfparity takes the config (vocabulary, "
        "positions, token types) from one, so nothing says which ids it takes. Build it "
        "around a Hugging Face model (e.g. BertModel), or set module.config to the "
        "transformers config of its body."
    )


@dataclass
class OwnReference(PTModel):
    """A ``torch.nn.Module`` of the user's own as the reference; ``body_path``: where
    the Hugging Face model inside it is (``"body"``; None: none is known)."""

    body_path: str | None = None

    def run(self, batch: Batch, *, float64: bool = False) -> Trace:
        """One call on the batch: its outputs by the names it gives (a tensor is the
        last hidden state, as on the TF side)."""
        torch = import_torch()
        model = self.fp64() if float64 else self.model
        inputs = self.torch_inputs(batch)
        run = " in float64 (a copy made with .double())" if float64 else ""
        with torch.no_grad(), default_dtype(torch.float64 if float64 else None):
            try:
                out = _call(model, inputs)
            except Exception as exc:
                shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in inputs.items())
                raise TfparityError(
                    f"{self.name} could not be called{run} with tfparity's inputs ({shapes}): "
                    f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                ) from exc
        trace = Trace.from_output(self._named(out))
        if float64:
            self._note_lowered(trace)
        return trace

    def _named(self, out: Any) -> dict[str, Any]:
        if isinstance(out, dict):  # a Hugging Face ModelOutput is one too
            return dict(out)
        if isinstance(out, (list, tuple)):
            raise TfparityError(
                f"{self.name} returned a {type(out).__name__}; return the last hidden "
                "state, or a dict of output names ({'last_hidden_state': ..., 'logits': "
                "...}), so each output is compared with the TF side's of the same name."
            )
        return {"last_hidden_state": out}

    def _note_lowered(self, trace: Trace) -> None:
        """Say so when the float64 run returned float32 tensors (the module casts)."""
        lowered = [k for k, v in trace.items() if v.dtype.kind == "f" and v.dtype != np.float64]
        note = FLOAT32_IN_FLOAT64.format(name=self.name, names=", ".join(lowered))
        if lowered and note not in self.notes:
            self.notes.append(note)

    def torch_inputs(self, batch: Batch) -> dict[str, Any]:
        """The TF side of one's own's inputs, as int64 torch tensors."""
        torch = import_torch()
        feed = available_inputs(batch, self.config)
        return {k: torch.from_numpy(np.asarray(v, np.int64)) for k, v in feed.items()}

    def recorded(
        self, batch: Batch, *, float64: bool = False, tapped: bool = False
    ) -> tuple[Trace, dict[str, np.ndarray]]:
        return self.run(batch, float64=float64), {}  # no sub-layer taps in a module of one's own

    def localisable(self) -> bool:
        return False

    def weights(self) -> dict[str, np.ndarray]:
        """Parameters by name; the Hugging Face body's named as in its base model
        (``encoder.layer.0...``, as a Hugging Face reference names them), so layer
        scopes and ``weights=`` maps find them; the module's own keep their names."""
        from .taps import pt_module_weights

        found = pt_module_weights(self.model)
        if self.body_path is None:
            return found
        return {self._body_name(k) or k: v for k, v in found.items()}

    def head_weight_names(self) -> list[str]:
        """The module's own parameters (outside its Hugging Face body): its head."""
        names = self.model.state_dict()
        return [k for k in names if self.body_path is None or self._body_name(k) is None]

    def _body_name(self, name: str) -> str | None:
        """``name`` as its Hugging Face body's base model names it; None outside it."""
        prefix = f"{self.body_path}." if self.body_path else ""
        if not name.startswith(prefix):
            return None
        inner = name.removeprefix(prefix)
        body = self.model.get_submodule(self.body_path) if self.body_path else self.model
        return (
            inner.removeprefix(body.base_model_prefix + ".")
            if body.base_model is not body
            else inner
        )

    @property
    def reference_kind(self) -> str:
        return "a torch module of your own"

    def gradients_refusal(self) -> str | None:
        return (
            f"{self.name} is a torch module of your own: the gradients check differentiates "
            "Hugging Face PyTorch models (give pt= a MODEL spec or a PreTrainedModel)."
        )

    # Refused by name (exit 2), as the base states them: a module of one's own has no
    # PyTorch generate and no encoder-decoder layout to call.
    gradients = ReferenceBase.gradients
    greedy = ReferenceBase.greedy
    step_logits = ReferenceBase.step_logits
    encoder = ReferenceBase.encoder
    decoder_states = ReferenceBase.decoder_states


def _call(model: Any, inputs: dict[str, Any]) -> Any:
    """``model`` called on ``inputs``: by keyword where ``forward`` names them (those it
    names; all of them where it takes ``**kwargs``), else as one dict, as a TF callable
    of one's own is."""
    params = inspect.signature(model.forward).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return model(**inputs)
    named = {p.name for p in params}
    if named & set(inputs):
        return model(**{k: v for k, v in inputs.items() if k in named})
    return model(inputs)
