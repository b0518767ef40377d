"""Step by step, one prompt's greedy generation on both sides, judged (numpy only).

Three measures per step, each against the float64 referee's bound of floating-point
noise at that step (:class:`~tfparity.compare.Referee`):

- **Teacher forcing.** Both sides fed PyTorch's tokens, so one early flip does not hide
  the steps after it. TF's logits are refereed against PyTorch's float32 and float64
  ones; a step where TF would choose another token is a *flip*, and a flip is a
  *near-tie* when both sides' margins (their choice over the other side's) are within
  the noise (four times the referee's allowed RMSE, as the cross-check's agreement
  measures), so rounding alone can flip it; otherwise it is a defect. Logits whose RMSE
  to float64 is beyond that noise are a defect too, flip or not: a defect that has not
  yet flipped a token is still a defect.
- **Cache consistency.** The TF side's cached decoding against its own recomputation
  without a cache, on the same tokens: within ``factor`` times the noise the reference
  shows at that step (PyTorch float32 to float64, or PyTorch's own cached decoding to its
  recomputation, whichever is larger) plus ``floor`` times the logits' RMS.
- **The seed's path.** Generation started from gathered ``inputs_embeds`` against the ids
  path recomputed without a cache, on its own tokens, under the same bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...compare import Referee, rmse

NOISE_FACTOR = 4.0  # noise = 4 x the referee's allowed RMSE (checks/crosscheck.py's _noise)
TOP_K = 5


@dataclass
class Step:
    """One step of one prompt: both sides' free-running tokens and, fed PyTorch's
    tokens, TF's choice, the largest logit difference, the top-k overlap, the referee's
    verdict, both sides' top-1 minus top-2 margins, and whether TF's choice flips."""

    step: int
    tf_token: int
    pt_token: int
    forced_tf_token: int
    max_logit_diff: float
    top_k_overlap: float
    rmse_vs_fp64: float
    reference_rmse_vs_fp64: float
    allowed_rmse: float
    refereed_ok: bool
    noise: float
    tf_margin: float
    pt_margin: float
    flip: str  # "agree", "near-tie" or "defect"
    cache_rmse: float | None = None
    cache_allowed: float | None = None
    cache_ok: bool | None = None
    embeds_rmse: float | None = None
    embeds_ok: bool | None = None


@dataclass
class Forced:
    """One prompt's teacher-forced logits [N, vocab]: TF's, PyTorch's float32 and
    float64 ones, all fed PyTorch's tokens; and PyTorch's cached decoding's own."""

    tf: np.ndarray
    pt: np.ndarray
    pt64: np.ndarray
    pt_cached: np.ndarray


@dataclass
class Divergent:
    """Where the free-running tokens first part: the step, each side's token and its
    top-1 minus top-2 margin there, whether the flip is a near-tie (both sides' logits as
    they decoded), and whether TF fed the same prefix without a cache chooses PyTorch's
    token (then the flip comes from TF's cached decoding)."""

    step: int
    tf_token: int
    pt_token: int
    tf_margin: float
    pt_margin: float
    near_tie: bool
    recomputed_agrees: bool


@dataclass
class PromptSteps:
    """One prompt's judged steps and what they add up to."""

    steps: list[Step] = field(default_factory=list)
    first_divergence: Divergent | None = None

    @property
    def agreed(self) -> int:
        """Tokens agreed before the first divergent step (all when none)."""
        return self.first_divergence.step if self.first_divergence else len(self.steps)

    @property
    def defects(self) -> list[int]:
        return [s.step for s in self.steps if s.flip == "defect"]

    @property
    def near_ties(self) -> list[int]:
        return [s.step for s in self.steps if s.flip == "near-tie"]

    @property
    def referee_failures(self) -> list[int]:
        return [s.step for s in self.steps if not s.refereed_ok]

    @property
    def beyond_noise(self) -> list[int]:
        """Steps whose teacher-forced logits miss the float64 referee by more than the
        noise a near-tie is measured against (its RMSE over the noise): a defect, though
        it may not have flipped a token yet."""
        return [s.step for s in self.steps if s.rmse_vs_fp64 > s.noise]

    @property
    def failing(self) -> list[int]:
        """The steps that fail the tokens: flips by a defect, or logits beyond the noise."""
        return sorted(set(self.defects) | set(self.beyond_noise))

    @property
    def cache_failures(self) -> list[int]:
        return [s.step for s in self.steps if s.cache_ok is False]

    @property
    def embeds_failures(self) -> list[int]:
        return [s.step for s in self.steps if s.embeds_ok is False]


def judge_steps(
    tf_tokens: np.ndarray,
    tf_cached: np.ndarray,
    pt_tokens: np.ndarray,
    forced: Forced,
    referee: Referee = Referee(),
) -> PromptSteps:
    """Each step teacher-forced and refereed; the first divergence of the free-running
    tokens, with both sides' margins (``tf_cached``: TF's step logits as it decoded)."""
    steps = [_step(k, tf_tokens, pt_tokens, forced, referee) for k in range(len(pt_tokens))]
    judged = PromptSteps(steps)
    parted = np.nonzero(np.asarray(tf_tokens) != np.asarray(pt_tokens))[0]
    if len(parted):
        k = int(parted[0])
        a, b = int(tf_tokens[k]), int(pt_tokens[k])
        tf_logits, pt_logits = tf_cached[k], forced.pt_cached[k]
        tf_over = float(tf_logits[a]) - float(tf_logits[b])
        pt_over = float(pt_logits[b]) - float(pt_logits[a])
        judged.first_divergence = Divergent(
            k,
            a,
            b,
            top_margin(tf_logits),
            top_margin(pt_logits),
            tf_over <= steps[k].noise and pt_over <= steps[k].noise,
            # the prefixes agree up to k: the teacher-forced step k is this step recomputed
            steps[k].forced_tf_token == b,
        )
    return judged


def _step(k: int, tf_tokens, pt_tokens, forced: Forced, referee: Referee) -> Step:
    a, r, t = forced.tf[k], forced.pt[k], forced.pt64[k]
    verdict = referee.batches(f"step {k}", [a], [r], [t])
    noise = NOISE_FACTOR * verdict.allowed_rmse
    mine, theirs = int(np.argmax(a)), int(pt_tokens[k])
    flip = "agree"
    if mine != theirs:
        tf_over = float(a[mine]) - float(a[theirs])  # each side's choice over the other's
        pt_over = float(r[theirs]) - float(r[mine])
        flip = "near-tie" if tf_over <= noise and pt_over <= noise else "defect"
    return Step(
        step=k,
        tf_token=int(tf_tokens[k]),
        pt_token=theirs,
        forced_tf_token=mine,
        max_logit_diff=float(np.max(np.abs(a.astype(np.float64) - r))),
        top_k_overlap=top_k_overlap(a, r),
        rmse_vs_fp64=verdict.actual_rmse,
        reference_rmse_vs_fp64=verdict.reference_rmse,
        allowed_rmse=verdict.allowed_rmse,
        refereed_ok=verdict.passed,
        noise=noise,
        tf_margin=top_margin(a),
        pt_margin=top_margin(r),
        flip=flip,
    )


def top_margin(logits: np.ndarray) -> float:
    """The top-1 logit minus the top-2 one."""
    top = np.partition(np.asarray(logits, np.float64), -2)[-2:]
    return float(top[1] - top[0])


def top_k_overlap(a: np.ndarray, b: np.ndarray, k: int = TOP_K) -> float:
    """The share of the ``k`` top tokens of ``a`` that are among ``b``'s."""
    k = min(k, len(a))
    top_a = set(np.argpartition(-a, k - 1)[:k].tolist())
    top_b = set(np.argpartition(-b, k - 1)[:k].tolist())
    return len(top_a & top_b) / k


def cache_bounds(forced: Forced, referee: Referee = Referee()) -> np.ndarray:
    """Per step, the RMSE a cached step may differ from its recomputation by: ``factor``
    times the noise the reference shows there (float32 to float64, or its own cached
    decoding to its recomputation, the larger), plus ``floor`` times the logits' RMS."""
    bounds = []
    for k in range(len(forced.pt)):
        noise = max(rmse(forced.pt[k], forced.pt64[k]), rmse(forced.pt_cached[k], forced.pt[k]))
        scale = float(np.sqrt(np.mean(np.square(forced.pt64[k].astype(np.float64)))))
        bounds.append(referee.allowed(noise, scale))
    return np.array(bounds)


def judge_cache(judged: PromptSteps, cached: np.ndarray, recomputed: np.ndarray, bounds) -> None:
    """Each step's cached logits against the recomputation without a cache (in place)."""
    for s, c, f, bound in zip(judged.steps, cached, recomputed, bounds, strict=True):
        s.cache_rmse = rmse(c, f)
        s.cache_allowed = float(bound)
        s.cache_ok = bool(s.cache_rmse <= bound)


def judge_embeds(judged: PromptSteps, logits: np.ndarray, recomputed: np.ndarray, bounds) -> None:
    """Each step of the generation started from ``inputs_embeds`` against the ids path
    recomputed without a cache on the same tokens (in place)."""
    for s, e, f, bound in zip(judged.steps, logits, recomputed, bounds, strict=True):
        s.embeds_rmse = rmse(e, f)
        s.embeds_ok = bool(s.embeds_rmse <= bound)
