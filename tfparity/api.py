"""The Python API: the same checks the CLI runs, returning Report objects.

``model`` arguments accept a MODEL spec string, a :class:`TFModel`, or a Hugging Face
TF model object the caller already holds. A facade: each function checks its arguments
with its check's ``Options.from_arguments`` (the command calls the same, before any
framework import), loads or pairs the sides (:mod:`tfparity.orchestration`) and runs
the check (:mod:`tfparity.checks`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .checks import DEFAULT_LOCALISE, DEFAULT_REFEREE_RUNS
from .compare import Tolerance
from .inputs import Batch, InputOptions, check_input_arguments
from .orchestration import (
    executed,
    generation_head,
    load_model,
    pair,
    reference_for,
    reference_tokenizer,
    save_and_reload,
    tolerance_from,
    wants_reload,
)
from .results import Report


def make_batches(model: Any, inputs: InputOptions | None = None) -> list[Batch]:
    """The batches ``inputs`` describes, tokenized and checked for ``model``; for a
    model that cannot mask padding (a signature without an attention mask), without
    padding: sequences of one length per batch (:func:`tfparity.inputs.unpadded`)."""
    from . import validation
    from .inputs import make_batches as _make
    from .inputs import unpadded

    validation.instance(inputs, InputOptions, "inputs", "an InputOptions or None")
    tf_model = load_model(model)
    options = inputs or InputOptions()
    batches = _make(tf_model, options)
    reason = tf_model.unmasked_reason
    return batches if reason is None else unpadded(batches, options.batch_size, reason)


def check_embeds(
    model: Any = "minilm",
    *,
    texts: Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    batches: Sequence[Batch] | None = None,
    tolerance: Tolerance | None = None,
    embeds_fn: Callable[[Batch], Any] | None = None,
    execution: Any = None,
    source: str | None = None,
    signature: str | None = None,
) -> Report:
    """Compare the ``inputs_embeds`` path with the ``input_ids`` path.

    ``embeds_fn(batch)`` supplies the embeddings under test; by default they are the
    model's word embeddings gathered by the batch's ids (which must match exactly).
    ``execution`` (an :class:`~tfparity.adapters.runtime.execution.ExecutionOptions`) runs the
    model on a device, eager/graph/XLA, in fp32/fp16/bf16; the report says which.
    ``source``: for an export, the MODEL spec it came from (its config and tokenizer);
    an export whose signatures take no ``inputs_embeds`` is refused (TfparityError).
    ``signature`` (``--signature``) names the export's signature to run, as for
    :func:`crosscheck`.
    """
    from . import validation
    from .checks.embeds import EmbedsOptions
    from .checks.embeds import check_embeds as _check

    check_input_arguments(texts=texts, inputs=inputs, batches=batches)
    options = EmbedsOptions.from_arguments(tolerance=tolerance, embeds_fn=embeds_fn)
    tf_model = load_model(model, companion=source, signature=signature)
    if batches is None:
        if texts is not None:
            inputs = InputOptions(texts=validation.texts(texts))
        batches = make_batches(tf_model, inputs)
    if execution is not None:
        tf_model = executed(tf_model, execution.settle(len(batches)))
    report = _check(tf_model, batches, options)
    report.details.update(tf_model.execution.describe())
    return report


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
    comparison core's readable block otherwise. A lone ``atol`` or ``rtol`` keeps the
    other's default for ``expected``'s dtype (:func:`~tfparity.orchestration.tolerance_from`)."""
    from . import validation
    from .compare import compare_outputs, failure_message, flatten

    validation.tolerance_values(atol=atol, rtol=rtol)
    validation.instance(equal_nan, bool, "equal_nan", "a bool")
    leaves = flatten(expected)
    if not leaves or not flatten(actual):
        raise validation.NothingComparedError(
            "assert_close: actual and expected must each hold at least one tensor "
            f"(got {len(flatten(actual))} and {len(leaves)}); nothing was compared."
        )
    dtype = next(iter(leaves.values())).dtype
    tolerance = tolerance_from(atol, rtol, dtype, equal_nan=equal_nan)
    results = compare_outputs(actual, expected, mask=attention_mask, tolerance=tolerance)
    nothing = [c for c in results if c.problem and c.problem.startswith("Nothing compared")]
    if nothing or (all(c.passed for c in results) and sum(c.total for c in results) == 0):
        raise validation.NothingComparedError(
            "assert_close compared no element: "
            + ("attention_mask masks out every element" if nothing else "every tensor is empty")
            + "; a comparison of nothing does not pass."
        )
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
    reload: bool | None = None,
    allow_pickle: bool = False,
    localise: str = DEFAULT_LOCALISE,
    referee: str = DEFAULT_REFEREE_RUNS,
    tf_traces: Sequence[Any] | None = None,
    execution: Any = None,
    head: str | None = None,
    budget: Any = None,
    source: str | None = None,
    layers: dict[Any, int] | None = None,
    weights: dict[str, Any] | None = None,
    pt_config: dict[str, Any] | None = None,
    signature: str | None = None,
    kl_budget: str | None = None,
    labels: Sequence[str] | None = None,
    quantize: str | None = None,
    attribute: bool = False,
    backend: str | None = None,
    calibration: str | None = None,
) -> list[Report]:
    """TF vs PyTorch on the same weights; one Report per TF model checked.

    With ``model`` alone, its weights go into both frameworks and, like
    ``transformers-cli pt-to-tf``, the TF model is checked twice: as cross-loaded and
    after ``save_pretrained`` and reload (``reload=False`` skips the second; so does
    giving ``tf``, a separate port checked as given, and by default giving ``pt``: a
    reference of the caller's choosing, ``reload=True`` to have the pass anyway). ``pt``
    is the PyTorch reference: a MODEL spec, a :class:`PTModel` or a stored reference; by
    default it is loaded from the spec of the TF model under test, never copied from it
    (see :mod:`tfparity.orchestration`).

    ``localise="on_failure"`` (the default, as on the CLI) runs the sub-layer taps and
    isolated runs only when a tensor fails (they cost about as much as the forward
    passes); ``"always"`` runs them on every run, so the per-layer table has their
    columns on a PASS too.
    ``referee="lazy"`` (the default, as on the CLI) runs the float64 PyTorch pass batch
    by batch until the batches left cannot change a verdict (an exact bound: the
    verdicts are ``"full"``'s, which runs every batch; ``details["float64_batches"]``
    says how many ran, and the rmse/fp64 figures are over those).
    ``tf_traces`` are the TF model's ``input_ids`` runs of ``batches``, if already made.
    ``head`` (``"sequence-classification"``, ``"question-answering"``, ...: see
    :class:`~tfparity.architectures.heads.Head`) picks the model class a spec loads on
    both sides; default: the one its ``config.architectures`` names. Head-model objects
    (``TFBertForSequenceClassification``) are taken as they are, their PyTorch twin too.
    ``execution`` (an :class:`~tfparity.adapters.runtime.execution.ExecutionOptions`) runs the TF
    side on a device, eager/graph/XLA, in fp32/fp16/bf16 (default: as ``tf`` runs); in
    fp16/bf16 PyTorch runs in that precision too, and its error to float64 sets the bar.
    ``budget`` (a :class:`~tfparity.compare.budgets.Budget`, or ``"max=1e-2,mean=1e-3,
    cosine=0.999,agreement=0.99"``, any subset): what a quantised side (a dynamic-range
    int8 or float16 LiteRT model) may differ by; such a side is always judged by a
    budget, its kind's default when none is given (never by the float64 referee).
    Given for a float32 side, it judges that side instead of the referee.

    An export (a SavedModel directory, a ``.keras`` file) takes its config and tokenizer
    from ``source``, the MODEL spec it was exported from, else from ``pt``. With
    ``source`` the export's parity comes three ways: the export against its source (the
    export should change nothing), the export against PyTorch (the referee) and the
    source against PyTorch (:mod:`tfparity.checks.crosscheck.export_source`), in that order.

    A model of your own (``tf=``: a callable, a Keras 3 or tf-keras model) takes its
    config and tokenizer from ``pt`` (required). ``layers`` maps its layers to Hugging
    Face hidden states (``{"embeddings_ln": 0, "block_0": 1}``: the divergence is
    localised to a layer) and ``weights`` its variables to PyTorch weight names
    (``{"block_0/ffn_up/kernel": ("encoder.layer.0.intermediate.dense.weight",
    "transpose")}``: the hints name the weight); see docs/your-own-model.md.

    ``pt_config`` (``{"hidden_act": "gelu_pytorch_tanh"}``; ``--pt-config``) builds the
    PyTorch reference (and its float64 referee) from its checkpoint's config with these
    fields changed, e.g. to check the rest of a port whose known difference is one
    config field; every report says the reference is not the checkpoint's own.

    What the head means is judged too (docs/crosscheck.md, "Label maps and tokenizers"):
    a classification head's label maps against the reference's, and, on texts this call
    tokenizes, whose tokenizer made the ids (``details["tokenizer"]``) and, where ``pt``
    is a spec with a tokenizer of its own, whether it makes the same ids (a failure if
    not). Batches given as ``batches`` are taken as they are: no tokenizer is named.
    ``signature`` (``--signature``) names the signature an export (a SavedModel, a
    LiteRT flatbuffer) runs; default: ``serving_default``, else its only one. A
    signature without an attention mask runs batches without padding, of one length
    each (``details["unpadded"]`` says so); ``batches`` with padding are refused for it.
    A T5/mT5 seq2seq LM (``head="seq2seq-lm"``, ``tiny:t5/seq2seq-lm``) is judged whole:
    its encoder's hidden states (``hidden_states[k]``), its decoder's, teacher-forced on
    each sequence's own ids (``decoder_hidden_states[k]``), and the LM logits.

    An LM head's logits (masked-lm, causal-lm) also get llama.cpp's distribution
    metrics (``details["distribution"]``: KL mean, median, p99, max, same top-1, RMS Δp,
    and for a causal LM ln(PPL ratio)); ``kl_budget`` (``"kl_mean=0.01,same_top1=0.99"``)
    judges them by a bootstrap interval over the sequences: a term fails where its
    whole interval is outside (docs/quantised.md). A classifier's logits get them over
    its labels. ``labels`` (``--labels``: a class id or label name per text, in order)
    reports a sequence classifier's accuracy on each side and the flips between them
    (``details["gold"]``).

    ``quantize`` (``"int8"``, ``"int4"``, ``"float8"``): a keras-hub model is also
    quantised by Keras (``model.quantize``, on a copy) and the report adds
    ``details["quantisation"]``: the quantised model against its float model, judged by
    the mode's distribution budget (``kl_budget`` overrides it), and against PyTorch.
    ``attribute`` (with ``quantize``) also quantises each layer alone, one forward pass
    each, and ranks them (``details["quantisation"]["attribution"]``). ``calibration``
    (``--calibration``): a GPTQ/AWQ file's calibration data, for its exact check.

    ``backend`` (``"jax"``, ``"torch"``; ``--backend``): a ``keras-hub:<SPEC>`` runs on
    that Keras backend, in a process of its own (converted here on TensorFlow, saved to
    ``.keras``), localised to a layer; ``"tensorflow"`` or None: in this process.
    """
    from .adapters.keras_hub.calibration import read_calibration
    from .adapters.keras_hub.quantised_side import quantised_twin
    from .adapters.requantise import fresh_twin
    from .checks.crosscheck.artefacts import tokenizers_judged
    from .checks.crosscheck.check import CrosscheckOptions
    from .checks.crosscheck.check import crosscheck as _check
    from .checks.crosscheck.export_parity import export_parity
    from .checks.crosscheck.quantised import with_quantisation
    from .checks.crosscheck.requantised import with_requantisation

    check_input_arguments(inputs=inputs, batches=batches)
    options = CrosscheckOptions.from_arguments(  # exit 2 before any model loads
        tolerance=tolerance,
        localise=localise,
        referee=referee,
        budget=budget,
        kl_budget=kl_budget,
        labels=labels,
        quantize=quantize,
        attribute=attribute,
        backend=backend,
    )
    limits = options.kl_budget
    if quantize:  # the quantisation's judge takes the limits, else its mode's budget
        options = replace(options, kl_budget=None)
    paired = pair(
        tf if tf is not None else model,
        pt,
        head=head,
        pt_config=pt_config,
        execution=execution,
        decoders=True,  # a T5's seq2seq LM loads here, its decoder teacher-forced
        allow_pickle=allow_pickle,
        source=source,
        layers=layers,
        weights=weights,
        signature=signature,
        backend=backend,
    )
    tf_model, pt_model, source_model = paired.tf, paired.reference, paired.source
    pt = paired.reference_spec or pt  # parsed once: the reference's tokenizer reads it
    quantised, alone = quantised_twin(tf_model, quantize, attribute)  # exit 2 first
    data = read_calibration(calibration, tf_model)  # exit 2 for a bad file, or a useless one
    tokenized = batches is None  # by the TF side's tokenizer, when the inputs are texts
    if batches is None:
        batches = make_batches(tf_model, inputs)
    asked = execution
    execution = (execution or tf_model.execution).settle(len(batches))
    runner = executed(tf_model, execution)

    def judged(report: Report, source: Any) -> Report:
        """The report of the side under test against PyTorch, with its exact check
        (a GPTQ/AWQ file against a fresh quantisation) and its ``quantize`` copy."""
        report = with_requantisation(report, fresh_twin(runner, source, pt, data), batches)
        if quantised is None:
            return report
        return with_quantisation(
            report, runner, quantised, pt_model, batches, quantize, limits, *alone
        )

    if source_model is not None:  # the source runs as asked, else as it runs by default
        source_model = executed(
            source_model, (asked or source_model.execution).settle(len(batches))
        )
        reports = export_parity(runner, source_model, pt_model, batches, options)
        reports[1] = judged(reports[1], source_model)  # the export against PyTorch
    else:
        reports = [judged(_check(runner, pt_model, batches, options, tf_traces=tf_traces), None)]
        again = wants_reload(reload, separate_port=tf is not None, named_reference=pt is not None)
        reloaded = save_and_reload(tf_model) if again else None
        if reloaded is not None:  # an export has no save-and-reload pass of its own
            options = replace(options, label="crosscheck-reloaded")
            reports.append(_check(executed(reloaded, execution), pt_model, batches, options))
    # on texts tokenised here, whose tokenizer made the ids, and does the reference's agree
    tokenizer = tf_model.tokenizer if tokenized else None
    return tokenizers_judged(reports, tokenizer, lambda: reference_tokenizer(pt), batches)


def gradients(
    model: Any = "minilm",
    *,
    pt: Any = None,
    inputs: InputOptions | None = None,
    batches: Sequence[Batch] | None = None,
    tolerance: Tolerance | None = None,
    seed: int = 0,
    embeds_fn: Callable[[Batch], Any] | None = None,
    allow_pickle: bool = False,
    head: str | None = None,
    pt_config: dict[str, Any] | None = None,
    frozen: str | Sequence[str] | None = None,
    backend: str | None = None,
) -> list[Report]:
    """Gradients through ``inputs_embeds`` and against PyTorch (see
    :mod:`tfparity.checks.gradients.check`): a ``gradients-embeds`` Report (TF ``input_ids``
    path vs the ``inputs_embeds`` path fed the Keras-side gather, or ``embeds_fn(batch)``
    made inside the tape) and a ``gradients`` Report (TF vs PyTorch, float64 referee;
    ``tolerance`` judges both instead). ``seed`` seeds the scalar (labels, projection).
    ``pt``: the PyTorch reference as for :func:`crosscheck` (a MODEL spec or a live
    model; loaded from ``model``'s spec by default); ``pt=False``: no PyTorch, the
    ids-vs-embeds report only. ``pt_config``: as for :func:`crosscheck`. Every weight
    PyTorch differentiates must get a TF gradient; ``frozen``: globs or substrings of
    PyTorch weight names the port freezes on purpose, left out (the report lists them;
    a pattern that matches none raises :class:`~tfparity.errors.TfparityError`).
    ``backend`` (jax, torch): a keras-hub spec differentiated on that Keras backend in
    a process of its own, TF-vs-PyTorch only (docs/gradients.md)."""
    from .checks.gradients.check import GradientsOptions, check_gradients

    check_input_arguments(inputs=inputs, batches=batches)
    options = GradientsOptions.from_arguments(
        seed=seed,
        tolerance=tolerance,
        embeds_fn=embeds_fn,
        frozen=frozen,
        with_reference=pt is not False,
        pt_config=pt_config,
        backend=backend,
    )
    # An export's config and tokenizer come from the reference named, as in crosscheck:
    # without it, its refusal would ask for the --pt just given.
    paired = pair(
        model,
        None if pt is False else pt,
        head=head,
        pt_config=pt_config,
        allow_pickle=allow_pickle,
        with_reference=pt is not False,
        backend=backend,
    )
    tf_model, pt_model = paired.tf, paired.reference
    if batches is None:
        batches = make_batches(tf_model, inputs)
    return check_gradients(tf_model.eager(), pt_model, batches, options)


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
    from .checks.diagnose import DiagnoseOptions, check_diagnose, diagnose_inputs

    options = DiagnoseOptions.from_arguments(tolerance=tolerance)
    inputs = diagnose_inputs(
        input_ids,
        inputs_embeds,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        position_ids=position_ids,
    )
    return check_diagnose(load_model(model), inputs, options)


def check_tying(
    model: Any = "minilm",
    *,
    inputs: InputOptions | None = None,
    noise_scales: Sequence[float] | None = None,
    seed: int = 0,
) -> Report:
    """Embedding tying, the LM head's transform, round-trip decoding and inversion risk
    (``report.details``: tied, head_transform, roundtrip, noise). Pass a model loaded
    with its head (``TFModel.load(spec, lm_head=True)``) to include the LM head.
    ``noise_scales`` (``--noise-scales``): noise norms relative to the embedding norm,
    ``seed`` seeds the noise."""
    from .checks.tying import TyingOptions
    from .checks.tying import check_tying as _check

    check_input_arguments(inputs=inputs)
    options = TyingOptions.from_arguments(noise_scales=noise_scales, seed=seed)
    tf_model = load_model(model)
    return _check(tf_model, make_batches(tf_model, inputs), options)


def check_positions(
    model: Any = "minilm",
    *,
    inputs: InputOptions | None = None,
    permutations: int = 10,
    seed: int = 0,
    tolerance: Tolerance | None = None,
    head: str | None = None,
) -> Report:
    """Permuting tokens and position ids together must permute the outputs
    (``report.details``: scenarios, equivariant, explicit_positions_match). What is
    compared is what the model answers with: a head's logits, a base model's
    last_hidden_state; ``head`` picks the class a spec loads, as for :func:`crosscheck`."""
    from .checks.positions import PositionsOptions
    from .checks.positions import check_positions as _check

    check_input_arguments(inputs=inputs)
    options = PositionsOptions.from_arguments(
        permutations=permutations, seed=seed, tolerance=tolerance
    )
    tf_model = load_model(model, head=head)
    return _check(tf_model, make_batches(tf_model, inputs), options)


def check_modes(
    model: Any = "minilm",
    *,
    devices: str = "all",
    modes: str | Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    tolerance: Tolerance | None = None,
) -> Report:
    """The same inputs under every execution mode (tf.function, XLA, fp16, bf16, TF32)
    on each device of ``devices`` (``"cpu"``, ``"gpu"``, ``"gpu:N"``, ``"all"``),
    against CPU eager fp32: the report ``tfparity modes`` prints and writes
    (``report.details["modes"]``: a row per mode). ``modes``: which (``["xla",
    "fp16"]``, ``"graph,xla+fp16"``; default: every plain one); each is judged by its
    compute dtype's tolerance scaled to the tensor, ``tolerance`` replaces that rule
    for all (docs/devices-and-modes.md). Modes none of ``devices`` can run are refused
    (:class:`~tfparity.validation.NothingComparedError`)."""
    from .checks.modes import ModesOptions
    from .checks.modes import check_modes as _check

    check_input_arguments(inputs=inputs)
    options = ModesOptions.from_arguments(devices=devices, modes=modes, tolerance=tolerance)
    tf_model = load_model(model)
    return _check(tf_model, make_batches(tf_model, inputs), options)


def check_runtimes(
    artefact: Any,
    *,
    source: str | None = None,
    sets: str | Sequence[str] | None = None,
    threads: int | str | Sequence[int] | None = None,
    signature: str | None = None,
    inputs: InputOptions | None = None,
    tolerance: Tolerance | None = None,
) -> Report:
    """One artefact (``.tflite``, ``.onnx``) on each of its kernel sets (``sets``: default
    all; threaded ones at each of ``threads``, default 1 and up to 4): with ``source``
    (the MODEL it was converted from) each run against PyTorch by the float64 referee,
    else the runs against each other, naming the run that parts, its first tensor, the
    op and the evidence (docs/runtimes.md)."""
    import os

    from .adapters.runtime.kernel_sets import kernels_for
    from .adapters.sources.specs import as_spec
    from .checks.runtimes import RuntimesOptions, random_inputs
    from .checks.runtimes import check_runtimes as _check

    check_input_arguments(inputs=inputs)
    spec = as_spec(os.fspath(artefact))
    kernels = kernels_for(spec.kind, spec.text)
    options = RuntimesOptions.from_arguments(
        kernels, sets=sets, threads=threads, tolerance=tolerance, cores=os.cpu_count() or 1
    )
    opened = kernels.opener().open_runs(
        spec, source, kernels.named(options.sets), options.threads, signature
    )
    side, reference = opened.source_side, None
    if side is not None:
        batches, reference = make_batches(side, inputs), reference_for(side)
    else:
        batches = random_inputs(opened, inputs)
    return _check(opened, batches, options, reference, spec.text)


def generate(
    model: Any = "tiny:gpt2/causal-lm",
    *,
    pt: Any = None,
    new_tokens: int | None = None,
    texts: Sequence[str] | None = None,
    inputs: InputOptions | None = None,
    embeds: bool = True,
    allow_pickle: bool = False,
    pt_config: dict[str, Any] | None = None,
    kl_budget: str | None = None,
    quantize: str | None = None,
    backend: str | None = None,
) -> Report:
    """Greedy generation, TF against PyTorch, each through its own KV-cache path (HF TF
    ``generate``, PyTorch ``generate``): per prompt the tokens agreed, the first divergent
    step with both sides' margins, per step (both fed PyTorch's tokens) the largest logit
    difference, the top-5 overlap and the float64 referee's verdict; a near-tie flip told
    from a defect; each cached TF step against a recomputation without cache; and, where
    the TF side can (the TF class's call takes ``inputs_embeds``; a keras-hub task's graph
    from its token lookup on), generation started from gathered embeddings
    (``embeds=False`` skips it). Where tokens part by a defect, the cross-check of the
    teacher-forced sequence (a seq2seq model: of its encoder on the prompt) names the
    layer (``report.first_divergence``).

    ``model``: a causal LM (a MODEL spec, loaded with its LM head; a TFModel; a Hugging
    Face TF causal LM; ``keras-hub:<SPEC>``, its keras-hub ``CausalLM`` task, whose own
    ``generate`` runs with a greedy sampler), or a T5/mT5 seq2seq LM (a spec such as
    ``tiny:t5`` loads ``TFT5ForConditionalGeneration``): the prompt feeds the encoder and
    the decoder's tokens are judged; a defect is localised in the encoder, if there. An
    ONNX file (a ``.onnx`` path, its config from ``pt``) whose graph takes and returns
    its KV cache generates on ONNX Runtime, one call a step on that cache (docs/onnx.md).
    ``pt``: the PyTorch reference, as for :func:`crosscheck` (default: loaded afresh from
    ``model``'s spec). ``new_tokens``: greedy steps per prompt (default 32). Prompts:
    ``texts``, else ``inputs`` (texts or seeded random ids), else three short built-in
    ones; each prompt decodes alone, without padding.
    ``pt_config``: as for :func:`crosscheck`.
    The teacher-forced steps also get llama.cpp's distribution metrics
    (``details["distribution"]``: each step a position scored at PyTorch's token, each
    prompt an item); ``kl_budget`` judges them by a bootstrap interval over the prompts,
    as :func:`crosscheck`'s does over sequences. ``quantize`` (a keras-hub causal LM):
    a Keras-quantised copy generates, judged by the mode's budget (``kl_budget``
    overrides it) over the prompts, its tokens reported (docs/generate.md); a stored one so too.
    ``backend`` (``"jax"``, ``"torch"``; ``--backend``): a ``keras-hub:<SPEC>`` causal
    LM generates on that Keras backend, in a process of its own (docs/backends.md).
    """
    from . import validation
    from .adapters.sources.specs import as_spec
    from .checks.generation.check import (
        DEFAULT_PROMPTS,
        GenerationOptions,
        check_generation,
        prompts_of,
    )
    from .checks.generation.quantised import QuantisedGeneration

    check_input_arguments(texts=texts, inputs=inputs)
    options = GenerationOptions.from_arguments(
        new_tokens=new_tokens,
        embeds=embeds,
        kl_budget=kl_budget,
        quantize=quantize,
        backend=backend,
    )
    if isinstance(model, str):
        model = as_spec(model)  # parsed once, here: the generation head is read off it
    paired = pair(  # a T5's seq2seq LM loads, and a side that cannot generate is refused
        model,
        pt,
        head=generation_head(model),
        pt_config=pt_config,
        generating=True,
        allow_pickle=allow_pickle,
        backend=backend,
    )
    tf_model, pt_model = paired.tf, paired.reference
    if quantize is not None:  # a copy; exit 2 for a side Keras cannot quantise
        from .adapters.keras_hub.quantised_side import quantised_twin

        tf_model = quantised_twin(tf_model, quantize, False)[0]
        options = replace(options, embeds=False)
    elif (stored := QuantisedGeneration.stored_in(tf_model, options.kl_budget)) is not None:
        options = replace(options, quantised=stored, embeds=False)
    if texts is not None:
        inputs = InputOptions(texts=validation.texts(texts))
    elif inputs is None or (inputs.texts is None and inputs.random is None):
        inputs = replace(inputs or InputOptions(), texts=DEFAULT_PROMPTS)
    prompts = prompts_of(make_batches(tf_model, inputs), options.new_tokens, tf_model.limits)
    return check_generation(tf_model, pt_model, prompts, options)
