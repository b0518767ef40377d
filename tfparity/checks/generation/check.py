"""Greedy generation, TF against PyTorch: a causal LM port, or a seq2seq one (T5, mT5:
the prompt feeds the encoder, the decoder's tokens are judged), is judged by the tokens
it generates, through its own KV-cache path (HF TF ``generate`` against PyTorch
``generate``).

Per prompt: the tokens agreed, the first divergent step with both sides' top-1 minus
top-2 margins there, and per step (teacher-forced: both sides fed PyTorch's tokens) the
largest logit difference, the top-k overlap and the float64 referee's verdict. The verdict
tells a near-tie flip from a defect (:mod:`.steps`). On the TF side, each
cached step is compared with a recomputation without cache, and generation started from
gathered ``inputs_embeds`` with the ids path. Where tokens part by a defect, the
cross-check of one forward pass names the layer: the teacher-forced sequence of a causal
LM, a seq2seq model's encoder on the prompt (its decoder is not localised); the
generator says which (:meth:`~tfparity.adapters.interfaces.sides.Generator.forward_pass`).

The frameworks are the adapters': the TF side's decoding is the
:class:`~tfparity.adapters.interfaces.sides.Generator` it declares (``tf_model.generator()``:
HF TF ``generate``, or keras-hub ``CausalLM.generate``; a side that cannot generate
refuses, exit 2), PyTorch's is the reference's (its ``greedy`` and ``step_logits``, see
:class:`~tfparity.adapters.interfaces.sides.Reference`; stored outputs refuse by name,
exit 2); this module judges numpy arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from ...adapters.interfaces.greedy import GreedyRun, SameStart
from ...adapters.interfaces.sides import Generator, Reference, TFSide
from ...compare import Comparison, compare_arrays
from ...compare.distribution import PositionMetrics
from ...errors import TfparityError
from ...inputs import Batch, Limits
from ...results import Divergence, Report
from ..crosscheck import distribution
from ..crosscheck.decoder import decoder_divergence
from .distribution import forced_distribution
from .options import GenerationOptions, check_new_tokens
from .steps import (
    Forced,
    PromptSteps,
    cache_bounds,
    judge_cache,
    judge_embeds,
    judge_steps,
)

# Prompts when none are given: short, so that a prompt and 32 new tokens fit the tiny
# models' 64 positions (the other checks' built-in sentences run to 60 tokens there).
DEFAULT_PROMPTS = (
    "The quick brown fox",
    "Hello world.",
    "Numerical parity means that two implementations",
)


NO_STEPS = "--kl-budget judges the teacher-forced steps' logits, and no step compared any."


@dataclass
class _Prompt:
    """One prompt's runs and its judged steps."""

    index: int
    prompt: np.ndarray
    tf: GreedyRun
    pt: GreedyRun
    forced: Forced
    steps: PromptSteps
    recomputed: np.ndarray
    embeds: GreedyRun | None = None
    same_start: SameStart | None = None  # the embeds start left the ids start's state
    embeds_recomputed: np.ndarray | None = None


def check_generation(
    tf_model: TFSide,
    pt_model: Reference,
    prompts: Sequence[np.ndarray],
    options: GenerationOptions = GenerationOptions(),
) -> Report:
    """``prompts``: one id array per prompt, without padding (each decodes alone)."""
    generator = tf_model.generator()  # exit 2 where the side cannot generate
    refusal = generator.embeds_refusal if options.embeds else None
    runs = _runs(generator, pt_model, prompts, options, refusal)
    q = options.quantised
    comparisons = [c for run in runs for c in _comparisons(run, flips=q is None)]
    metrics = forced_distribution([r.forced for r in runs], [r.pt.tokens for r in runs])
    limits = q.limits if q is not None else options.kl_budget
    kl_verdict = distribution.judged(metrics, limits, NO_STEPS)
    over = distribution.failures(kl_verdict, "prompts")
    comparisons += over
    passed = all(c.passed for c in comparisons)
    divergence = None
    if not passed:  # a quantised side's layer is --attribute's to find, not the referee's
        divergence = (
            q.divergence(bool(over))
            if q is not None
            else _localise(generator, tf_model, pt_model, runs, options)
        )
    rows = [_prompt_row(run) for run in runs]
    return Report(
        check="generate",
        model=tf_model.name,
        passed=passed,
        comparisons=comparisons,
        first_divergence=divergence,
        notes=list(tf_model.notes)
        + list(pt_model.notes)
        + list(generator.notes)
        + _notes(tf_model, generator, runs, refusal),
        details={
            "compares": f"{_generating(tf_model)} generate (actual) vs PyTorch generate "
            "(expected), greedy, same weights and prompts",
            "judge": q.judge_line()
            if q is not None
            else f"{options.referee.describe('per step')}; a flip within 4x its allowed "
            "RMSE is a near-tie",
            "reference": pt_model.name,
            "decoding": generator.decoding,
            "prompts": len(runs),
            "new_tokens": options.new_tokens,
            "kv_cache": "yes" if generator.keeps_cache else "none (recomputes)",
            "embeds_start": refusal or ("compared" if options.embeds else "not run"),
            "generation": rows,
            **distribution.details(
                metrics, kl_verdict, items="prompts", positions="teacher-forced steps"
            ),
            **({"quantisation": q.details(rows)} if q is not None else {}),
        },
    )


def _runs(
    generator: Generator,
    pt_model: Reference,
    prompts: Sequence[np.ndarray],
    options: GenerationOptions,
    refusal: str | None,
) -> list[_Prompt]:
    """Both sides' generation, the teacher-forced and recomputed logits, judged. One
    framework at a time: switching between TensorFlow's and PyTorch's thread pools prompt
    by prompt slows both (each spins after its work, holding cores)."""
    n = options.new_tokens
    tf_runs = [generator.generate(p, n) for p in prompts]
    starts: list[GreedyRun | SameStart | None] = [None] * len(prompts)
    if options.embeds and refusal is None:
        starts = [generator.generate_from_embeds(p, n) for p in prompts]
    pt_runs = [pt_model.greedy(p, n) for p in prompts]
    fed = [(p, r.tokens) for p, r in zip(prompts, pt_runs, strict=True)]
    pt32 = [pt_model.step_logits(p, t) for p, t in fed]
    pt64 = [pt_model.step_logits(p, t, float64=True) for p, t in fed]
    runs = []
    for i, prompt in enumerate(prompts):
        tf_run, pt_run, start = tf_runs[i], pt_runs[i], starts[i]
        known: dict[bytes, np.ndarray] = {}  # TF's recomputations, by the tokens fed
        fed = _recomputed(generator, prompt, pt_run.tokens, known)
        forced = Forced(tf=fed, pt=pt32[i], pt64=pt64[i], pt_cached=pt_run.logits)
        steps = judge_steps(tf_run.tokens, tf_run.logits, pt_run.tokens, forced, options.referee)
        bounds = cache_bounds(forced, options.referee)
        recomputed = _recomputed(generator, prompt, tf_run.tokens, known)
        judge_cache(steps, tf_run.logits, recomputed, bounds)
        run = _Prompt(i, np.asarray(prompt), tf_run, pt_run, forced, steps, recomputed)
        if isinstance(start, SameStart):
            run.same_start = start
        elif start is not None:
            run.embeds = start
            run.embeds_recomputed = _recomputed(generator, prompt, start.tokens, known)
            judge_embeds(steps, start.logits, run.embeds_recomputed, bounds)
        runs.append(run)
    return runs


def _recomputed(
    generator: Generator, prompt: np.ndarray, tokens: np.ndarray, known: dict
) -> np.ndarray:
    """TF's step logits for ``tokens`` without a cache; made once per token sequence."""
    key = np.asarray(tokens).tobytes()
    if key not in known:
        known[key] = generator.step_logits(prompt, tokens)
    return known[key]


# ----------------------------------------------------------------------------- verdicts


def _comparisons(run: _Prompt, flips: bool = True) -> list[Comparison]:
    """Per prompt: the tokens (teacher-forced logits, judged by their flips; reported
    only with ``flips`` False, a quantised side's), the side's KV cache against recomputation,
    and the start from ``inputs_embeds`` (where it ran)."""
    s, i = run.steps, run.index
    tokens = _tokens_problem(s) if flips else None
    found = [
        _judged(f"prompt {i}: tokens", run.forced.tf, run.forced.pt, tokens),
        _judged(
            f"prompt {i}: cache",
            run.tf.logits,
            run.recomputed,
            _steps_problem(s, "cache", "cached step {k} differs from recomputation"),
        ),
    ]
    if run.same_start is not None:  # bitwise the ids start's state: its decoding follows
        start = run.same_start
        found.append(
            _judged(f"prompt {i}: from inputs_embeds", start.logits, start.ids_logits, None)
        )
    if run.embeds is not None:
        text = "step {k} started from inputs_embeds differs from the ids path"
        found.append(
            _judged(
                f"prompt {i}: from inputs_embeds",
                run.embeds.logits,
                run.embeds_recomputed,
                _steps_problem(s, "embeds", text),
            )
        )
    return found


def _judged(name: str, actual: np.ndarray, expected: np.ndarray, problem: str | None) -> Comparison:
    """The logits' statistics, with the generation's verdict (``problem``: None passes):
    the steps' judge decides, not a tolerance."""
    c = compare_arrays(actual, expected, name=name, check_dtype=False)
    return replace(c, passed=problem is None, problem=problem, judge="referee", referee=None)


def _tokens_problem(s: PromptSteps) -> str | None:
    """Why a prompt's tokens fail: a flip by a defect, else teacher-forced logits beyond
    the referee's noise (a defect that has not flipped a token yet); None: they pass."""
    if not s.defects:
        return _logits_problem(s)
    d = s.first_divergence
    first = (
        f"first divergent step {d.step}: TF {d.tf_token}, PyTorch {d.pt_token} (margins TF "
        f"{d.tf_margin:.3g}, PyTorch {d.pt_margin:.3g}); "
        if d is not None
        else "the free-running tokens agree, but "
    )
    return (
        f"{first}fed PyTorch's tokens, TF's choice flips by more than the noise at "
        f"step(s) {_list(s.defects)}"
    )


def _logits_problem(s: PromptSteps) -> str | None:
    """Teacher-forced logits beyond the noise at steps where no token flips by a defect:
    the first such step, by how much, and how many more."""
    if not s.beyond_noise:
        return None
    d = s.first_divergence
    lead = (
        "every token agrees"
        if d is None
        else f"the tokens part at step {d.step} by a near tie only"
    )
    k = s.beyond_noise[0]
    step = s.steps[k]
    return (
        f"{lead}, but fed PyTorch's tokens, TF's logits miss the float64 referee beyond the "
        f"near-tie noise at step(s) {_list(s.beyond_noise)}: first at step {k}, RMSE "
        f"{step.rmse_vs_fp64:.3g} over {step.noise:.3g} (max logit diff "
        f"{step.max_logit_diff:.3g})"
    )


def _steps_problem(s: PromptSteps, kind: str, text: str) -> str | None:
    """The first failing step of ``kind`` ("cache" or "embeds"), with its RMSE."""
    failing = s.cache_failures if kind == "cache" else s.embeds_failures
    if not failing:
        return None
    k = failing[0]
    step = s.steps[k]
    got = step.cache_rmse if kind == "cache" else step.embeds_rmse
    return (
        f"{text.format(k=k)}: RMSE {got:.3g} over {step.cache_allowed:.3g} allowed; "
        f"{len(failing)} of {len(s.steps)} steps differ"
    )


def _list(steps: list[int], most: int = 8) -> str:
    shown = ", ".join(str(k) for k in steps[:most])
    return shown + (f", ... ({len(steps)} in all)" if len(steps) > most else "")


def _localise(
    generator: Generator,
    tf_model: TFSide,
    pt_model: Reference,
    runs: list[_Prompt],
    options: GenerationOptions,
) -> Divergence | None:
    """Where tokens part by a defect, or teacher-forced logits are beyond the noise: the
    layer the cross-check finds in the first such prompt's forward pass the generator
    names (a causal LM's teacher-forced sequence: the prompt and PyTorch's tokens; a
    seq2seq model's encoder on the prompt, and past a clean encoder its decoder's
    layers, teacher-forced)."""
    # a prompt whose tokens a defect flipped first: the plainest evidence
    flipped = next((r for r in runs if r.steps.defects), None)
    bad = flipped or next((r for r in runs if r.steps.failing), None)
    if bad is None:
        return None
    where = _first_failing_step(bad)
    if not options.localise:
        return Divergence(None, "head", None, f"{where} (localisation not run)")
    found = _localised(generator, tf_model, pt_model, bad, options, where)
    found.hint = f"{found.hint}; {_crosscheck_advice(tf_model)}"
    return found


def _first_failing_step(bad: _Prompt) -> str:
    """Where the prompt first fails: its first divergent step where a defect flips a
    token, else its first step whose logits are beyond the noise."""
    s = bad.steps
    if s.defects:
        d = s.first_divergence
        step = d.step if d is not None else s.defects[0]
        return f"prompt {bad.index}, first divergent step {step}"
    return (
        f"prompt {bad.index}, first failing step {s.beyond_noise[0]} (its teacher-forced "
        "logits beyond the referee's noise; no token flipped by it)"
    )


def _crosscheck_advice(tf_model: TFSide) -> str:
    """The command that judges every tensor of this model on one forward pass (a
    seq2seq LM's decoder teacher-forced too)."""
    head = tf_model.head.value
    command = tf_model.command_name  # MODEL, then any option it needs (--backend jax)
    named = command.partition(" --")[0].endswith(f"/{head}")  # tiny:gpt2/causal-lm's head
    option = "" if named else f" --head {head}"
    return f"`tfparity crosscheck {command}{option}` judges every hidden state on the same weights"


def _localised(
    generator: Generator,
    tf_model: TFSide,
    pt_model: Reference,
    bad: _Prompt,
    options: GenerationOptions,
    where: str,
) -> Divergence:
    """The layer the cross-check of the failing prompt's forward pass names."""
    from ..crosscheck.check import CrosscheckOptions, crosscheck

    one = generator.forward_pass(pt_model, bad.prompt, bad.pt.tokens)
    batch = Batch(one.input_ids, np.ones_like(one.input_ids))
    found = crosscheck(one.tf_side, one.reference, [batch], CrosscheckOptions())
    divergence = found.first_divergence
    if divergence is None:
        beyond = decoder_divergence(one, tf_model, pt_model, where, options.referee)
        if beyond is not None:
            return beyond
        hint = f"{where}; the cross-check of {one.covers} passes: {one.when_clean}"
        return Divergence(None, one.beyond, None, hint)
    divergence.hint = f"{where}; the cross-check of {one.covers} finds: {divergence.hint}"
    return divergence


def _notes(
    tf_model: TFSide, generator: Generator, runs: list[_Prompt], refusal: str | None
) -> list[str]:
    notes = []
    if not generator.keeps_cache:
        notes.append(
            f"{type(tf_model.model).__name__} keeps no KV cache: its generate recomputes "
            "every step, so cache consistency compares two recomputations."
        )
    if refusal:
        notes.append(f"Generation from inputs_embeds not compared: {refusal}.")
    same = [r for r in runs if r.same_start is not None]
    if same:
        cache = same[0].same_start.cache_tensors
        notes.append(
            f"Generation from inputs_embeds: in {len(same)} of {len(runs)} prompts the "
            f"prefill from gathered embeddings left the logits and all {cache} KV-cache "
            "tensors bitwise as the prefill from ids does; every later step feeds token ids "
            "on that cache, so it decodes exactly as the ids path (not decoded again)."
        )
    ties = [(r.index, k) for r in runs for k in r.steps.near_ties]
    if ties:
        where = ", ".join(f"prompt {i} step {k}" for i, k in ties[:5])
        notes.append(
            f"Near-tie flips (both margins within the referee's bound of floating-point "
            f"noise, not a defect): {where}" + (f" ({len(ties)} in all)" if len(ties) > 5 else "")
        )
    off = [
        (r.index, [k for k in r.steps.referee_failures if k not in r.steps.failing]) for r in runs
    ]
    off = [(i, ks) for i, ks in off if ks]
    if off:
        where = "; ".join(f"prompt {i} steps {_list(ks, 4)}" for i, ks in off[:3])
        notes.append(
            "The teacher-forced logits exceed the float64 referee's bound, but within the "
            f"near-tie noise (4x its allowed RMSE), at {where}: not a defect."
        )
    return notes


def _prompt_row(run: _Prompt) -> dict:
    """One prompt for the JSON and the text: tokens, the first divergence, the steps."""
    s = run.steps
    return {
        "prompt": run.index,
        "prompt_tokens": len(run.prompt),
        "tokens_agreed": s.agreed,
        "new_tokens": len(s.steps),
        "first_divergent_step": asdict(s.first_divergence) if s.first_divergence else None,
        "tf_tokens": [int(t) for t in run.tf.tokens],
        "pt_tokens": [int(t) for t in run.pt.tokens],
        "embeds_tokens": _embeds_tokens(run),
        # the embeds start left the decoder bitwise in the ids start's state
        "embeds_same_start": run.same_start is not None,
        "defects": s.defects,
        "near_ties": s.near_ties,
        "referee_failures": s.referee_failures,
        "cache_failures": s.cache_failures,
        "embeds_failures": s.embeds_failures,
        "steps": [asdict(step) for step in s.steps],
    }


def _generating(tf_model: TFSide) -> str:
    """Who generates on the TF side, for the ``compares`` line: TF, or the Keras
    backend a keras-hub causal LM runs on in a process of its own (``--backend``)."""
    framework = tf_model.framework
    return "TF" if framework == "TensorFlow" else framework


def generation_refusal(tf_model: TFSide) -> str | None:
    """Why ``tf_model`` cannot be judged by its generation; None where it can: a causal
    LM with its LM head, or a seq2seq model (T5, mT5) with its seq2seq LM head, on a side
    that declares greedy decoding (HF TF models and keras-hub CausalLM tasks; the
    others' ``generator()`` says why not)."""
    from ...architectures.heads import Head

    arch = tf_model.architecture
    if not arch.causal and not arch.seq2seq:
        return (
            f"{tf_model.name} is a {tf_model.model_type} model, which is not a causal "
            "language model: generation needs one (gpt2, gpt-sw3, opt, ctrl, gptj, xglm, "
            "openai-gpt, mistral; through keras-hub: gpt2, llama, mistral, qwen2, qwen3, "
            "gemma), or a seq2seq LM (t5, mt5)"
        )
    if arch.seq2seq and tf_model.head is not Head.SEQ2SEQ_LM:
        return (
            f"{tf_model.name} is a {tf_model.model_type} model without its decoder (it is a "
            f"{tf_model.head.value} model): generation needs the encoder-decoder with its "
            f"LM head, which `tfparity generate` loads (e.g. tiny:{tf_model.model_type}) "
            f"and sweep --generate loads when asked for it (tiny:{tf_model.model_type}/"
            "seq2seq-lm)"
        )
    if arch.causal and tf_model.head is not Head.CAUSAL_LM:
        return (
            f"{tf_model.name} has no LM head (it is a {tf_model.head.value} model): "
            "generation needs a causal LM head, e.g. tiny:gpt2/causal-lm or "
            "keras-hub:tiny:qwen2/causal-lm"
        )
    try:
        tf_model.generator()
    except TfparityError as exc:
        return str(exc).rstrip(".")
    return None


def _embeds_tokens(run: _Prompt) -> list[int] | None:
    """The tokens generated from ``inputs_embeds``: its own run's, or, where it left the
    ids start's very state, the ids path's (what decoding on that state gives)."""
    if run.embeds is not None:
        return [int(t) for t in run.embeds.tokens]
    return [int(t) for t in run.tf.tokens] if run.same_start is not None else None


def prompts_of(batches: Sequence[Batch], new_tokens: int, limits: Limits) -> list[np.ndarray]:
    """Each sequence of ``batches`` without its padding: one prompt each, decoded alone
    (padding changes a decoder's numbers, and the two sides pad differently). Refused
    (exit 2) where a prompt and ``new_tokens`` exceed the model's positions."""
    check_new_tokens(new_tokens)
    prompts = [
        ids[np.asarray(mask, bool)]
        for b in batches
        for ids, mask in zip(b.input_ids, b.attention_mask, strict=True)
    ]
    longest = max(len(p) for p in prompts)
    if limits.max_positions is not None and longest + new_tokens > limits.max_positions:
        raise TfparityError(
            f"The longest prompt has {longest} tokens; with {new_tokens} new tokens that is "
            f"{longest + new_tokens} positions, and the model has {limits.max_positions}: "
            "ask for fewer new tokens or give shorter prompts."
        )
    return prompts


# ----------------------------------------------------------------------------- per prompt


@dataclass
class PromptVerdict:
    """One prompt judged alone: its row (as in a report's ``details["generation"]``) and
    its comparisons (the tokens, the cache, the start from ``inputs_embeds`` where it
    ran), each with the verdict :func:`check_generation` gives it."""

    row: dict
    comparisons: list[Comparison]
    # Its teacher-forced steps' distribution metrics (one item), as the report's
    # ``details["distribution"]`` is made of; None where no step compared any.
    distribution: PositionMetrics | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons)

    @property
    def failing(self) -> list[str]:
        """The failing comparisons by what they compare: "tokens", "cache", ..."""
        return [c.name.split(": ", 1)[-1] for c in self.comparisons if not c.passed]

    @property
    def problems(self) -> list[str]:
        return [c.problem for c in self.comparisons if not c.passed and c.problem]


def judge_prompts(
    tf_model: TFSide,
    pt_model: Reference,
    prompts: Sequence[np.ndarray],
    options: GenerationOptions = GenerationOptions(),
) -> list[PromptVerdict]:
    """Each prompt's generation judged exactly as :func:`check_generation` judges it, one
    verdict per prompt, without the report's parts across prompts (localisation, notes):
    for callers that keep a verdict per prompt, such as ``tfparity sweep --generate``."""
    generator = tf_model.generator()  # exit 2 where the side cannot generate
    refusal = generator.embeds_refusal if options.embeds else None
    runs = _runs(generator, pt_model, prompts, options, refusal)
    return [
        PromptVerdict(
            _prompt_row(run),
            _comparisons(run),
            forced_distribution([run.forced], [run.pt.tokens]),
        )
        for run in runs
    ]
