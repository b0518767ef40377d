"""The Python API: the same checks the CLI runs, returning Report objects.

``model`` arguments accept a MODEL spec string, a :class:`TFModel`, or a Hugging Face
TF model object the caller already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .compare import Tolerance
from .inputs import Batch, InputOptions
from .results import Report


def load_model(model: Any = "minilm", *, allow_pickle: bool = False, tokenizer: Any = None):
    """A :class:`~tfparity.adapters.tf_model.TFModel` for a spec, or a wrapped model
    (a ``keras-hub:<SPEC>`` gives a :class:`~tfparity.adapters.keras_hub.KerasHubModel`)."""
    from .adapters.keras_hub import KerasHubModel, is_keras_hub_spec, load_keras_hub
    from .adapters.tf_model import TFModel

    if isinstance(model, (TFModel, KerasHubModel)):
        return model
    if is_keras_hub_spec(model):
        return load_keras_hub(model)
    if isinstance(model, str):
        return TFModel.load(model, allow_pickle=allow_pickle)
    return TFModel.wrap(model, tokenizer=tokenizer)


def make_batches(model: Any, inputs: InputOptions | None = None) -> list[Batch]:
    """The batches ``inputs`` describes, tokenized and checked for ``model``."""
    from .inputs import make_batches as _make

    tf_model = load_model(model)
    return _make(
        tf_model.tokenizer, tf_model.limits, tf_model.pad_token_id, inputs or InputOptions()
    )


def check_embeds(
    model: Any = "minilm",
    *,
    texts: Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    batches: Sequence[Batch] | None = None,
    tolerance: Tolerance | None = None,
    embeds_fn: Callable[[Batch], Any] | None = None,
) -> Report:
    """Compare the ``inputs_embeds`` path with the ``input_ids`` path.

    ``embeds_fn(batch)`` supplies the embeddings under test; by default they are the
    model's word embeddings gathered by the batch's ids (which must match exactly).
    """
    from .checks.embeds import EmbedsOptions
    from .checks.embeds import check_embeds as _check

    tf_model = load_model(model)
    if batches is None:
        if texts is not None:
            inputs = InputOptions(texts=tuple(texts))
        batches = make_batches(tf_model, inputs)
    return _check(tf_model, batches, EmbedsOptions(tolerance=tolerance, embeds_fn=embeds_fn))


def assert_close(
    actual: Any,
    expected: Any,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    attention_mask: Any = None,
    equal_nan: bool = False,
) -> None:
    """Assert two nested outputs are close, leaf by leaf; raise AssertionError with the
    comparison core's readable block otherwise."""
    from .compare import compare_outputs, default_tolerance, failure_message, flatten

    tolerance = None
    if atol is not None or rtol is not None or equal_nan:
        leaf = next(iter(flatten(expected).values()))
        base = default_tolerance(leaf.dtype)
        tolerance = Tolerance(
            atol=base.atol if atol is None else atol,
            rtol=base.rtol if rtol is None else rtol,
            equal_nan=equal_nan,
        )
    results = compare_outputs(actual, expected, mask=attention_mask, tolerance=tolerance)
    if not all(c.passed for c in results):
        raise AssertionError(failure_message(results))


def crosscheck(
    model: Any = "minilm",
    *,
    tf: Any = None,
    pt: Any = None,
    inputs: InputOptions | None = None,
    batches: Sequence[Batch] | None = None,
    tolerance: Tolerance | None = None,
    reload: bool = True,
    allow_pickle: bool = False,
    localise: str = "always",
    tf_traces: Sequence[Any] | None = None,
    execution: Any = None,
) -> list[Report]:
    """TF vs PyTorch on the same weights; one Report per TF model checked.

    With ``model`` alone, its weights go into both frameworks and, like
    ``transformers-cli pt-to-tf``, the TF model is checked twice: as cross-loaded and
    after ``save_pretrained`` and reload (``reload=False`` skips the second; so does
    giving ``tf``). With ``tf`` and ``pt``, a TF port is checked against a PyTorch
    reference (``pt`` is a MODEL spec or a :class:`PTModel`).

    ``localise="on_failure"`` runs the sub-layer taps and isolated runs only when a
    tensor fails (faster; the per-layer table then lacks those columns on a PASS).
    ``tf_traces`` are the TF model's ``input_ids`` runs of ``batches``, if already made.
    ``execution`` (an :class:`~tfparity.adapters.execution.ExecutionOptions`) runs the TF
    side on a device, eager/graph/XLA, in fp32/fp16/bf16 (default: as ``tf`` runs); in
    fp16/bf16 PyTorch runs in that precision too, and its error to float64 sets the bar.
    """
    from .adapters.pt_model import PTModel, load_pt
    from .checks.crosscheck import CrosscheckOptions
    from .checks.crosscheck import crosscheck as _check

    tf_model = load_model(tf if tf is not None else model, allow_pickle=allow_pickle)
    pt_spec = pt if pt is not None else model
    if isinstance(pt_spec, PTModel):
        pt_model = pt_spec
    elif isinstance(pt_spec, str):
        pt_model = load_pt(pt_spec, allow_pickle=allow_pickle)
    else:
        pt_model = PTModel.from_tf(tf_model.model)
    if batches is None:
        batches = make_batches(tf_model, inputs)
    execution = execution or getattr(tf_model, "execution", None)
    if execution is not None:
        execution = execution.settle(len(batches))
        pt_model = pt_model.in_precision(execution.precision)
    options = CrosscheckOptions(tolerance=tolerance, localise=localise)
    runner = _executed(tf_model, execution)
    reports = [_check(runner, pt_model, batches, options, tf_traces=tf_traces)]
    if reload and tf is None:
        reloaded = _executed(_save_and_reload(tf_model), execution)
        options = replace(options, label="crosscheck-reloaded")
        reports.append(_check(reloaded, pt_model, batches, options))
    return reports


def _executed(tf_model: Any, execution: Any) -> Any:
    """``tf_model`` running under ``execution`` (itself when it already does, or when
    ``execution`` is None)."""
    from .adapters.execution import with_execution

    if execution is None or getattr(tf_model, "execution", None) == execution:
        return tf_model
    return with_execution(tf_model, execution)


def _save_and_reload(tf_model: Any) -> Any:
    """The TF model after ``save_pretrained`` and a fresh load (catches lost weights);
    a keras-hub model after ``save_to_preset`` and ``from_preset``."""
    import tempfile

    if hasattr(tf_model, "reloaded"):
        return tf_model.reloaded()

    from .adapters.tf_model import TFModel

    with tempfile.TemporaryDirectory(prefix="tfparity-") as tmp:
        tf_model.model.save_pretrained(tmp)
        reloaded = TFModel.load(tmp)
    reloaded.tokenizer = tf_model.tokenizer
    reloaded.name = f"{tf_model.name} (saved and reloaded)"
    return reloaded


def diagnose(
    model: Any,
    input_ids: Any,
    inputs_embeds: Any,
    *,
    attention_mask: Any = None,
    token_type_ids: Any = None,
    position_ids: Any = None,
    tolerance: Tolerance | None = None,
) -> Report:
    """What are these ``inputs_embeds``? Word embeddings, + positions, + types, after the
    embedding LayerNorm (``hidden_states[0]``), scaled, or unknown; with the ids they
    encode and the fix (``report.details``: verdict, candidates, recovered_ids_match, fix).
    """
    import numpy as np

    from .checks.diagnose import DiagnoseInputs, DiagnoseOptions, check_diagnose

    ids = np.asarray(input_ids, np.int32)
    mask = np.ones_like(ids) if attention_mask is None else np.asarray(attention_mask, np.int32)

    def as_int(x: Any) -> Any:
        return None if x is None else np.asarray(x, np.int32)

    batch = Batch(ids, mask, as_int(token_type_ids), as_int(position_ids))
    inputs = DiagnoseInputs(batch=batch, embeds=np.asarray(inputs_embeds))
    return check_diagnose(load_model(model), inputs, DiagnoseOptions(tolerance=tolerance))


def check_tying(model: Any = "minilm", *, inputs: InputOptions | None = None) -> Report:
    """Embedding tying, the LM head's transform, round-trip decoding and inversion risk
    (``report.details``: tied, head_transform, roundtrip, noise). Pass a model loaded
    with its head (``TFModel.load(spec, head=True)``) to include the LM head."""
    from .checks.tying import check_tying as _check

    tf_model = load_model(model)
    return _check(tf_model, make_batches(tf_model, inputs))


def check_positions(
    model: Any = "minilm",
    *,
    inputs: InputOptions | None = None,
    permutations: int = 10,
    seed: int = 0,
    tolerance: Tolerance | None = None,
) -> Report:
    """Permuting tokens and position ids together must permute the outputs
    (``report.details``: scenarios, equivariant, explicit_positions_match)."""
    from .checks.positions import PositionsOptions
    from .checks.positions import check_positions as _check

    tf_model = load_model(model)
    options = PositionsOptions(permutations=permutations, seed=seed, tolerance=tolerance)
    return _check(tf_model, make_batches(tf_model, inputs), options)
