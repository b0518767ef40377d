"""The sweep's calibrated float64 referee (sweep --referee calibrated): the same
verdicts as the full referee, leaf by leaf, on the repo corpus, on every fault of every
family's catalogue, and on clean models in fp16 and bf16, with fewer float64 rows."""

from __future__ import annotations

import numpy as np
import pytest

from tfparity.adapters.hf_tf.tf_model import TFModel
from tfparity.architectures import lookup, tiny_types
from tfparity.compare import Referee, row_rms
from tfparity.orchestration import reference_for
from tfparity.sweep import DEFAULT_CORPUS
from tfparity.sweep.bucketing import Bucketer
from tfparity.sweep.calibrated_referee import CalibratedReferee
from tfparity.sweep.checks import BatchContext, SweepChecks
from tfparity.sweep.corpus import iter_items, scan
from tfparity.sweep.encode import encode
from tfparity.testing import catalogue_for


def padded_batches(tf_model, items: int, batch_size: int):
    info = scan(DEFAULT_CORPUS)
    chosen = [i for i in iter_items(info) if i.index < items]
    bucketer = Bucketer(batch_size, 64, tf_model.pad_token_id or 0, "right", with_types=True)
    encoded = encode(tf_model.tokenizer, iter(chosen), limit=None, truncate=True)
    return list(bucketer.batches(encoded))


def verdicts(tf_model, pt_model, batches, mode: str, runner=None):
    """Per item: (passed, failing leaves); and the referee's stats."""
    checks = SweepChecks(runner or tf_model, tf_model, pt_model, referee_mode=mode)
    out = {}
    for padded in batches:
        ctx = BatchContext(padded, (runner or tf_model).run(padded.batch))
        for item, result in zip(padded.items, checks.run("crosscheck", ctx), strict=True):
            out[item.index] = (result.passed, result.failing)
    return out, checks.referee_stats()


def same_verdicts(tf_model, pt_model, batches, runner=None) -> dict:
    full, _ = verdicts(tf_model, pt_model, batches, "full", runner)
    calibrated, stats = verdicts(tf_model, pt_model, batches, "calibrated", runner)
    assert calibrated == full
    assert stats["disagreements"] == 0 and stats["items"] == len(full)
    return stats


def test_the_rule_decides_only_outside_the_band():
    ref = CalibratedReferee(Referee(factor=3.0, floor=0.0), margin=1.0, upper_margin=1.0)
    assert ref.decide("x", 1.0, 1.0, True, 1000) == (None, 0.0)  # not calibrated: float64
    # PyTorch's own relative error 1e-6; TF's error -0.6 aligned with it (a clean port).
    ref.learn("x", e_r=1e-6, s_r=1.0, d=1.4e-6, e_a=np.sqrt(1.4**2 + 1 - 2 * 0.6 * 1.4) * 1e-6)
    assert ref.alignment == 0.5  # the measured -0.6 is inside the default bound
    # Sure pass while the worst case sqrt(d^2 + e_r^2 + 2 * 0.5 d e_r) <= 3 e_r: d <= 2.37 e_r.
    assert ref.decide("x", 2.3e-6, 1.0, True, 1000)[0] is True
    assert ref.decide("x", 2.45e-6, 1.0, True, 1000)[0] is None  # float64 decides
    assert ref.decide("x", 4.1e-6, 1.0, True, 1000)[0] is False  # d > (F+1) e_r: sure fail
    assert ref.decide("x", 4.1e-6, 1.0, True, 2)[0] is True  # two values: factor 100
    assert ref.decide("x", 1e-3, 1.0, True, 2)[0] is False  # and past it, a sure fail
    assert ref.decide("x", 0.0, 1.0, False, 1000)[0] is False  # TF not finite: fails anyway
    assert ref.decide("x", float("nan"), 1.0, True, 1000)[0] is None  # PyTorch not finite
    # A row whose error is below low/margin is a violation, and widens low.
    assert ref.learn("x", e_r=0.5e-6, s_r=1.0, d=0.7e-6, e_a=0.5e-6) is False
    assert ref.low["x"] == 0.5e-6 and ref.high["x"] == 1e-6
    rms = row_rms(np.ones((2, 3, 4)), np.array([[1, 1, 0], [0, 0, 0]]))
    assert rms.tolist() == [1.0, 0.0]


def test_an_aligned_error_widens_the_cosine_bound_back_to_the_triangle():
    """TF = PyTorch with PyTorch's own error amplified (cosine 1): counted as a
    violation, and afterwards only the triangle inequality (d <= 2 e_r) passes a row."""
    ref = CalibratedReferee(Referee(factor=3.0, floor=0.0), margin=1.0, upper_margin=1.0)
    assert ref.learn("x", e_r=1e-6, s_r=1.0, d=2.5e-6, e_a=3.5e-6) is False  # e_a = d + e_r
    assert ref.alignment == pytest.approx(1.0)
    assert ref.decide("x", 2.3e-6, 1.0, True, 1000)[0] is None
    assert ref.decide("x", 1.9e-6, 1.0, True, 1000)[0] is True
    # With the bound at 1 no decided pass can be wrong: e_a <= d + e_r <= 3 e_r.
    bound = CalibratedReferee(Referee(factor=3.0, floor=0.0), margin=1.0, alignment=1.0)
    bound.learn("x", e_r=1e-6, s_r=1.0, d=1e-6, e_a=1e-6)
    assert bound.decide("x", 2.0e-6, 1.0, True, 1000)[0] is True
    assert bound.decide("x", 2.01e-6, 1.0, True, 1000)[0] is None


def test_calibrated_matches_full_on_the_repo_corpus_with_fewer_float64_rows(minilm):
    pt_model = reference_for("minilm")
    batches = padded_batches(minilm, items=64, batch_size=16)
    stats = same_verdicts(minilm, pt_model, batches)
    assert stats["items_fp64"] < stats["items"] / 2, stats


# Every family that writes its own fault catalogue (RoBERTa and ELECTRA share BERT's).
CATALOGUED = [t for t in tiny_types() if lookup(t).faults]


@pytest.mark.parametrize("family", CATALOGUED)
def test_calibrated_matches_full_on_every_fault_of_the_catalogue(family, load_tf_model):
    spec = f"tiny:{family}"
    pt_model = reference_for(spec)
    clean = load_tf_model(spec)
    batches = padded_batches(clean, items=16, batch_size=8)
    same_verdicts(clean, pt_model, batches)
    for fault in catalogue_for(family):
        same_verdicts(fault.apply(TFModel.load(spec)), pt_model, batches)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_calibrated_matches_full_on_clean_models_in_reduced_precision(precision):
    from tfparity.adapters.runtime.execution_options import ExecutionOptions

    for spec in ("tiny:bert", "tiny:gpt2"):
        tf_model = TFModel.load(spec)
        runner = tf_model.executed(ExecutionOptions(precision=precision))
        pt_model = reference_for(spec).in_precision(precision)
        batches = padded_batches(tf_model, items=40, batch_size=8)
        stats = same_verdicts(tf_model, pt_model, batches, runner)
        assert stats["items_fp64"] < stats["items"], stats
