"""The Python API: the same checks the CLI runs, returning Report objects.

``model`` arguments accept a MODEL spec string, a :class:`TFModel`, or a Hugging Face
TF model object the caller already holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .checks import DEFAULT_LOCALISE, DEFAULT_REFEREE_RUNS, LOCALISE_MODES, REFEREE_RUNS
from .compare import Tolerance
from .errors import TfparityError
from .inputs import Batch, InputOptions
from .orchestration import (
    executed,
    load_model,
    pair,
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
    batches = _make(tf_model.tokenizer, tf_model.limits, tf_model.pad_token_id, options)
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

    _check_common(texts=texts, inputs=inputs, batches=batches, tolerance=tolerance)
    validation.optional_callable(embeds_fn, "embeds_fn")
    tf_model = load_model(model, companion=source, signature=signature)
    if batches is None:
        if texts is not None:
            inputs = InputOptions(texts=validation.texts(texts))
        batches = make_batches(tf_model, inputs)
    if execution is not None:
        tf_model = executed(tf_model, execution.settle(len(batches)))
    report = _check(tf_model, batches, EmbedsOptions(tolerance=tolerance, embeds_fn=embeds_fn))
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
    from .checks.crosscheck.check import CrosscheckOptions
    from .checks.crosscheck.check import crosscheck as _check
    from .checks.crosscheck.export_parity import export_parity
    from .checks.crosscheck.quantised import with_quantisation
    from .checks.crosscheck.requantised import with_requantisation
    from .compare.bootstrap import parse_limits

    _check_common(inputs=inputs, batches=batches, tolerance=tolerance)
    limits = parse_limits(kl_budget) if kl_budget is not None else None  # exit 2 first
    if quantize is not None or attribute:
        from .adapters.tf_common.quantize import check_request

        check_request(quantize, attribute)
    if isinstance(budget, str):
        from .compare.budgets import budgets_for

        budgets_for(None).tensor_budget(
            budget
        )  # a malformed budget is refused before any model loads
    if localise not in LOCALISE_MODES:
        modes = " or ".join(repr(m) for m in LOCALISE_MODES)
        raise ValueError(f"localise must be {modes}, not {localise!r}.")
    if referee not in REFEREE_RUNS:
        modes = " or ".join(repr(m) for m in REFEREE_RUNS)
        raise ValueError(f"referee must be {modes}, not {referee!r}.")
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
    options = CrosscheckOptions(
        tolerance=tolerance,
        localise=localise,
        budget=budget,
        referee_runs=referee,
        kl_budget=None if quantize else limits,  # with quantize, the quantisation's budget
        labels=None if labels is None else tuple(str(x) for x in labels),
    )
    runner = executed(tf_model, execution)
    if source_model is not None:  # the source runs as asked, else as it runs by default
        source_model = executed(
            source_model, (asked or source_model.execution).settle(len(batches))
        )
        reports = export_parity(runner, source_model, pt_model, batches, options)
        if quantised is not None:  # on the export-vs-PyTorch report
            reports[1] = with_quantisation(
                reports[1], runner, quantised, pt_model, batches, quantize, limits, *alone
            )
        twin = fresh_twin(runner, source_model, pt, data)
        reports[1] = with_requantisation(reports[1], twin, batches)
        return _tokenizers_judged(reports, tf_model, pt, batches, tokenized)
    reports = [_check(runner, pt_model, batches, options, tf_traces=tf_traces)]
    reports[0] = with_requantisation(reports[0], fresh_twin(runner, None, pt, data), batches)
    if quantised is not None:
        reports[0] = with_quantisation(
            reports[0], runner, quantised, pt_model, batches, quantize, limits, *alone
        )
    if wants_reload(reload, separate_port=tf is not None, named_reference=pt is not None):
        reloaded = save_and_reload(tf_model)
        if reloaded is not None:  # an export has no save-and-reload pass of its own
            options = replace(options, label="crosscheck-reloaded")
            reports.append(_check(executed(reloaded, execution), pt_model, batches, options))
    return _tokenizers_judged(reports, tf_model, pt, batches, tokenized)


def _tokenizers_judged(
    reports: list[Report], tf_model: Any, pt: Any, batches: Sequence[Batch], tokenized: bool
) -> list[Report]:
    """``reports`` judged on the texts' tokenizers (:func:`tokenizers_judged`), the
    reference's own found from ``pt``; as they are when the ids were not tokenised."""
    from .checks.crosscheck.artefacts import tokenizers_judged
    from .orchestration import reference_tokenizer

    texts = any(b.texts for b in batches)
    if not (tokenized and texts) or tf_model.tokenizer is None:
        return reports
    return tokenizers_judged(reports, tf_model.tokenizer, reference_tokenizer(pt), batches)


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
    from . import validation
    from .checks.gradients.check import GradientsOptions, check_gradients
    from .checks.gradients.frozen import frozen_patterns

    _check_common(inputs=inputs, batches=batches, tolerance=tolerance)
    patterns = frozen_patterns(frozen)
    validation.optional_callable(embeds_fn, "embeds_fn")
    validation.seed(seed)
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
    options = GradientsOptions(seed=seed, tolerance=tolerance, embeds_fn=embeds_fn, frozen=patterns)
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
    from . import validation
    from .checks.diagnose import DiagnoseOptions, check_diagnose, diagnose_inputs

    validation.tolerance(tolerance)
    inputs = diagnose_inputs(
        input_ids,
        inputs_embeds,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        position_ids=position_ids,
    )
    return check_diagnose(load_model(model), inputs, DiagnoseOptions(tolerance=tolerance))


def check_tying(model: Any = "minilm", *, inputs: InputOptions | None = None) -> Report:
    """Embedding tying, the LM head's transform, round-trip decoding and inversion risk
    (``report.details``: tied, head_transform, roundtrip, noise). Pass a model loaded
    with its head (``TFModel.load(spec, lm_head=True)``) to include the LM head."""
    from .checks.tying import check_tying as _check

    _check_common(inputs=inputs)
    tf_model = load_model(model)
    return _check(tf_model, make_batches(tf_model, inputs))


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

    _check_common(inputs=inputs, tolerance=tolerance)
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise ValueError(f"permutations must be an int >= 1, not {permutations!r}.")
    tf_model = load_model(model, head=head)
    options = PositionsOptions(permutations=permutations, seed=seed, tolerance=tolerance)
    return _check(tf_model, make_batches(tf_model, inputs), options)


def _check_common(**arguments: Any) -> None:
    """The argument checks every check function shares (see :mod:`tfparity.validation`):
    wrong types raise TypeError naming the parameter, before any model loads."""
    from . import validation

    if "texts" in arguments:
        validation.texts(arguments["texts"])
    if "inputs" in arguments:
        validation.instance(arguments["inputs"], InputOptions, "inputs", "an InputOptions")
    if "batches" in arguments:
        validation.sequence_of(arguments["batches"], Batch, "batches")
    if "tolerance" in arguments:
        validation.tolerance(arguments["tolerance"])


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
    the decoder's tokens are judged; a defect is localised in the encoder, if there.
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
        DEFAULT_NEW_TOKENS,
        DEFAULT_PROMPTS,
        GenerationOptions,
        check_generation,
        check_new_tokens,
        prompts_of,
    )
    from .checks.generation.quantised import QuantisedGeneration
    from .compare.bootstrap import parse_limits

    _check_common(texts=texts, inputs=inputs)
    limits = parse_limits(kl_budget) if kl_budget is not None else None  # exit 2 first
    if quantize is not None:
        from .adapters.tf_common.quantize import check_request

        check_request(quantize)  # an unknown mode exits 2 before any load
        if backend not in (None, "tensorflow"):
            raise TfparityError(
                f"quantize={quantize} (--quantize) quantises the keras-hub causal LM in "
                f"this process, on TensorFlow; with backend={backend} (--backend) it runs "
                "in a process of its own, where it is not quantised: drop one of the two."
            )
    quantised = None if quantize is None else QuantisedGeneration.of(quantize, limits)
    new_tokens = DEFAULT_NEW_TOKENS if new_tokens is None else new_tokens
    check_new_tokens(new_tokens)
    validation.instance(embeds, bool, "embeds", "a bool")
    if isinstance(model, str):
        model = as_spec(model)  # parsed once, here: the generation head is read off it
    paired = pair(  # a T5's seq2seq LM loads, and a side that cannot generate is refused
        model,
        pt,
        head=_generation_head(model),
        pt_config=pt_config,
        generating=True,
        allow_pickle=allow_pickle,
        backend=backend,
    )
    tf_model, pt_model = paired.tf, paired.reference
    if quantize is not None:  # a copy; exit 2 for a side Keras cannot quantise
        from .adapters.keras_hub.quantised_side import quantised_twin

        tf_model, embeds = quantised_twin(tf_model, quantize, False)[0], False
    elif (stored := QuantisedGeneration.stored_in(tf_model, limits)) is not None:
        quantised, embeds = stored, False
    if texts is not None:
        inputs = InputOptions(texts=validation.texts(texts))
    elif inputs is None or (inputs.texts is None and inputs.random is None):
        inputs = replace(inputs or InputOptions(), texts=DEFAULT_PROMPTS)
    prompts = prompts_of(make_batches(tf_model, inputs), new_tokens, tf_model.limits)
    options = GenerationOptions(
        new_tokens=new_tokens, embeds=embeds, kl_budget=limits, quantised=quantised
    )
    return check_generation(tf_model, pt_model, prompts, options)


def _generation_head(model: Any) -> Any:
    """The class a spec loads for generation: with its LM head (its config's class, or
    ``tiny:<type>/causal-lm``'s; a T5's seq2seq LM, ``tiny:t5/seq2seq-lm``'s); None for
    a spec naming its head, or an object (taken as it is). ``model`` is parsed by the
    caller: the spec travels on to :func:`~tfparity.orchestration.pair` parsed."""
    from .adapters.hf_tf.loading import generation_head
    from .adapters.sources.specs import ModelSpec

    if not isinstance(model, ModelSpec):
        return None
    if model.head is None and (model.inner is None or model.inner.head is None):
        return generation_head(model)  # the body's spec, generated with its LM head
    return None  # keras-hub:tiny:<type>/<head>: the inner spec names it
