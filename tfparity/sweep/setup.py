"""What a sweep loads once per process that runs batches, shared by the engines: the
local one (:mod:`~tfparity.sweep.local`, in the driver's process) and the Ray one
(:mod:`~tfparity.sweep.ray_engine`, in each actor). Also the tokenizing and bucketing
of the corpus (:func:`padded_stream`), which a Ray driver runs without a model, so every
worker gets the batches a single process would make.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..adapters.interfaces.sides import TFSide
from ..errors import TfparityError
from .bucketing import Bucketer, PaddedBatch, bucket_lengths
from .checks import BatchContext, SweepChecks
from .corpus import Item
from .encode import TooLong, encode
from .generate import GENERATE, GenerateCheck, prompt_limit
from .options import SweepOptions


@dataclass
class SweepSetup:
    """Everything loaded once per process: the TF model and its runner (compiled once
    per path; per bucket shape under XLA), one PyTorch model (and its float64 copy),
    the LM head, the bucketer settings."""

    tf_model: TFSide
    runner_model: TFSide  # the TF side under its execution
    checks: tuple[str, ...]
    runner: SweepChecks
    limit: int | None
    options: SweepOptions
    top1_note: str | None = None
    _padding_side: str = field(default="right")

    @classmethod
    def load(
        cls, model: Any, checks: tuple[str, ...], pt: Any, options: SweepOptions, execution: Any
    ) -> SweepSetup:
        from ..errors import TfparityError
        from ..orchestration import executed, pair
        from ..validation import same_architecture

        generating = GENERATE in checks
        # --generate loads a T5's seq2seq LM, as `tfparity generate` does (for it alone),
        # and refuses a side that cannot generate before its reference loads
        paired = pair(
            model,
            pt,
            pt_config=options.pt_config,
            execution=execution,
            generating=generating,
            signature=options.signature,
            with_reference="crosscheck" in checks or generating,
        )
        tf_model, pt_model = paired.tf, paired.reference
        if generating and tf_model.architecture.seq2seq and checks != (GENERATE,):
            others = ", ".join(c for c in checks if c != GENERATE)
            raise TfparityError(
                f"--checks {others} run on a seq2seq model's encoder, and {tf_model.name} "
                "is its encoder-decoder LM, which only --generate runs: sweep them in a "
                "run of their own (without --generate, on the model without /seq2seq-lm)."
            )
        if "embeds" in checks and tf_model.inputs_embeds_reason is not None:
            raise TfparityError(
                f"The embeds check cannot run: {tf_model.inputs_embeds_reason} "
                "(--checks crosscheck sweeps the rest)."
            )
        if checks == ("positions",):  # with no other check, a note per item judges nothing
            try:
                tf_model.position_facts()
            except TfparityError as refused:
                raise TfparityError(f"--checks positions cannot run: {refused}") from None
        if pt_model is not None:
            same_architecture(tf_model, pt_model)  # as the cross-check refuses it: exit 2
        head, logits_head, note = _load_head(tf_model)
        runner_model = executed(tf_model, execution)
        limit = _limit(tf_model)
        generate = None
        if generating:
            limit = prompt_limit(limit, options.generate)  # a prompt and its new tokens fit
            generate = GenerateCheck(tf_model, pt_model, options.generate, execution)
        runner = SweepChecks(
            runner_model,
            tf_model,
            pt_model,
            head,
            logits_head,
            tolerance=options.tolerance,
            seed=options.seed,
            referee_mode=options.referee,
            generate=generate,
        )
        side = options.padding_side or getattr(tf_model.tokenizer, "padding_side", "right")
        return cls(tf_model, runner_model, checks, runner, limit, options, note, side)

    def encoding(self) -> Encoding:
        """What the driver needs to tokenize and bucket items as this process does."""
        return Encoding(
            tokenizer=self.tf_model.tokenizer,
            limit=self.limit,
            pad_id=self.tf_model.pad_token_id or 0,
            padding_side=self._padding_side,
            with_types=bool(getattr(self.tf_model.config, "type_vocab_size", 0)),
            # XLA compiles once per input shape: give it a few fixed bucket shapes.
            fixed_shapes=self.runner_model.execution.xla,
            new_tokens=self.options.generate or 0,
            exact_lengths=self.tf_model.unmasked_reason is not None,
        )

    def run_facts(self) -> dict:
        """The run facts of summary.json's ``run`` that this process knows."""
        facts = {
            "traces": self.runner_model.traces,
            "traces_by_path": self.runner_model.traces_by_path(),
            **self.runner_model.execution.describe(),
            "buckets": bucket_lengths(self.limit),
            # the float64 referee's passes of the cross-check (generate's are its own)
            "referee": self.runner.referee_stats() if "crosscheck" in self.checks else None,
        }
        if GENERATE in self.checks:  # HF TF generate runs eagerly, whatever the others do
            facts["decoding"] = self.tf_model.generator().decoding  # causal, or seq2seq
            how = "eager (Hugging Face TF generate)"
            if any(name != GENERATE for name in self.checks):
                facts["generate_execution"] = how
            else:  # no batched run: what runs is generate's alone
                facts["execution"] = how
        return facts

    def run_batch(self, padded: PaddedBatch) -> list[dict]:
        """The result records of one padded batch, one per real row, in its order."""
        batched = any(name != GENERATE for name in self.checks)  # they share the TF ids run
        tf_ids = self.runner_model.run(_without_positions(padded.batch)) if batched else None
        ctx = BatchContext(padded, tf_ids)
        per_check = {name: self.runner.run(name, ctx) for name in self.checks}
        records = []
        for r, item in enumerate(padded.items):
            results = {name: per_check[name][r] for name in self.checks}
            records.append(
                {
                    "index": item.index,
                    "id": item.id,
                    "text": item.text,
                    "tokens": int(padded.batch.attention_mask[r].sum()),
                    "bucket": padded.bucket,
                    "passed": all(x.passed is not False for x in results.values()),
                    "checks": {name: x.to_dict() for name, x in results.items()},
                }
            )
        return records


@dataclass
class Encoding:
    """The tokenizer and bucketing settings of a loaded model (picklable, for a driver
    that deals batches to workers)."""

    tokenizer: Any
    limit: int | None
    pad_id: int
    padding_side: str
    with_types: bool
    fixed_shapes: bool = False
    new_tokens: int = 0  # --generate's: each item must fit ``limit`` with these on top
    exact_lengths: bool = False  # a side that cannot mask padding: one length per batch


def padded_stream(
    enc: Encoding, items: Iterator[Item], options: SweepOptions
) -> Iterator[PaddedBatch | list[dict]]:
    """Items -> bucketed batches (full ones as they fill, then the rest), with the
    records of items too long to run, in the order a single process makes them."""
    bucketer = Bucketer(
        options.batch_size,
        enc.limit,
        enc.pad_id,
        enc.padding_side,
        with_types=enc.with_types,
        fixed_shapes=enc.fixed_shapes,
        exact_lengths=enc.exact_lengths,
    )
    encoded = encode(
        enc.tokenizer, items, limit=enc.limit, truncate=options.truncate, new_tokens=enc.new_tokens
    )
    for e in encoded:
        if isinstance(e, TooLong):
            yield [_skipped_record(e)]
            continue
        yield from bucketer.add(e)
    yield from bucketer.flush()


def _skipped_record(e: TooLong) -> dict:
    return {
        "index": e.item.index,
        "id": e.item.id,
        "text": e.item.text,
        "tokens": e.tokens,
        "passed": None,
        "skipped": e.reason,
        "checks": {},
    }


def _limit(tf_model: Any) -> int | None:
    tok_max = getattr(tf_model.tokenizer, "model_max_length", None)
    found = [n for n in (tf_model.limits.max_positions, tok_max) if n and 0 < n < 10**6]
    return min(found) if found else None


def _without_positions(batch: Any) -> Any:
    return batch if batch.position_ids is None else replace(batch, position_ids=None)


def _load_head(tf_model: Any) -> tuple[Any, Any, str | None]:
    """A run's logits for top-1 agreement and the distribution metrics, as a function of
    its Trace (a head model's own ``logits``, else the LM head on the last hidden
    state), the Head they come from (a causal LM's are scored at the next token), and,
    without, why."""
    from ..adapters.hf_tf.lm_head import checkpoint_has_head, find_head
    from ..adapters.hf_tf.tf_model import TFModel
    from ..architectures.heads import Head

    headless = tf_model.headless_reason  # a keras-hub backbone
    if headless:
        return None, None, headless
    kind = tf_model.head
    if kind is Head.QUESTION_ANSWERING:
        return None, None, "a question-answering head has spans, not labels: no top-1 agreement"
    if kind is not Head.BASE:  # its logits: labels, or tokens of an LM head
        return (lambda trace: trace["logits"]), kind, None
    spec = tf_model.spec
    if spec is None:
        note = f"{tf_model.name} is held in memory: no checkpoint to load its LM head from"
        return None, None, note
    try:
        has = checkpoint_has_head(tf_model, spec.text)
    except Exception:  # an unusual config
        has = False
    if not has:
        return (
            None,
            None,
            (
                f"{tf_model.name} has no LM head in its checkpoint (config.architectures "
                f"{getattr(tf_model.config, 'architectures', None)}), so top-1 token agreement "
                "cannot be measured"
            ),
        )
    with_head = TFModel.load(spec.text, lm_head=True)
    try:
        head = find_head(with_head)
    except TfparityError as exc:  # MobileBERT's head builds its matrix from parts
        return None, None, str(exc)
    if head is None or head.logits is None:
        return None, None, f"the LM head of {tf_model.name} cannot be applied to hidden states"
    return (lambda trace: head.logits(trace["last_hidden_state"])), with_head.head, None
