"""The sweep's generate check (``tfparity sweep --generate N``): each corpus item a prompt,
decoded alone (no padding) for N greedy tokens on both sides, each through its own KV
cache, and judged by the generation check itself
(:func:`tfparity.checks.generation.check.judge_prompts`): the tokens agreed, the first
divergent step with both sides' margins, a near-tie flip told from a defect by the
float64 referee on the teacher-forced logits, the side's KV cache against its recomputation.

What the sweep adds is the bookkeeping: which models and options it can honour (refused
with exit 2 otherwise), how long an item may be (its prompt and N tokens must fit the
model's positions), and the compact per-item record the summary counts from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..compare.distribution import PositionMetrics
from ..errors import TfparityError
from .bucketing import PaddedBatch
from .distribution import item_values
from .itemcheck import RowResult

GENERATE = "generate"
# The item's verdict on its tokens: every token agreed; the tokens part at a flip within
# the float64 referee's noise (a near-tie); TF's cached decoding alone parts them (fed
# the same prefix without a cache, TF chooses PyTorch's token); a flip beyond the noise.
VERDICTS = ("agree", "near-tie", "cache", "defect")


def check_generate_options(
    new_tokens: Any, checks: tuple[str, ...], execution: Any, tolerance: Any
) -> None:
    """Refuse (exit 2) what ``--generate`` cannot honour, before any model loads: a step
    count that is not a positive int, and the ways of running that apply to the batched
    checks only (generation runs the side's own ``generate`` eagerly in float32). The
    model itself is judged once loaded
    (:func:`tfparity.checks.generation.check.generation_refusal`)."""
    from ..checks.generation.check import check_new_tokens

    check_new_tokens(new_tokens, "--generate (the new tokens per item)")
    if execution.precision != "fp32" or execution.xla:
        raise TfparityError(
            "--generate decodes with the model's own generate, eagerly in float32, and "
            f"judges it against float32 PyTorch; --precision {execution.precision}"
            f"{' and --xla' if execution.xla else ''} cannot apply to it: sweep those "
            "without --generate."
        )
    if tolerance is not None and checks == (GENERATE,):
        raise TfparityError(
            "--atol/--rtol set the tolerance of the per-token checks (--checks), but the "
            "generate check is judged by the float64 referee: drop them, or add --checks."
        )


def prompt_limit(limit: int | None, new_tokens: int) -> int | None:
    """The longest prompt that fits the model's ``limit`` positions with ``new_tokens``
    more (None: no limit); refused (exit 2) when none fits."""
    if limit is None:
        return None
    if new_tokens >= limit:
        raise TfparityError(
            f"--generate {new_tokens}: the model has {limit} positions, so no prompt fits "
            f"with {new_tokens} new tokens; ask for fewer than {limit}."
        )
    return limit - new_tokens


@dataclass
class GenerateCheck:
    """The generate check of one process: the TF causal LM, its PyTorch reference and
    the way TF runs (device, TF32), with N new tokens per item."""

    tf_model: Any  # a TF side that can generate (checks.generation.generation_refusal)
    pt_model: Any
    new_tokens: int
    execution: Any

    def run(self, padded: PaddedBatch) -> list[RowResult]:
        """One RowResult per real row: that item's prompt generated and judged alone."""
        from ..adapters.runtime.execution import placed
        from ..checks.generation.check import GenerationOptions, judge_prompts, prompts_of

        # Each row without its padding; the bucketer kept items within the prompt limit.
        prompts = prompts_of([padded.batch], self.new_tokens, self.tf_model.limits)
        options = GenerationOptions(new_tokens=self.new_tokens, embeds=False, localise=False)
        with placed(self.execution):
            verdicts = judge_prompts(
                self.tf_model, self.pt_model, prompts[: padded.real_rows], options
            )
        return [
            row_result(v.row, v.passed, v.failing, v.problems, v.distribution) for v in verdicts
        ]


def row_result(
    row: dict,
    passed: bool,
    failing: list[str],
    problems: list[str],
    spread: PositionMetrics | None = None,
) -> RowResult:
    """One item's record: the largest teacher-forced logit difference and its step, the
    teacher-forced top-1 agreement (steps where TF, fed PyTorch's tokens, chooses
    PyTorch's), the generation's own figures (compact: no per-step table) and the
    teacher-forced steps' distribution metrics as sums (``spread``, one item)."""
    steps = row["steps"]
    diffs = [s["max_logit_diff"] for s in steps]
    worst = int(np.argmax(diffs))
    return RowResult(
        passed=passed,
        max_abs_diff=float(diffs[worst]),
        worst=f"step {worst} logits",
        failing=tuple(failing),
        top1_agree=sum(s["flip"] == "agree" for s in steps),
        top1_tokens=len(steps),
        distribution=(item_values(spread, 1)[0] or None) if spread is not None else None,
        generation={
            "new_tokens": row["new_tokens"],
            "prompt_tokens": row["prompt_tokens"],
            "tokens_agreed": row["tokens_agreed"],
            "verdict": verdict(row),
            "first_divergent_step": row["first_divergent_step"],
            "defects": row["defects"],
            "near_ties": row["near_ties"],
            "referee_failures": row["referee_failures"],
            "cache_ok": not row["cache_failures"],
            "cache_failures": row["cache_failures"],
            "tf_tokens": row["tf_tokens"],
            "pt_tokens": row["pt_tokens"],
            "problems": problems,
        },
    )


def verdict(row: dict) -> str:
    """One of :data:`VERDICTS` for a prompt's row of the generation check."""
    if row["defects"]:
        return "defect"
    first = row["first_divergent_step"]
    if first is None:
        return "agree"
    if first["near_tie"]:
        return "near-tie"
    return "cache" if first["recomputed_agrees"] else "defect"
