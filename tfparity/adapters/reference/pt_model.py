"""The PyTorch side of the cross-check: the same weights in a PyTorch model.

Weights come either from a PyTorch checkpoint directory (safetensors; pickles only
when allowed, read with ``weights_only=True``) or from a TF model in memory. The
TF->PT direction builds the PyTorch model from the config and assigns the TF
weights: ``from_pretrained(..., from_tf=True)`` leaves parameters on the ``meta``
device with torch 2.13 (docs/design.md).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...architectures import for_config
from ...architectures.heads import Head
from ...errors import TfparityError
from ...inputs import Batch
from ...trace import Trace
from ..hf_tf.loading import PT_PICKLE, PT_SAFETENSORS, pt_head_class
from ..interfaces.greedy import GreedyRun, teacher_forced_decoder
from ..interfaces.sides import ReferenceBase
from ..runtime.imports import import_torch, import_transformers
from ..sources.holdings import Holdings, refuse_unused_body
from ..sources.specs import ModelSpec
from .config import apply_changes, changed_note, label, rejected, rejecting


@dataclass
class PTModel(ReferenceBase):
    """A PyTorch model in eval mode, with a float64 copy made on demand (the referee):
    the live reference, which can do all a :class:`~..interfaces.sides.Reference` does."""

    name: str
    model: Any
    config: Any
    notes: list[str] = field(default_factory=list)
    holdings: Holdings | None = None  # what its checkpoint held; None: not known
    # Config fields changed from the checkpoint's (--pt-config, see .reference_config):
    # field -> (the checkpoint's value, the reference's); empty: the checkpoint's own.
    config_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    _fp64: Any = None
    _master: Any = None  # the float32 model a reduced-precision copy was made from

    def __post_init__(self) -> None:
        # Every report on a changed reference says so (copies made by replace() too).
        note = changed_note(self.config_changes) if self.config_changes else None
        if note and note not in self.notes:
            self.notes = [note, *self.notes]

    @classmethod
    def from_tf(
        cls, tf_model: Any, name: str = "", changes: Mapping[str, Any] | None = None
    ) -> PTModel:
        """Build from ``tf_model.config`` (with ``changes`` set, see
        :mod:`.config`) and copy the TF weights in (TF -> PT)."""
        from transformers.modeling_tf_pytorch_utils import load_tf2_model_in_pytorch_model

        config, changed = apply_changes(tf_model.config, changes)
        with rejecting(changes):
            model = _twin_of(tf_model, config)
            _, info = load_tf2_model_in_pytorch_model(
                model, tf_model, allow_missing_keys=True, output_loading_info=True
            )
        notes = _missing_note(model, info.get("missing_keys", []))
        return cls(
            name or f"{type(model).__name__} (from TF weights)",
            evaluated(model),
            config,
            notes,
            config_changes=changed,
        )

    @classmethod
    def from_dir(
        cls,
        directory: str | Path,
        *,
        allow_pickle: bool = False,
        label: str | None = None,
        head: Head | None = None,
        changes: Mapping[str, Any] | None = None,
        decoders: bool = False,
    ) -> PTModel:
        """Load a PyTorch checkpoint directory (config.json + safetensors or pickle).

        ``label`` names it in reports (the spec the user gave; default: the directory's
        name), so a report holds no machine-specific path. ``changes``: config fields
        set before the model is built (see :mod:`.config`). ``decoders``: a seq2seq LM
        loads (:func:`~tfparity.architectures.heads.unsupported`)."""
        directory = Path(directory)
        t = import_transformers()
        config = t.AutoConfig.from_pretrained(str(directory), trust_remote_code=False)
        config, changed = apply_changes(config, changes)
        files = {p.name for p in directory.iterdir()}
        if not files & set(PT_SAFETENSORS):
            if not files & set(PT_PICKLE):
                raise TfparityError(f"{directory} has no PyTorch weights (model.safetensors).")
            if not allow_pickle:
                raise TfparityError(
                    f"{directory} holds only a pickled checkpoint; pass "
                    "--allow-pickle to load it with torch.load(weights_only=True)."
                )
        try:
            model, info = pt_head_class(config, head, decoders=decoders).from_pretrained(
                str(directory),
                config=config,
                attn_implementation="eager",
                use_safetensors=not bool(files & set(PT_PICKLE)) or None,
                output_loading_info=True,
                trust_remote_code=False,
            )
        except Exception as exc:
            if changes:
                raise rejected(changes, exc) from exc
            raise TfparityError(
                f"The PyTorch checkpoint in {directory} could not be "
                f"loaded: {' '.join(str(exc).split())[:300]}"
            ) from exc
        holdings = Holdings.of(
            info.get("missing_keys", []),
            info.get("unexpected_keys", []),
            model.base_model_prefix,
            (name for name, _ in model.base_model.named_children()),
        )
        notes = _missing_note(model, info.get("missing_keys", []))
        notes += refuse_unused_body(holdings, f"the PyTorch checkpoint in {directory}")
        return cls(
            f"{type(model).__name__} ({label or directory.name})",
            evaluated(model),
            config,
            notes,
            holdings,
            config_changes=changed,
        )

    # ------------------------------------------------------------------ runs

    def fp64(self) -> Any:
        if self._fp64 is None:
            self._fp64 = copy.deepcopy(self.model).double()
        return self._fp64

    def in_precision(self, precision: str) -> PTModel:
        """This model computing in ``fp16``/``bf16`` (``fp32``: itself). A TF run in
        reduced precision is refereed against PyTorch's own error in that precision, so
        the float64 referee stays the float32 weights' float64 copy."""
        if precision == "fp32":
            return self
        torch = import_torch()
        dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
        if precision not in dtypes:
            raise TfparityError(f"Unknown precision '{precision}'; use fp32, fp16 or bf16.")
        lowered = copy.deepcopy(self.model).to(dtypes[precision])
        return replace(
            self,
            name=f"{self.name} in {precision}",
            model=lowered,
            _fp64=self.fp64(),
            _master=self.model,
        )

    def run(self, batch: Batch, *, float64: bool = False) -> Trace:
        torch = import_torch()
        model = self.fp64() if float64 else self.model
        with torch.no_grad(), default_dtype(torch.float64 if float64 else None):
            try:
                out = model(**self.torch_inputs(batch), output_hidden_states=True, return_dict=True)
            except (AssertionError, ValueError) as exc:  # transformers' checks of its inputs
                raise TfparityError(
                    f"{self.name} ({type(model).__name__}) refused these inputs: "
                    f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                ) from exc
        return Trace.from_output(out)

    def decoder_logits(
        self, input_ids: np.ndarray, decoder_input_ids: np.ndarray, *, float64: bool = False
    ) -> np.ndarray:
        """A seq2seq model's logits [batch, decoder seq, vocab], without a cache: its
        encoder reads ``input_ids`` (unpadded), its decoder is fed ``decoder_input_ids``."""
        out = self._decoder_call(input_ids, decoder_input_ids, float64, hidden=False)
        return out.logits.numpy()

    def decoder_states(
        self, input_ids: np.ndarray, decoder_input_ids: np.ndarray, *, float64: bool = False
    ) -> list[np.ndarray]:
        """A seq2seq decoder's hidden states on the same call as :meth:`decoder_logits`
        (0: its embeddings, k: layer k-1's output), each [batch, decoder seq, width]."""
        out = self._decoder_call(input_ids, decoder_input_ids, float64, hidden=True)
        return [h.numpy() for h in out.decoder_hidden_states]

    def _decoder_call(
        self, input_ids: np.ndarray, decoder_input_ids: np.ndarray, float64: bool, hidden: bool
    ) -> Any:
        torch = import_torch()
        model = self.fp64() if float64 else self.model
        ids = torch.from_numpy(np.asarray(input_ids, np.int64))
        fed = torch.from_numpy(np.asarray(decoder_input_ids, np.int64))
        with torch.no_grad(), default_dtype(torch.float64 if float64 else None):
            return model(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                decoder_input_ids=fed,
                use_cache=False,
                output_hidden_states=hidden,
                return_dict=True,
            )

    def recorded(
        self, batch: Batch, *, float64: bool = False, tapped: bool = False
    ) -> tuple[Trace, dict[str, np.ndarray]]:
        """A run and, when ``tapped``, its sub-layer outputs (see :mod:`..hf_tf.taps`); the
        cross-check asks for both through here, so a stored reference can answer too."""
        if not tapped:
            return self.run(batch, float64=float64), {}
        from .taps import pt_taps

        with pt_taps(self.fp64() if float64 else self.model) as recorded:
            trace = self.run(batch, float64=float64)
        return trace, recorded

    def localisable(self) -> bool:
        """Whether its architecture has sub-layer taps (see :mod:`..hf_tf.taps`)."""
        from ..interfaces import taps

        return taps.supported(self.config)

    def weight_scope(self, layer: int | str, component: str | None) -> list[tuple[str, str]]:
        """Where a component's parameters are, by name (see :func:`..hf_tf.taps.weight_scope`)."""
        from ..interfaces import taps

        return taps.weight_scope(self.config, layer, component)

    @property
    def reference_kind(self) -> str:
        return "a live PyTorch model"

    def gradients_refusal(self) -> str | None:
        return None

    def gradients(self, batch: Batch, objective: Any, *, float64: bool = False) -> Any:
        """The gradients check's scalar differentiated on the ``input_ids`` path (a
        :class:`~..interfaces.gradients.GradientRun`), weights named as :meth:`weights`
        names them."""
        from .gradients import pt_gradients

        torch = import_torch()
        model = self.fp64() if float64 else self.model
        body = model.base_model_prefix + "."
        strip = model.base_model is not model

        def named(name: str) -> str:
            return name.removeprefix(body) if strip else name

        time_major = for_config(self.config).embeddings.pt_time_major
        with default_dtype(torch.float64 if float64 else None):
            run = pt_gradients(
                model, self.torch_inputs(batch), batch.attention_mask, objective, named, time_major
            )
        word = model.get_input_embeddings().weight
        run.word_embeddings = next(
            (named(n) for n, p in model.named_parameters() if p is word), None
        )
        return run

    # ------------------------------------------------------------------ generation

    def greedy(self, prompt: np.ndarray, new_tokens: int) -> GreedyRun:
        """PyTorch ``generate``, greedy (see :func:`.generation.pt_generate`)."""
        from .generation import pt_generate

        return pt_generate(self, prompt, new_tokens)

    def step_logits(
        self, prompt: np.ndarray, tokens: np.ndarray, *, float64: bool = False
    ) -> np.ndarray:
        """Each step's logits without a cache (see :func:`.generation.step_logits`)."""
        from .generation import step_logits

        return step_logits(self, prompt, tokens, float64=float64)

    def encoder(self) -> PTModel:
        """A seq2seq reference's encoder alone (see :func:`.generation.encoder_model`)."""
        from .generation import encoder_model

        return cls_from_model(encoder_model(self), f"{self.name}, its encoder")

    # ------------------------------------------------------------------ weights

    def weights(self) -> dict[str, np.ndarray]:
        """Parameters as numpy by state-dict name (for weight-level hints; float32 ones for
        a reduced-precision copy, since the TF weights stay float32 under a mixed policy).
        A head model's body weights are named as in its base model (``encoder.layer.0``,
        not ``bert.encoder.layer.0``), so one name serves both; its head's keep theirs."""
        from .taps import pt_module_weights

        model = self._master if self._master is not None else self.model
        found = pt_module_weights(model)
        if model.base_model is model:
            return found
        body = model.base_model_prefix + "."
        return {k.removeprefix(body): v for k, v in found.items()}

    def named_weights(self) -> list[tuple[str, Any]]:
        """``(name, tensor)`` of its state dict."""
        return list(self.model.state_dict().items())

    def head_weight_names(self) -> list[str]:
        """The head's parameters (``classifier.bias``), named as :meth:`weights` names
        them, and the pooler's, which serves only heads; empty for a base model."""
        model = self.model
        body = model.base_model_prefix + "."
        return [
            name.removeprefix(body)
            for name in model.state_dict()
            if (model.base_model is not model and not name.startswith(body))
            or "pooler" in name.split(".")
        ]

    def torch_inputs(self, batch: Batch) -> dict[str, Any]:
        torch = import_torch()
        accepted = inspect.signature(self.model.forward).parameters
        inputs = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
        if batch.token_type_ids is not None and getattr(self.config, "type_vocab_size", 0):
            inputs["token_type_ids"] = batch.token_type_ids
        if batch.position_ids is not None:
            inputs["position_ids"] = batch.position_ids
        # a seq2seq LM's decoder, teacher-forced on the batch as the TF side's is
        inputs.update(teacher_forced_decoder(self.config, batch.input_ids, batch.attention_mask))
        return {
            k: torch.from_numpy(np.asarray(v, np.int64)) for k, v in inputs.items() if k in accepted
        }


@contextlib.contextmanager
def default_dtype(dtype: Any) -> Iterator[None]:
    """torch's default dtype set to ``dtype`` for one run (None: unchanged). Some models
    build masks with ``torch.full(..., finfo(model dtype).min)`` in the default dtype,
    which overflows float32 when the model runs in float64 (XGLM's causal mask)."""
    if dtype is None:
        yield
        return
    torch = import_torch()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def for_config_type(model_type: str) -> Any:
    from ...architectures import lookup

    return lookup(model_type)


def cls_from_model(model: Any, name: str) -> PTModel:
    """A PTModel around a PyTorch model already built and loaded."""
    return PTModel(name, evaluated(model), model.config)


def _pt_class(config: Any) -> Any:
    """The PyTorch base class that ``config``'s architecture names (T5: the encoder)."""
    return getattr(import_transformers(), for_config(config).pt_class)


def _twin_of(tf_model: Any, config: Any) -> Any:
    """A PyTorch model of ``tf_model``'s own class (``TFBertForSequenceClassification``
    -> ``BertForSequenceClassification``) for ``config``, fresh weights, eager attention."""
    twin = getattr(import_transformers(), type(tf_model).__name__.removeprefix("TF"), None)
    if twin is None:
        return _build(config)
    return twin._from_config(config, attn_implementation="eager")


def _build(config: Any) -> Any:
    """A PyTorch model with fresh weights for ``config`` (eager attention, as TF does)."""
    return _pt_class(config)._from_config(config, attn_implementation="eager")


def evaluated(model: Any) -> Any:
    torch = import_torch()
    torch.backends.cuda.matmul.allow_tf32 = False  # like pt-to-tf: no TF32 in the reference
    torch.backends.cudnn.allow_tf32 = False
    model.eval()
    for p in model.parameters():
        if p.device.type == "meta":
            raise TfparityError(
                "The PyTorch model has parameters on the 'meta' device (weights were not loaded)."
            )
    return model


def _missing_note(model: Any, missing: list[str]) -> list[str]:
    """Weights left at their random init, except buffers and weights tied to another
    (T5's ``encoder.embed_tokens.weight`` is ``shared.weight``): those are harmless."""
    tied = set(getattr(model, "_tied_weights_keys", None) or ())
    missing = [m for m in missing if not m.endswith("position_ids") and m not in tied]
    if not missing:
        return []
    return [
        "PyTorch weights not in the checkpoint, left randomly initialised: "
        + ", ".join(sorted(missing)[:8])
    ]


def load_pt(
    spec: str | ModelSpec,
    *,
    allow_pickle: bool = False,
    head: Head | None = None,
    changes: Mapping[str, Any] | None = None,
    named: bool = False,
    decoders: bool = False,
) -> PTModel:
    """The PyTorch reference for a MODEL spec, always loaded afresh from the spec.

    A checkpoint directory (``minilm``, a local or cached directory) is read directly;
    a ``tiny:`` model or a TF-only directory is loaded in TF and its weights copied in.
    Never from a TF model in memory: that one may be the (broken) model under test.
    ``changes`` (``--pt-config``): config fields the reference is built with instead of
    the checkpoint's (:mod:`.config`); its name and notes say so. ``named``:
    the user named ``spec`` as the reference (``--pt``, ``pt=``), so a refusal says what
    is wrong with it rather than asking for ``--pt``. ``spec``: a string, or the
    :class:`~..sources.specs.ModelSpec` parsed where it entered (parsed once).
    ``decoders``: a seq2seq LM loads (:func:`~tfparity.architectures.heads.unsupported`).
    """
    reference = _load_pt(spec, allow_pickle, head, changes, named, decoders=decoders)
    return replace(reference, name=reference.name + label(changes)) if changes else reference


def _load_pt(
    spec: str | ModelSpec,
    allow_pickle: bool,
    head: Head | None,
    changes: Mapping[str, Any] | None,
    named: bool = False,
    *,
    decoders: bool = False,
) -> PTModel:
    from ..hf_tf.loading import is_tf_safetensors, load_tf
    from ..hf_tf.tiny_checkpoints import spec_dir
    from ..sources.specs import as_spec

    parsed = as_spec(spec)
    spec = parsed.text
    converted = parsed.kind == "keras-hub"
    if converted:  # the checkpoint keras-hub converts, in PyTorch
        if parsed.inner is None:
            raise TfparityError(_preset_refusal(spec, named))
        parsed = parsed.inner
        spec = parsed.text
    if parsed.kind == "tiny":
        kind = head or parsed.head or Head.BASE  # the checkpoint is saved with its LM head
        # Seeded in PyTorch, or keras-hub's task: the saved checkpoint's head is seeded in
        # PyTorch (an untied lm_head differs from the TF class's seeded one).
        if for_config_type(parsed.location).tf_class is None or (
            converted and kind is not Head.BASE
        ):
            loaded = PTModel.from_dir(
                spec_dir(parsed), head=kind, changes=changes, decoders=decoders
            )
            reference = cls_from_model(loaded.model, f"PyTorch {spec}")
            return replace(reference, config_changes=loaded.config_changes)
        tf_model = load_tf(parsed, head=head, decoders=decoders).model
        return PTModel.from_tf(tf_model, name=f"PyTorch {spec}", changes=changes)
    directory = spec_dir(parsed)
    files = {p.name for p in directory.iterdir()}
    # TF-format safetensors hold TF names: a TF checkpoint, which PyTorch cannot load
    if not files & set(PT_SAFETENSORS + PT_PICKLE) or is_tf_safetensors(directory, files):
        loaded = load_tf(parsed, allow_pickle=allow_pickle, head=head, decoders=decoders)
        name = f"PyTorch from TF weights of {spec}"
        # it holds what the TF checkpoint holds: weights that checkpoint lacks are made
        # up by this TF load, unlike the port's, and so not judged
        reference = PTModel.from_tf(loaded.model, name=name, changes=changes)
        return replace(reference, holdings=loaded.holdings)
    return PTModel.from_dir(
        directory,
        allow_pickle=allow_pickle,
        label=spec,
        head=head,
        changes=changes,
        decoders=decoders,
    )


def _preset_refusal(spec: str, named: bool) -> str:
    """Why a keras-hub preset cannot be the reference: asked for by ``--pt`` itself, it
    must say what to give instead, not to give ``--pt``."""
    if named:
        return (
            f"--pt {spec} is a keras-hub preset: it holds Keras weights, not a PyTorch "
            "checkpoint, so it cannot be the reference. Give --pt (pt=) the Hugging Face "
            "checkpoint the preset was converted from (a directory, minilm, "
            "tiny:<model_type>), not the preset."
        )
    return (
        f"'{spec}' is a keras-hub preset: it holds no PyTorch reference; give one with "
        "--pt (the Hugging Face checkpoint it was converted from)."
    )
